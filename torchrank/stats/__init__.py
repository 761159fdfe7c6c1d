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
give p = 1 and the interval ``[0, 0]``; a constant non-zero difference gives t-test p = 0; a single query
gives t-test p = NaN (no variance estimate; unless the difference is 0) and a randomisation p of 1.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

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
# (~32 MB of float64 per chunk) whatever n_resamples and Q are.
_CHUNK_ELEMENTS = 1 << 22
# From this many degrees of freedom on, the t tail uses Hill's expansion instead of the continued fraction.
_HILL_DF = 10_000


class TTestResult(NamedTuple):
    """Result of :func:`paired_t_test`: t statistic, two-sided p-value, degrees of freedom (``Q - 1``)."""

    statistic: Tensor
    pvalue: Tensor
    df: int


class RandomizationResult(NamedTuple):
    """Result of :func:`randomization_test`.

    Attributes:
        statistic: The observed mean difference ``mean(a - b)``.
        pvalue: Two-sided p-value.
        n_resamples: Sign patterns evaluated (``2**Q`` when exact).
        exact: True when every sign pattern was enumerated.
    """

    statistic: Tensor
    pvalue: Tensor
    n_resamples: int
    exact: bool


class BootstrapResult(NamedTuple):
    """Result of :func:`bootstrap_ci`.

    Attributes:
        low: Lower end of the confidence interval of the mean difference.
        high: Upper end.
        statistic: The observed mean difference ``mean(a - b)``.
        standard_error: Standard deviation of the bootstrap distribution (``ddof=1``, as scipy).
        distribution: The bootstrap means ``[..., n_resamples]`` when asked for, else None.
    """

    low: Tensor
    high: Tensor
    statistic: Tensor
    standard_error: Tensor
    distribution: Tensor | None


# ----------------------------------------------------------------------------------------------------
# Student t distribution (torch has no betainc, so the regularised incomplete beta is computed here)
# ----------------------------------------------------------------------------------------------------


def _nonzero(x: Tensor) -> Tensor:
    # Lentz's method replaces exact zeros by a tiny number so that no division by zero happens.
    return torch.where(x.abs() < 1e-300, torch.full_like(x, 1e-300), x)


def _beta_continued_fraction(a: Tensor, b: Tensor, x: Tensor, max_iter: int) -> Tensor:
    """Continued fraction of I_x(a, b) (Numerical Recipes ``betacf``, modified Lentz), elementwise."""
    qab, qap, qam = a + b, a + 1, a - 1
    c = torch.ones_like(x)
    d = _nonzero(1 - qab * x / qap).reciprocal()
    h = d
    for m in range(1, max_iter + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = _nonzero(1 + aa * d).reciprocal()
        c = _nonzero(1 + aa / c)
        h = h * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = _nonzero(1 + aa * d).reciprocal()
        c = _nonzero(1 + aa / c)
        delta = d * c
        h = h * delta
        # One host sync every 8 steps; NaN entries compare False and so never hold the loop up.
        if m % 8 == 0 and not bool(((delta - 1).abs() > 1e-15).any()):
            break
    return h


def _lgamma_ratio(a: Tensor, b: Tensor) -> Tensor:
    """``lgamma(a + b) - lgamma(a)`` without the cancellation of two large lgammas when ``a`` is large."""
    # Stirling: lgamma(x) = (x - 1/2) log x - x + log(2 pi) / 2 + c(x); the series c is exact to ~1e-16
    # for x >= 20. For 10^5 queries, plain lgamma differences lose 6 digits of the p-value.
    big = a >= 20
    x = torch.where(big, a, torch.full_like(a, 20.0))

    def c(z: Tensor) -> Tensor:
        z2 = z * z
        return (1 / 12 - (1 / 360 - (1 / 1260 - 1 / (1680 * z2)) / z2) / z2) / z

    stirling = (x - 0.5) * torch.log1p(b / x) + b * torch.log(x + b) - b + c(x + b) - c(x)
    return torch.where(big, stirling, torch.lgamma(a + b) - torch.lgamma(a))


def _betainc(a: Tensor, b: Tensor, x: Tensor, y: Tensor, log_x: Tensor, log_y: Tensor) -> Tensor:
    """Regularised incomplete beta I_x(a, b), given ``y = 1 - x`` and both logarithms at full precision."""
    log_front = _lgamma_ratio(a, b) - torch.lgamma(b) + a * log_x + b * log_y
    front = torch.exp(log_front)
    # The fraction converges fast for x < (a + 1) / (a + b + 2); otherwise use I_x(a, b) = 1 - I_y(b, a).
    direct = x < (a + 1) / (a + b + 2)
    pa, pb, px = torch.where(direct, a, b), torch.where(direct, b, a), torch.where(direct, x, y)
    # The fraction needs O(sqrt(max(a, b))) terms.
    largest = int(torch.maximum(a, b).max().clamp(max=1e12)) if a.numel() else 0
    max_iter = 64 + 8 * math.isqrt(largest + 1)
    part = front * _beta_continued_fraction(pa, pb, px, max_iter) / pa
    return torch.where(direct, part, 1 - part)


def student_t_sf(t: Tensor, df: Tensor | float) -> Tensor:
    """Survival function ``P(T > t)`` of Student's t distribution with ``df`` degrees of freedom.

    Computed in float64 through the regularised incomplete beta function (no scipy); small tail
    probabilities keep their relative precision (``1e-300`` is not rounded to 0).

    Example:
        >>> import torch
        >>> student_t_sf(torch.tensor([0.0, 2.0, -2.0, float("inf")]), 10)
        tensor([0.5000, 0.0367, 0.9633, 0.0000], dtype=torch.float64)
    """
    t = torch.as_tensor(t, dtype=torch.float64)
    df = torch.as_tensor(df, dtype=torch.float64, device=t.device)
    t, df = torch.broadcast_tensors(t, df)
    ratio = t * t / df
    # P(|T| > |t|) = I_x(df/2, 1/2) with x = df / (df + t^2) = 1 / (1 + ratio) and y = 1 - x; x, y and
    # their logs are written so that t = 0 and t = inf give exact 0s and 1s and x near 1 keeps its digits.
    x, y = 1 / (1 + ratio), 1 / (1 + 1 / ratio)
    log_x, log_y = -torch.log1p(ratio), -torch.log1p(1 / ratio)
    large = df >= _HILL_DF
    half_df = torch.where(large, torch.ones_like(df), df / 2)  # large df never reach the fraction
    tail = 0.5 * _betainc(half_df, torch.full_like(df, 0.5), x, y, log_x, log_y)  # P(T > |t|)
    tail = torch.where(large, _hill_tail(ratio, df), tail)
    return torch.where(t >= 0, tail, 1 - tail)


def _hill_tail(ratio: Tensor, df: Tensor) -> Tensor:
    """``P(T > |t|)`` for large ``df`` by Hill's normal expansion (CACM algorithm 395, 1970).

    Relative error below 1e-12 for df >= 10^4 (checked against mpmath), where the continued fraction
    needs thousands of terms.
    """
    a = df - 0.5
    b = 48 * a * a
    y = a * torch.log1p(ratio)
    z = (((((-0.4 * y - 3.3) * y - 24.0) * y - 85.5) / (0.8 * y * y + 100.0 + b) + y + 3.0) / b + 1.0) * y.sqrt()
    return torch.where(ratio.isinf(), torch.zeros_like(z), _ndtr(-z))


def _ndtr(x: Tensor) -> Tensor:
    # torch.special.ndtr flushes lower tails below ~1e-17 to 0; erfc keeps them.
    return 0.5 * torch.special.erfc(-x / math.sqrt(2))


# ----------------------------------------------------------------------------------------------------
# input handling
# ----------------------------------------------------------------------------------------------------


def _differences(a: Tensor, b: Tensor) -> Tensor:
    """Validate two score tensors and return ``a - b`` in float64 with shape ``[M, Q]``."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Tensor):
            raise TypeError(f"Argument `{name}` must be a tensor of per-query scores, got {type(x).__name__}.")
        if x.dim() == 0 or x.shape[-1] == 0:
            raise ValueError(f"Argument `{name}` must hold at least one query on its last dim, got {tuple(x.shape)}.")
    if a.shape != b.shape:
        raise ValueError(f"Arguments `a` and `b` must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}.")
    if a.device != b.device:
        raise ValueError(f"Arguments `a` and `b` must be on the same device, got {a.device} and {b.device}.")
    # float64 throughout: sums of ~10^4 sign-flipped differences must not lose the ties that decide p.
    return (a.to(torch.float64) - b.to(torch.float64)).reshape(-1, a.shape[-1])


def _check_resamples(n_resamples: int) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"Argument `n_resamples` must be a positive int, got {n_resamples!r}.")


def _check_generator(generator: torch.Generator | None, device: torch.device) -> None:
    if generator is not None and generator.device.type != device.type:
        raise ValueError(
            f"Argument `generator` must be on the device of the scores ({device.type}), got {generator.device.type}."
        )


def _chunk(n_queries: int) -> int:
    """Resamples per chunk: about _CHUNK_ELEMENTS (resample x query) elements."""
    return max(1, _CHUNK_ELEMENTS // n_queries)


# ----------------------------------------------------------------------------------------------------
# tests
# ----------------------------------------------------------------------------------------------------


def paired_t_test(a: Tensor, b: Tensor) -> TTestResult:
    """Two-sided paired t-test of ``mean(a - b) = 0`` over the last dimension (``scipy.stats.ttest_rel``).

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.

    Returns:
        ``TTestResult(statistic, pvalue, df)``; ``statistic`` and ``pvalue`` have shape ``a.shape[:-1]``.
        Identical systems give ``t = 0, p = 1``; a constant non-zero difference gives ``t = +-inf,
        p = 0``; one query gives ``p = NaN`` unless its difference is 0.

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55])
        >>> res = paired_t_test(a, b)
        >>> round(res.statistic.item(), 4), round(res.pvalue.item(), 4), res.df
        (1.9598, 0.1216, 4)
    """
    d = _differences(a, b)
    n = d.shape[-1]
    mean = d.mean(-1)
    # Sum of squares by hand: torch.std warns (and returns NaN) for a single query.
    ss = (d - mean[:, None]).square().sum(-1)
    se = (ss / max(n - 1, 1) / n).sqrt()
    zero = (d == 0).all(-1)
    t = torch.where(zero, torch.zeros_like(mean), mean / se)
    if n == 1:
        t = torch.where(zero, t, torch.full_like(t, math.nan))
    p = torch.where(zero, torch.ones_like(t), 2 * student_t_sf(t.abs(), max(n - 1, 1)))
    shape = a.shape[:-1]
    return TTestResult(t.reshape(shape), p.clamp(max=1).reshape(shape), n - 1)


def _sign_chunks(n: int, n_resamples: int, exact: bool, generator: torch.Generator | None, device: torch.device):
    """Yield ``[chunk, Q]`` float64 matrices of +-1 sign patterns (all ``2**Q`` of them when ``exact``)."""
    step = _chunk(n)
    if exact:
        bits = torch.arange(n, device=device)
        for start in range(0, 2**n, step):
            codes = torch.arange(start, min(start + step, 2**n), device=device)
            yield ((codes[:, None] >> bits) & 1).to(torch.float64) * 2 - 1
        return
    # One random byte gives 8 signs through a [256, 8] table: a third of the time of one draw per sign on CPU.
    table = ((torch.arange(256, device=device)[:, None] >> torch.arange(8, device=device)) & 1).to(torch.float64)
    table = table * 2 - 1
    width = (n + 7) // 8
    for start in range(0, n_resamples, step):
        size = min(step, n_resamples - start)
        draws = torch.randint(0, 256, (size * width,), generator=generator, device=device)
        yield table.index_select(0, draws).view(size, width * 8)[:, :n]


def randomization_test(
    a: Tensor,
    b: Tensor,
    n_resamples: int = 10_000,
    *,
    generator: torch.Generator | None = None,
) -> RandomizationResult:
    """Two-sided paired randomisation test of the mean difference ``mean(a - b)``.

    Under the null hypothesis the labels "a" and "b" of each query are exchangeable, so every sign
    pattern of the differences is equally likely. The null distribution is the mean of ``s * d`` over
    ``n_resamples`` random sign vectors ``s`` (shared by all comparisons of a batch), or over all ``2**Q``
    of them when ``2**Q <= n_resamples`` (exact test). The p-value follows
    ``scipy.stats.permutation_test(..., permutation_type="samples")``: twice the smaller one-sided
    p-value, clipped to 1; Monte-Carlo p-values count the observed pattern (``(k + 1) / (n + 1)``), so
    they are never 0. Null means within 1e-12 times ``mean(|a - b|)`` of the observed mean count as ties,
    so that means equal in theory but not in floating point are not missed.

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.
        n_resamples: Random sign patterns to draw (chunked, so memory does not grow with it).
        generator: Random generator on the device of the scores, for reproducible p-values.

    Returns:
        ``RandomizationResult(statistic, pvalue, n_resamples, exact)``.

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55])
        >>> res = randomization_test(a, b)  # 2**5 = 32 patterns <= 10000: exact
        >>> round(res.pvalue.item(), 4), res.n_resamples, res.exact
        (0.1875, 32, True)
        >>> res = randomization_test(a.repeat(4), b.repeat(4), 2000, generator=torch.Generator().manual_seed(0))
        >>> res.exact, 0.0 < res.pvalue.item() < 0.01
        (False, True)
    """
    _check_resamples(n_resamples)
    d = _differences(a, b)
    _check_generator(generator, d.device)
    rows, n = d.shape
    observed = d.mean(-1)
    # Tolerance relative to the scale of the differences (not of the observed mean, which may be ~0):
    # sign-flipped sums carry rounding errors of that scale.
    gamma = 1e-12 * d.abs().mean(-1)
    exact = n < 63 and 2**n <= n_resamples
    greater = torch.zeros(rows, dtype=torch.int64, device=d.device)
    less = torch.zeros_like(greater)
    for signs in _sign_chunks(n, n_resamples, exact, generator, d.device):
        null = d @ signs.T / n  # [rows, chunk]: one matmul for every comparison and resample
        greater += (null >= (observed - gamma)[:, None]).sum(-1)
        less += (null <= (observed + gamma)[:, None]).sum(-1)
    total, extra = (2**n, 0) if exact else (n_resamples, 1)
    p = (torch.minimum(greater, less) + extra).to(torch.float64) / (total + extra) * 2
    shape = a.shape[:-1]
    return RandomizationResult(observed.reshape(shape), p.clamp(max=1).reshape(shape), total, exact)


def _bootstrap_means(d: Tensor, n_resamples: int, generator: torch.Generator | None) -> Tensor:
    """``[M, n_resamples]`` means of ``d`` over query resamples drawn with replacement (shared by all rows)."""
    rows, n = d.shape
    out = torch.empty(rows, n_resamples, dtype=torch.float64, device=d.device)
    # The chunk size depends on Q only, so a row draws the same resamples whatever else is in the batch
    # (the [rows, chunk] product is never larger than `out`).
    step = _chunk(n)
    for start in range(0, n_resamples, step):
        size = min(step, n_resamples - start)
        picks = torch.randint(0, n, (size, n), generator=generator, device=d.device)
        # Multiplicity of each query in each resample: the mean is then one matmul for all rows.
        counts = torch.zeros(size, n, dtype=torch.float64, device=d.device)
        counts.scatter_add_(1, picks, torch.ones_like(counts))
        out[:, start : start + size] = d @ counts.T / n
    return out


def _quantile_sorted(values: Tensor, q: Tensor) -> Tensor:
    """Row-wise linear-interpolation quantile (numpy's default) of row-sorted ``values`` at levels ``q``."""
    n = values.shape[-1]
    pos = (q * (n - 1)).clamp(0, n - 1)
    lo = pos.floor().long()
    hi = (lo + 1).clamp(max=n - 1)
    frac = pos - lo
    v_lo = values.gather(-1, lo[:, None])[:, 0]
    v_hi = values.gather(-1, hi[:, None])[:, 0]
    return v_lo + frac * (v_hi - v_lo)


def _bca_levels(d: Tensor, observed: Tensor, boot: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """Quantile levels of the BCa interval (Efron and Tibshirani 1993, eq. 14.9-14.15), as scipy."""
    n_boot = boot.shape[-1]
    below = (boot < observed[:, None]).sum(-1) + (boot <= observed[:, None]).sum(-1)
    # Keep the bias correction finite when the observed mean lies outside every bootstrap mean (scipy
    # returns NaN there).
    share = (below.to(torch.float64) / (2 * n_boot)).clamp(0.5 / n_boot, 1 - 0.5 / n_boot)
    z0 = torch.special.ndtri(share)
    # Jackknife acceleration; for the mean, (n-1)(mean of leave-one-out means - i-th one) = d_i - mean.
    u = d - observed[:, None]
    den = u.square().sum(-1).pow(1.5)
    accel = torch.where(den > 0, u.pow(3).sum(-1) / (6 * den), torch.zeros_like(den))
    z = torch.special.ndtri(torch.tensor(alpha, dtype=torch.float64, device=d.device))
    levels = []
    for za in (z, -z):
        num = z0 + za
        levels.append(_ndtr(z0 + num / (1 - accel * num)))
    return levels[0], levels[1]


def bootstrap_ci(
    a: Tensor,
    b: Tensor,
    n_resamples: int = 10_000,
    *,
    confidence_level: float = 0.95,
    method: str = "percentile",
    generator: torch.Generator | None = None,
    return_distribution: bool = False,
) -> BootstrapResult:
    """Two-sided bootstrap confidence interval of the mean difference ``mean(a - b)``.

    Queries are resampled with replacement (the same resamples for every comparison of a batch, which
    keeps the pairing between systems). ``method="percentile"`` takes the ``alpha/2`` and ``1 - alpha/2``
    quantiles of the bootstrap means (linear interpolation, as numpy and ``scipy.stats.bootstrap``);
    ``method="bca"`` shifts these levels by a bias correction and a jackknife acceleration, as
    ``scipy.stats.bootstrap(method="BCa")``. A distribution without spread (one query, identical
    systems, a constant difference) gives the interval ``[mean, mean]``.

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.
        n_resamples: Bootstrap resamples (drawn in chunks).
        confidence_level: Coverage of the interval, in (0, 1).
        method: ``"percentile"`` or ``"bca"``.
        generator: Random generator on the device of the scores.
        return_distribution: Also return the bootstrap means ``[..., n_resamples]``.

    Returns:
        ``BootstrapResult(low, high, statistic, standard_error, distribution)``.

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55])
        >>> res = bootstrap_ci(a, b, 20_000, generator=torch.Generator().manual_seed(0))
        >>> [round(v.item(), 3) for v in (res.statistic, res.low, res.high)]
        [0.052, 0.012, 0.1]
        >>> bootstrap_ci(a, a).low.item(), bootstrap_ci(a, a).high.item()
        (0.0, 0.0)
    """
    _check_resamples(n_resamples)
    if not isinstance(confidence_level, (int, float)) or not 0 < confidence_level < 1:
        raise ValueError(f"Argument `confidence_level` must be in (0, 1), got {confidence_level!r}.")
    if method not in ("percentile", "bca"):
        raise ValueError(f"Argument `method` must be 'percentile' or 'bca', got {method!r}.")
    d = _differences(a, b)
    _check_generator(generator, d.device)
    observed = d.mean(-1)
    boot = _bootstrap_means(d, n_resamples, generator)
    alpha = (1 - confidence_level) / 2
    if method == "bca":
        lo_q, hi_q = _bca_levels(d, observed, boot, alpha)
    else:
        lo_q = torch.full_like(observed, alpha)
        hi_q = torch.full_like(observed, 1 - alpha)
    ordered = boot.sort(-1).values
    low, high = _quantile_sorted(ordered, lo_q), _quantile_sorted(ordered, hi_q)
    # No spread: every bootstrap mean is the same number; say so exactly rather than through rounding.
    flat = ordered[:, 0] == ordered[:, -1]
    low = torch.where(flat, ordered[:, 0], low)
    high = torch.where(flat, ordered[:, 0], high)
    se = boot.std(-1, correction=1) if n_resamples > 1 and boot.numel() else torch.zeros_like(observed)
    shape = a.shape[:-1]
    dist = boot.reshape(*shape, n_resamples) if return_distribution else None
    return BootstrapResult(low.reshape(shape), high.reshape(shape), observed.reshape(shape), se.reshape(shape), dist)


def holm(pvalues: Tensor) -> Tensor:
    """Holm-Bonferroni adjusted p-values over all elements of ``pvalues`` (one family of tests).

    The i-th smallest of m p-values is multiplied by ``m - i + 1``, then a running maximum keeps the
    order and the result is clipped to 1, as ``statsmodels.stats.multitest.multipletests(p, method="holm")``.
    Rejecting where the adjusted p-value is ``<= alpha`` controls the family-wise error rate at ``alpha``.
    NaN p-values (tests that could not be computed) stay NaN and are not counted in m.

    Example:
        >>> import torch
        >>> holm(torch.tensor([0.01, 0.04, 0.03, 0.005]))
        tensor([0.0300, 0.0600, 0.0600, 0.0200])
    """
    if not isinstance(pvalues, Tensor):
        raise TypeError(f"Argument `pvalues` must be a tensor, got {type(pvalues).__name__}.")
    flat = pvalues.reshape(-1)
    missing = flat.isnan()
    m = flat.numel() - missing.sum()
    # NaNs sort last (as +inf) so they never lower the running maximum of the real p-values.
    order = torch.where(missing, torch.full_like(flat, math.inf), flat).argsort(stable=True)
    ranked = flat[order] * (m - torch.arange(flat.numel(), device=flat.device)).to(flat.dtype)
    adjusted = torch.empty_like(flat)
    adjusted[order] = ranked.cummax(0).values.clamp(max=1)
    return torch.where(missing, flat, adjusted).reshape(pvalues.shape)


# ----------------------------------------------------------------------------------------------------
# effect size
# ----------------------------------------------------------------------------------------------------


def cohens_d(a: Tensor, b: Tensor) -> Tensor:
    """Cohen's d of paired scores: ``mean(a - b) / sd(a - b)`` over the last dimension (``d_z``).

    The standard deviation is the sample one (``Q - 1`` in the denominator), so ``d * sqrt(Q)`` is the
    paired t statistic. Identical systems give 0, a constant non-zero difference ``+-inf``, one query NaN
    (unless its difference is 0).

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55])
        >>> round(cohens_d(a, b).item(), 4)
        0.8765
    """
    d = _differences(a, b)
    n = d.shape[-1]
    mean = d.mean(-1)
    sd = ((d - mean[:, None]).square().sum(-1) / max(n - 1, 1)).sqrt()
    zero = (d == 0).all(-1)
    effect = torch.where(zero, torch.zeros_like(mean), mean / sd)
    if n == 1:
        effect = torch.where(zero, effect, torch.full_like(effect, math.nan))
    return effect.reshape(a.shape[:-1])


# ----------------------------------------------------------------------------------------------------
# Wilcoxon signed-rank test
# ----------------------------------------------------------------------------------------------------

_ZERO_METHODS = ("wilcox", "pratt", "zsplit")
_WILCOXON_METHODS = ("auto", "exact", "asymptotic", "permutation")
# scipy's "auto": the exact null distribution up to this many queries, the normal approximation above
_EXACT_MAX = 50
# with ties or zeros and at most this many queries, "auto" enumerates every sign pattern (scipy: 2**13 < 9999)
_PERMUTATION_AUTO_MAX = 13
_PERMUTATION_MAX = 24  # 2**24 patterns: the most "permutation" enumerates


class WilcoxonResult(NamedTuple):
    """Result of :func:`wilcoxon`.

    Attributes:
        statistic: ``min(R+, R-)``, the smaller signed-rank sum (scipy's two-sided statistic).
        pvalue: Two-sided p-value.
        zstatistic: ``-|z|`` of the normal approximation (continuity-corrected when asked), as scipy's
            ``zstatistic``; NaN where it is undefined (no non-zero difference).
        exact: True where the p-value comes from an exact null distribution (the signed-rank
            distribution, or every sign pattern enumerated), False where from the normal approximation.
    """

    statistic: Tensor
    pvalue: Tensor
    zstatistic: Tensor
    exact: Tensor


def _average_ranks(values: Tensor) -> tuple[Tensor, Tensor]:
    """Row-wise average ranks (1-based) of ``values [M, Q]`` and the size of each element's tie group."""
    n = values.shape[-1]
    ordered, order = values.sort(dim=-1, stable=True)
    pos = torch.arange(n, device=values.device).expand_as(order)
    differs = ordered[:, 1:] != ordered[:, :-1]
    edge = torch.ones(values.shape[0], 1, dtype=torch.bool, device=values.device)
    start, end = torch.cat([edge, differs], 1), torch.cat([differs, edge], 1)
    first = torch.where(start, pos, 0).cummax(1).values
    last = torch.where(end, pos, n - 1).flip(1).cummin(1).values.flip(1)
    rank = torch.empty_like(values, dtype=torch.float64).scatter_(1, order, (first + last).to(torch.float64) / 2 + 1)
    size = torch.empty_like(rank).scatter_(1, order, (last - first + 1).to(torch.float64))
    return rank, size


def _signed_rank_tails(counts: Tensor, r_plus: Tensor) -> Tensor:
    """``2 min(P(T >= floor(r+)), P(T <= ceil(r+)))`` under the exact null distribution of the signed-rank
    sum ``T`` of ``counts`` non-zero differences (no ties), clipped to 1, as scipy's ``method="exact"``."""
    needed = sorted(set(counts.tolist()))
    width = max(needed) * (max(needed) + 1) // 2 + 1
    pmfs = torch.zeros(len(needed), width, dtype=torch.float64, device=r_plus.device)
    pmf = torch.ones(1, dtype=torch.float64, device=r_plus.device)
    index = {}
    for k in range(max(needed) + 1):  # T_k = T_{k-1} + k with probability 1/2: a loop over ranks, not queries
        if k:
            grown = torch.zeros(k * (k + 1) // 2 + 1, dtype=torch.float64, device=r_plus.device)
            grown[: pmf.numel()] += pmf * 0.5
            grown[-pmf.numel() :] += pmf * 0.5
            pmf = grown
        if k in needed:
            index[k] = len(index)
            pmfs[index[k], : pmf.numel()] = pmf
    cdf = pmfs.cumsum(1)
    sf = pmfs.flip(1).cumsum(1).flip(1)  # summed from the tail: small p-values keep their digits
    row = torch.tensor([index[c] for c in counts.tolist()], device=r_plus.device, dtype=torch.long)
    hi = r_plus.ceil().long().clamp(0, width - 1)
    lo = r_plus.floor().long().clamp(0, width - 1)
    p = 2 * torch.minimum(sf[row, lo], cdf[row, hi])
    return p.clamp(max=1)


def _sign_flip_p(weights: Tensor, base: Tensor, observed: Tensor) -> Tensor:
    """Two-sided p of ``observed`` against ``base + weights . [s > 0]`` over all ``2**Q`` sign patterns ``s``, as
    ``scipy.stats.permutation_test`` counts them (exactly, with its relative tolerance for ties)."""
    rows, n = weights.shape
    gamma = 100 * torch.finfo(torch.float64).eps * observed.abs()
    greater = torch.zeros(rows, dtype=torch.int64, device=weights.device)
    less = torch.zeros_like(greater)
    for signs in _sign_chunks(n, 2**n, True, None, weights.device):
        null = base[:, None] + weights @ ((signs + 1) / 2).T
        greater += (null >= (observed - gamma)[:, None]).sum(-1)
        less += (null <= (observed + gamma)[:, None]).sum(-1)
    return (2 * torch.minimum(greater, less).to(torch.float64) / 2**n).clamp(max=1)


def wilcoxon(
    a: Tensor,
    b: Tensor,
    *,
    zero_method: str = "wilcox",
    correction: bool = False,
    method: str = "auto",
) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test of the paired differences ``a - b`` (``scipy.stats.wilcoxon``).

    The absolute differences are ranked (average ranks for ties); ``R+`` and ``R-`` sum the ranks of the
    positive and negative differences. Zero differences are dropped (``zero_method="wilcox"``, default),
    ranked but not counted (``"pratt"``, with Cureton's adjustment of the normal approximation) or split
    between ``R+`` and ``R-`` (``"zsplit"``). The p-value comes from

    * ``method="exact"``: the exact distribution of ``R+`` over the non-zero differences (exact without
      ties; with ties ``R+`` is rounded towards the centre, as scipy);
    * ``"asymptotic"``: the normal approximation with mean ``n(n+1)/4`` and the tie-corrected variance
      ``(n(n+1)(2n+1) - sum(t^3 - t) / 2) / 24``, ``correction=True`` adding the continuity correction;
    * ``"permutation"``: every sign pattern of the differences enumerated (at most 24 queries);
    * ``"auto"`` (default), as scipy decides, for each comparison (row) on its own: exact for at most 50
      queries without zeros and ties, every sign pattern for at most 13 queries with them, else asymptotic.

    Identical systems (every difference 0) give ``p = 1`` (scipy: 1 or NaN, depending on the method).

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.
        zero_method: ``"wilcox"``, ``"pratt"`` or ``"zsplit"``.
        correction: Continuity correction of the normal approximation.
        method: ``"auto"``, ``"exact"``, ``"asymptotic"`` or ``"permutation"``.

    Returns:
        ``WilcoxonResult(statistic, pvalue, zstatistic, exact)``, each of shape ``a.shape[:-1]``.

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61, 0.47])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55, 0.33])
        >>> res = wilcoxon(a, b)  # no ties, no zeros, 6 queries: the exact distribution
        >>> res.statistic.item(), round(res.pvalue.item(), 4), res.exact.item()
        (2.0, 0.0938, True)
        >>> round(wilcoxon(a, b, method="asymptotic", correction=True).pvalue.item(), 4)
        0.0917
    """
    if zero_method not in _ZERO_METHODS:
        raise ValueError(f"Argument `zero_method` must be one of {_ZERO_METHODS}, got {zero_method!r}.")
    if method not in _WILCOXON_METHODS:
        raise ValueError(f"Argument `method` must be one of {_WILCOXON_METHODS}, got {method!r}.")
    if not isinstance(correction, bool):
        raise ValueError(f"Argument `correction` must be a bool, got {correction!r}.")
    d = _differences(a, b)
    n = d.shape[-1]
    if method == "permutation" and n > _PERMUTATION_MAX:
        raise ValueError(f"method='permutation' enumerates 2**Q sign patterns: at most {_PERMUTATION_MAX} queries.")
    zeros = d == 0
    sign = d.sign()
    # scipy drops zeros under "wilcox" by ranking them as NaN (last, outside every count): +inf does the same
    absolute = torch.where(zeros, math.inf, d.abs()) if zero_method == "wilcox" else d.abs()
    rank, ties = _average_ranks(absolute)
    counted = ~zeros if zero_method == "wilcox" else torch.ones_like(zeros)
    r_plus = (rank * (d > 0)).sum(-1)
    r_minus = (rank * (d < 0)).sum(-1)
    if zero_method == "zsplit":
        half_zero = (rank * zeros).sum(-1) / 2
        r_plus, r_minus = r_plus + half_zero, r_minus + half_zero
    count = counted.sum(-1).to(torch.float64)
    mean = count * (count + 1) / 4
    var = count * (count + 1) * (2 * count + 1)
    tie_groups = counted & ~zeros if zero_method == "pratt" else counted  # Pratt: zeros leave the tie term
    if zero_method == "pratt":
        n_zero = zeros.sum(-1).to(torch.float64)
        mean = mean - n_zero * (n_zero + 1) / 4
        var = var - n_zero * (n_zero + 1) * (2 * n_zero + 1)
    tie_term = ((ties.square() - 1) * tie_groups).sum(-1)  # a group of t adds t (t^2 - 1) = t^3 - t
    se = ((var - tie_term / 2) / 24).clamp_min(0).sqrt()
    z = (r_plus - mean) / se
    if correction:
        z = z - z.sign() * 0.5 / se
    p_normal = 2 * _ndtr(-z.abs())

    has_ties = ((ties > 1) & counted).any(-1)
    if method == "auto":
        use_exact = ~has_ties & ~zeros.any(-1) & (n <= _EXACT_MAX)
        use_perm = ~use_exact & torch.full_like(use_exact, n <= _PERMUTATION_AUTO_MAX)
    else:
        use_exact = torch.full_like(has_ties, method == "exact")
        use_perm = torch.full_like(has_ties, method == "permutation")
    p = p_normal
    if bool(use_exact.any()):
        p = torch.where(use_exact, _signed_rank_tails(count.long(), r_plus), p)
    if bool(use_perm.any()):
        # R+ after flipping signs s sums the ranks where s * sign(d) > 0 (zeros never count), plus zsplit's half
        # of the zero ranks: the negative differences' ranks, plus rank * sign(d) where s > 0
        zero_part = r_plus - (rank * (d > 0)).sum(-1)
        flipped = _sign_flip_p(rank * sign, zero_part + (rank * (d < 0)).sum(-1), r_plus)
        p = torch.where(use_perm, flipped, p)
    same = zeros.all(-1)
    p = torch.where(same, torch.ones_like(p), p)
    shape = a.shape[:-1]
    return WilcoxonResult(
        torch.minimum(r_plus, r_minus).reshape(shape),
        p.reshape(shape),
        (-z.abs()).reshape(shape),
        (use_exact | use_perm | same).reshape(shape),
    )


# ----------------------------------------------------------------------------------------------------
# Tukey's HSD (studentized range distribution by Gauss-Legendre quadrature)
# ----------------------------------------------------------------------------------------------------

# scipy's studentized_range switches to the infinite-df form (s = 1) from this many degrees of freedom
_RANGE_ASYMPTOTIC_DF = 100_000
_S_PANELS = 96  # Gauss-Legendre panels (16 nodes each) of the integral over s
_RANGE_CHUNK = 32  # studentized range values integrated at once


class TukeyResult(NamedTuple):
    """Result of :func:`tukey_hsd`.

    Attributes:
        statistic: ``[..., R, R]`` mean differences, row run minus column run.
        pvalue: ``[..., R, R]`` p-values of every pair (1 on the diagonal), adjusted for all pairs of one family.
        df: Degrees of freedom of the error variance, ``R (Q - 1)``.
    """

    statistic: Tensor
    pvalue: Tensor
    df: int


def _gauss_legendre(edges: Tensor, order: int) -> tuple[Tensor, Tensor]:
    """Nodes and weights ``[..., P * order]`` of Gauss-Legendre rules on the P panels between ``edges [..., P+1]``."""
    import numpy as np  # numpy's leggauss: the nodes are computed once per call, on the host

    x, w = np.polynomial.legendre.leggauss(order)
    x = torch.as_tensor(x, dtype=torch.float64, device=edges.device)
    w = torch.as_tensor(w, dtype=torch.float64, device=edges.device)
    left, width = edges[..., :-1, None], (edges[..., 1:] - edges[..., :-1])[..., None]
    nodes = left + width * (x + 1) / 2
    return nodes.flatten(-2), (width * w / 2).flatten(-2)


def _range_cdf_given_s(w: Tensor, k: Tensor) -> Tensor:
    """``P(range of k standard normals <= w)`` = ``k * int phi(z) (Phi(z) - Phi(z - w))^(k-1) dz``."""
    # phi(z) is below 1e-17 outside [-9, 9]; the integrand is smooth, so 8 panels of 24 nodes are exact to ~1e-15
    z, zw = _gauss_legendre(torch.linspace(-9, 9, 9, dtype=torch.float64, device=w.device), 24)
    phi = torch.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    inside = (_ndtr(z) - _ndtr(z - w[..., None])).clamp_min(0)
    return k[..., None].squeeze(-1) * (zw * phi * inside.pow(k[..., None] - 1)).sum(-1)


def studentized_range_sf(q: Tensor, k: Tensor | int, df: Tensor | float) -> Tensor:
    """Survival function ``P(Q > q)`` of the studentized range of ``k`` means with ``df`` degrees of freedom.

    ``Q = range(Z_1..Z_k) / S`` with standard normal ``Z`` and ``S^2 ~ chi2(df) / df``: the double integral
    over ``z`` and ``s`` by composite Gauss-Legendre rules in float64 (``scipy.stats.studentized_range.sf``
    integrates adaptively). Absolute error below 1e-11 (it is ``1 - cdf``; p-values below that read as 0).

    Example:
        >>> import torch
        >>> [round(p, 6) for p in studentized_range_sf(torch.tensor([0.0, 3.5, 10.0]), 3, 20).tolist()]
        [1.0, 0.055892, 2e-06]
    """
    q = torch.as_tensor(q, dtype=torch.float64)
    k = torch.as_tensor(k, dtype=torch.float64, device=q.device)
    df = torch.as_tensor(df, dtype=torch.float64, device=q.device)
    shape = torch.broadcast_shapes(q.shape, k.shape, df.shape)
    q, k, df = (x.reshape(-1) for x in torch.broadcast_tensors(q, k, df))
    # each value integrates over a [1536, 192] grid (2.4 MB): a few at a time keeps memory bounded
    parts = [
        _range_sf(q[i : i + _RANGE_CHUNK], k[i : i + _RANGE_CHUNK], df[i : i + _RANGE_CHUNK])
        for i in range(0, q.numel(), _RANGE_CHUNK)
    ]
    return (torch.cat(parts) if parts else q.clone()).reshape(shape)


def _range_sf(q: Tensor, k: Tensor, df: Tensor) -> Tensor:
    """:func:`studentized_range_sf` of 1-D ``q, k, df`` of equal length."""
    # s = sqrt(chi2 / df) has density df^(df/2) s^(df-1) exp(-df s^2 / 2) / (Gamma(df/2) 2^(df/2 - 1)): about 1
    # with spread 1 / sqrt(2 df), a half normal for df = 1; [lo, hi] holds all but ~1e-17 of it
    spread = 9 * (2 / df).sqrt()
    lo, hi = (1 - spread).clamp_min(0), 1 + spread
    # Where the range starts at 0 (df <= 162) the integrand in s steps from 0 to its full value near s = 3 / q,
    # which large q push towards 0: geometric panels (each 18% shorter) resolve the step wherever it falls
    unit = torch.linspace(0, 1, _S_PANELS + 1, dtype=torch.float64, device=q.device)
    linear = lo[..., None] + (hi - lo)[..., None] * unit
    geometric = hi[..., None] * torch.cat([unit[:1], 1e-8 ** (1 - unit[1:])])
    s, sw = _gauss_legendre(torch.where((lo == 0)[..., None], geometric, linear), 16)
    log_density = (
        (df / 2 * df.log() - torch.lgamma(df / 2) - (df / 2 - 1) * math.log(2))[..., None]
        + (df[..., None] - 1) * s.log()
        - df[..., None] * s * s / 2
    )
    inner = _range_cdf_given_s(q[..., None] * s, k[..., None].expand_as(s))
    cdf = (sw * log_density.exp() * inner).sum(-1)
    cdf = torch.where(df >= _RANGE_ASYMPTOTIC_DF, _range_cdf_given_s(q, k), cdf)
    return torch.where(q <= 0, torch.ones_like(cdf), (1 - cdf).clamp(0, 1))


def tukey_hsd(scores: Tensor) -> TukeyResult:
    """Tukey's honestly significant difference test over the runs of ``scores [..., R, Q]`` (``scipy.stats.tukey_hsd``).

    One-way analysis of variance: ``R`` runs (groups) of ``Q`` per-query scores each, the error variance
    ``MSE`` pooled over runs (``R (Q - 1)`` degrees of freedom); each pair's mean difference over
    ``sqrt(MSE / Q)`` is referred to the studentized range distribution of ``R`` means, so the p-values hold
    for all ``R (R - 1) / 2`` pairs together (family-wise error rate). Like scipy it treats the runs as
    independent samples: it ignores that every run answers the same queries (a paired test such as
    :func:`paired_t_test` uses that).

    Args:
        scores: ``[..., R, Q]`` per-query scores, at least two runs of at least two queries.

    Returns:
        ``TukeyResult(statistic, pvalue, df)``; ``statistic[..., i, j] = mean_i - mean_j``.

    Example:
        >>> import torch
        >>> scores = torch.tensor([[0.31, 0.52, 0.18, 0.44, 0.61],
        ...                        [0.25, 0.50, 0.20, 0.30, 0.55],
        ...                        [0.11, 0.22, 0.05, 0.19, 0.30]])
        >>> res = tukey_hsd(scores)
        >>> round(res.statistic[0, 2].item(), 4), round(res.pvalue[0, 2].item(), 4), res.df
        (0.238, 0.0559, 12)
    """
    if not isinstance(scores, Tensor):
        raise TypeError(f"Argument `scores` must be a tensor [..., runs, queries], got {type(scores).__name__}.")
    if scores.dim() < 2 or scores.shape[-2] < 2 or scores.shape[-1] < 2:
        raise ValueError(f"Argument `scores` must be [..., runs >= 2, queries >= 2], got {tuple(scores.shape)}.")
    x = scores.to(torch.float64)
    runs, n = x.shape[-2:]
    means = x.mean(-1)
    df = runs * (n - 1)
    mse = (x - means[..., None]).square().sum((-2, -1)) / df
    stand_err = (mse / n).sqrt()[..., None, None]
    diff = means[..., :, None] - means[..., None, :]
    same = diff == 0  # the diagonal, and identical runs: p = 1 also when MSE is 0
    statistic = torch.where(same, torch.zeros_like(diff), diff.abs() / stand_err)
    upper = torch.triu_indices(runs, runs, 1, device=x.device)
    p_upper = studentized_range_sf(statistic[..., upper[0], upper[1]], runs, df)
    p = torch.ones_like(diff)
    p[..., upper[0], upper[1]] = p_upper
    p[..., upper[1], upper[0]] = p_upper
    return TukeyResult(diff, torch.where(same, torch.ones_like(p), p), df)


# ----------------------------------------------------------------------------------------------------
# multiple comparisons
# ----------------------------------------------------------------------------------------------------


def _family(pvalues: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Flattened p-values, their NaN mask and the number of real ones (the size of the family)."""
    if not isinstance(pvalues, Tensor):
        raise TypeError(f"Argument `pvalues` must be a tensor, got {type(pvalues).__name__}.")
    flat = pvalues.reshape(-1)
    missing = flat.isnan()
    return flat, missing, flat.numel() - missing.sum()


def bonferroni(pvalues: Tensor) -> Tensor:
    """Bonferroni adjusted p-values: each of the m real p-values times m, clipped to 1.

    Controls the family-wise error rate at ``alpha`` under any dependence (as
    ``multipletests(method="bonferroni")``); Holm's procedure does the same and is never less powerful.
    NaN p-values stay NaN and are not counted in m.

    Example:
        >>> import torch
        >>> bonferroni(torch.tensor([0.01, 0.04, 0.03, 0.005]))
        tensor([0.0400, 0.1600, 0.1200, 0.0200])
    """
    flat, missing, m = _family(pvalues)
    return torch.where(missing, flat, (flat * m).clamp(max=1)).reshape(pvalues.shape)


def benjamini_hochberg(pvalues: Tensor) -> Tensor:
    """Benjamini-Hochberg adjusted p-values (false discovery rate; ``scipy.stats.false_discovery_control``).

    The i-th smallest of m p-values becomes ``min over j >= i of p_(j) m / j``, clipped to 1. Rejecting where
    the adjusted p-value is ``<= alpha`` keeps the expected share of false discoveries at ``alpha`` for
    independent or positively dependent tests. NaN p-values stay NaN and are not counted in m.

    Example:
        >>> import torch
        >>> benjamini_hochberg(torch.tensor([0.01, 0.04, 0.03, 0.005]))
        tensor([0.0200, 0.0400, 0.0400, 0.0200])
    """
    flat, missing, m = _family(pvalues)
    order = torch.where(missing, torch.full_like(flat, math.inf), flat).argsort(stable=True)
    rank = torch.arange(1, flat.numel() + 1, device=flat.device).to(flat.dtype)
    scaled = torch.where(missing[order], torch.full_like(flat, math.inf), flat[order] * m / rank)
    adjusted = torch.empty_like(flat)
    adjusted[order] = scaled.flip(0).cummin(0).values.flip(0).clamp(max=1)  # NaNs sort last: they never lower it
    return torch.where(missing, flat, adjusted).reshape(pvalues.shape)


#: Multiple-comparison corrections by name (``compare --correction``); ``"none"`` keeps the p-values.
CORRECTIONS = ("holm", "bonferroni", "bh", "none")


def adjust(pvalues: Tensor, method: str) -> Tensor:
    """Adjusted p-values of one family of tests by ``method`` in :data:`CORRECTIONS` (``"bh"``: Benjamini-Hochberg).

    Example:
        >>> import torch
        >>> adjust(torch.tensor([0.01, 0.04]), "bh"), adjust(torch.tensor([0.01, 0.04]), "none")
        (tensor([0.0200, 0.0400]), tensor([0.0100, 0.0400]))
    """
    if method not in CORRECTIONS:
        raise ValueError(f"Argument `method` must be one of {CORRECTIONS}, got {method!r}.")
    if method == "none":
        _family(pvalues)
        return pvalues
    return {"holm": holm, "bonferroni": bonferroni, "bh": benjamini_hochberg}[method](pvalues)
