"""Paired significance tests for comparing per-query scores of two systems, in torch.

Every test takes two tensors ``a`` and ``b`` of per-query scores with the queries on the last dimension
(``[Q]``, or ``[..., Q]`` to run many comparisons at once, e.g. ``[measures, Q]`` or
``[run_pairs, measures, Q]``) and tests the mean of the paired differences ``d = a - b``. All work is
vectorised over queries, comparisons and resamples on the device of the inputs, in float64.

* :func:`paired_t_test`: Student's paired t-test, two-sided (``scipy.stats.ttest_rel``).
* :func:`randomization_test`: paired randomisation (sign-flip permutation) test of the mean difference
  (``scipy.stats.permutation_test(..., permutation_type="samples")``); exact when ``2**Q <= n_resamples``.
* :func:`bootstrap_ci`: bootstrap confidence interval of the mean difference, percentile or BCa
  (``scipy.stats.bootstrap``).
* :func:`wilcoxon`: Wilcoxon signed-rank test, exact or normal approximation (``scipy.stats.wilcoxon``).
* :func:`cohens_d`: effect size, Cohen's d of the paired differences (``mean(d) / sd(d)``).
* :func:`tukey_hsd`: Tukey's honestly significant difference over several runs (``scipy.stats.tukey_hsd``).
* :func:`holm`, :func:`bonferroni`, :func:`benjamini_hochberg`: adjusted p-values for many tests
  (``statsmodels`` ``multipletests``, ``scipy.stats.false_discovery_control``); :func:`adjust` picks one by name.

Degenerate inputs have exact answers instead of NaNs and warnings: identical systems (every ``d`` is 0)
give p = 1 and the interval ``[0, 0]``; a constant non-zero difference (every ``d`` the same float64) gives
t-test p = 0; a single query gives t-test p = NaN (no variance estimate; unless the difference is 0) and a
randomisation p of 1. Differences equal only up to rounding (``(b + 0.1) - b`` is not the same float for every
``b``) have a spread of a few ulps: the t-test then gives, as scipy, a huge finite t and a p-value near 0, the same
conclusion; no tolerance decides "constant", since any would also swallow real, tiny differences.

A NaN score makes every test of its comparison NaN (statistic and p-value; the randomisation test's p-value is
NaN for an infinite difference too), as scipy's ``nan_policy="propagate"``; the corrections keep such p-values
out of the family and refuse values outside [0, 1].

Each family lives in a module of its own (``_t_test``, ``_resampling``, ``_wilcoxon``, ``_tukey``, ``_corrections``,
the distributions in ``_distributions``); this package is their one public import path.
"""

from __future__ import annotations

from torchrank.stats._corrections import CORRECTIONS, adjust, benjamini_hochberg, bonferroni, holm
from torchrank.stats._distributions import student_t_sf
from torchrank.stats._resampling import BootstrapResult, RandomizationResult, bootstrap_ci, randomization_test
from torchrank.stats._t_test import TTestResult, cohens_d, paired_t_test
from torchrank.stats._tukey import TukeyResult, studentized_range_sf, tukey_hsd
from torchrank.stats._wilcoxon import WilcoxonResult, wilcoxon

__all__ = [
    "CORRECTIONS",
    "BootstrapResult",
    "RandomizationResult",
    "TTestResult",
    "TukeyResult",
    "WilcoxonResult",
    "adjust",
    "benjamini_hochberg",
    "bonferroni",
    "bootstrap_ci",
    "cohens_d",
    "holm",
    "paired_t_test",
    "randomization_test",
    "student_t_sf",
    "studentized_range_sf",
    "tukey_hsd",
    "wilcoxon",
]

# Resamples are drawn in chunks of about this many (resample x query) elements, so memory stays bounded
# (~32 MB of float64 per chunk) whatever n_resamples and Q are. Every resampling test reads it here, at each call.
_CHUNK_ELEMENTS = 1 << 22
