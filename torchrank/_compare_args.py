"""The options of ``torchrank compare``, apart from the command so that they import nothing heavy.

``torchrank compare --help`` (and a mistyped option) answers from this module alone, without importing torch:
:mod:`torchrank.compare`, which computes the comparison, is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import math

COMPARE_HELP = "compare runs with paired significance tests"
#: Output formats of ``--format``.
FORMATS = ("table", "markdown", "latex", "csv", "json")
#: The tests ``--test`` names, with the words the output uses for them.
TESTS = {
    "t": "paired t-test",
    "randomization": "randomisation test",
    "wilcoxon": "Wilcoxon signed-rank test",
    "tukey": "Tukey HSD",
}
#: ``--correction``'s choices: :data:`torchrank.stats.CORRECTIONS` (tests/test_cli.py checks they agree), named
#: here because torchrank.stats imports torch.
CORRECTIONS = ("holm", "bonferroni", "bh", "none")

#: Measures compared when ``-m`` is not given: the usual columns of an IR results table.
DEFAULT_MEASURES = ("map", "ndcg@10", "P@10", "recall@100", "mrr")


# ----------------------------------------------------------------------------------------------------
# arguments
# ----------------------------------------------------------------------------------------------------


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1, got {text!r}")
    return value


#: Fewest bootstrap resamples ``--bootstrap`` takes (0 skips the interval). Below it the interval's ends at the
#: default alpha (the 2.5% and 97.5% quantiles) are read between the two or three most extreme bootstrap means,
#: so they say more about the few extremes drawn than about the confidence level; 1 resample gives ``[mean, mean]``
#: of one draw. 1000 or more is the usual advice for percentile and BCa intervals (Efron and Tibshirani 1993).
_MIN_BOOTSTRAP = 100

#: Seeds ``torch.Generator.manual_seed`` takes without wrapping: unsigned 64-bit integers.
MAX_SEED = 2**64 - 1


def _resamples(text: str) -> int:
    value = _count(text)
    if 0 < value < _MIN_BOOTSTRAP:
        raise argparse.ArgumentTypeError(f"expected 0 (skip the interval) or at least {_MIN_BOOTSTRAP}, got {text!r}")
    return value


def _seed(text: str) -> int:
    """A seed of ``torch.Generator.manual_seed``: refused here, with the range, rather than by torch later."""
    value = _count(text) if text.strip().lstrip("+").isdigit() else -1
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**64 - 1 = {MAX_SEED}, got {text!r}")
    return value


def _depth(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``compare`` sub-command and its options to an ``argparse`` sub-parsers object; return it."""
    p = subparsers.add_parser(
        "compare",
        help=COMPARE_HELP,
        description=(
            "Compare TREC runs on the same queries: per-measure means, difference to the baseline, paired "
            "t-test, paired randomisation test, bootstrap confidence interval of the difference and "
            "Holm-adjusted p-values over all comparisons."
        ),
    )
    p.add_argument("qrels", help="qrels file: TREC text (.gz/.bz2/.xz too), or .parquet/.csv/.tsv (qid, docno, label)")
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run files, TREC text or tables (qid, docno, score), at least two; the first is the baseline",
    )
    p.add_argument(
        "-m",
        "--measure",
        action="append",
        help=f"measure names, comma-separated (repeatable; default: {','.join(DEFAULT_MEASURES)})",
    )
    p.add_argument(
        "--baseline",
        choices=("first", "all-pairs"),
        default="first",
        help="compare every run with the first run (default) or every pair of runs",
    )
    p.add_argument(
        "--test",
        choices=tuple(TESTS),
        default="t",
        help="test whose p-values are corrected and decide significance: t (paired t-test, default), "
        "randomization, wilcoxon (signed-rank) or tukey (Tukey HSD over all runs, per measure: its p-values "
        "already hold for every pair of runs of a measure; --correction adjusts them again over all comparisons, "
        "--correction none keeps Tukey's own)",
    )
    p.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="holm",
        help="multiple-comparison correction over all (run pair, measure) comparisons: holm (default), "
        "bonferroni, bh (Benjamini-Hochberg false discovery rate) or none",
    )
    p.add_argument(
        "--permutations",
        type=_count,
        default=10_000,
        help="random sign flips of the randomisation test; 0 skips the test (default 10000)",
    )
    p.add_argument(
        "--bootstrap",
        type=_resamples,
        default=10_000,
        help=f"bootstrap resamples of the confidence interval, at least {_MIN_BOOTSTRAP} (fewer leave the interval's "
        "ends to the few most extreme resamples); 0 skips it (default 10000)",
    )
    p.add_argument(
        "--ci",
        choices=("percentile", "bca"),
        default="percentile",
        help="bootstrap interval method (default: percentile)",
    )
    p.add_argument(
        "--alpha", type=_level, default=0.05, help="significance level; the interval covers 1 - alpha (default 0.05)"
    )
    p.add_argument("--seed", type=_seed, default=0, help="seed of the resampling tests, 0 to 2**64 - 1 (default 0)")
    p.add_argument(
        "--queries",
        choices=("qrels", "common"),
        default="qrels",
        help=(
            "qrels: every qrels query, a run without results for one scores 0 there (trec_eval -c; default); "
            "common: only the qrels queries that every run has results for"
        ),
    )
    p.add_argument("-l", "--level", type=float, default=1, help="relevance threshold (trec_eval -l; default 1)")
    p.add_argument("-M", "--depth", type=_depth, default=None, help="evaluate only the top DEPTH documents")
    p.add_argument(
        "-J",
        "--judged-only",
        action="store_true",
        help="drop documents without a judgment before ranking (trec_eval -J)",
    )
    p.add_argument("--names", help="display names of the runs, comma-separated (default: file names)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    p.add_argument(
        "--plot",
        metavar="PATH",
        help="also draw the per-query differences to the first run (sorted bars, per measure) and each run's "
        "per-query distribution into PATH (.png, .pdf, .svg; needs matplotlib)",
    )
    return p
