"""``torchrank compare QRELS RUN_A RUN_B [...]``: compare runs with paired significance tests.

Each run is evaluated on the same queries (by default every qrels query; a run without results for a
query scores 0 there, as ``trec_eval -c``), per query and per measure. Every run is then compared with the
first (``--baseline first``) or with every other run (``--baseline all-pairs``): mean difference, Cohen's d,
paired t-test, paired randomisation test, Wilcoxon signed-rank test, bootstrap confidence interval of the
difference (and Tukey HSD over all runs with ``--test tukey``), and p-values adjusted over all (run pair,
measure) comparisons (Holm, Bonferroni or Benjamini-Hochberg). The tests are in :mod:`torchrank.stats`,
batched over all comparisons at once on ``--device``.

The command line wires this module in with :func:`add_parser` and :func:`run`.

Example:
    >>> import argparse
    >>> from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN
    >>> parser = argparse.ArgumentParser(prog="torchrank")
    >>> add_parser(parser.add_subparsers())
    >>> args = parser.parse_args(["compare", str(SAMPLE_QRELS), str(SAMPLE_RUN), str(SAMPLE_RUN),
    ...                           "-m", "map,P@10", "--format", "csv"])
    >>> run(args)  # doctest: +ELLIPSIS
    measure,run,baseline,queries,mean_run,mean_baseline,diff,ci_low,ci_high,p_t,p_randomization,p_adjusted,significant,cohens_d,p_wilcoxon,p_tukey
    map,results.test#2,results.test,3,0.1785...,0.1785...,0.0,0.0,0.0,1.0,1.0,1.0,False,0.0,1.0,
    P@10,results.test#2,results.test,3,0.3,0.3,0.0,0.0,0.0,1.0,1.0,1.0,False,0.0,1.0,
    0
"""

from __future__ import annotations

from torchrank.compare._command import DEFAULT_MEASURES, add_parser, run
from torchrank.compare._plots import plot_comparison, plot_differences, plot_distributions
from torchrank.compare._render import _lower_is_better as _lower_is_better  # read by tests/test_registry.py

__all__ = ["DEFAULT_MEASURES", "add_parser", "plot_comparison", "plot_differences", "plot_distributions", "run"]
