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

import argparse
import csv
import io
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from torchrank.functional import MEASURES, evaluate, parse_measure
from torchrank.functional.measures import RankedLists
from torchrank.io import TrecBatch, TrecFile, TrecFormatError, load_qrels, load_run, read_trec
from torchrank.stats import (
    CORRECTIONS,
    adjust,
    bootstrap_ci,
    cohens_d,
    paired_t_test,
    randomization_test,
    tukey_hsd,
    wilcoxon,
)

__all__ = ["DEFAULT_MEASURES", "add_parser", "plot_comparison", "plot_differences", "plot_distributions", "run"]

#: Measures compared when ``-m`` is not given: the usual columns of an IR results table.
DEFAULT_MEASURES = ("map", "ndcg@10", "P@10", "recall@100", "mrr")
_FORMATS = ("table", "markdown", "latex", "csv", "json")
_CSV_FIELDS = (
    "measure",
    "run",
    "baseline",
    "queries",
    "mean_run",
    "mean_baseline",
    "diff",
    "ci_low",
    "ci_high",
    "p_t",
    "p_randomization",
    "p_adjusted",
    "significant",
    "cohens_d",
    "p_wilcoxon",
    "p_tukey",
)
#: ``--test`` choices and what the output calls them
_TESTS = {
    "t": "paired t-test",
    "randomization": "randomisation test",
    "wilcoxon": "Wilcoxon signed-rank test",
    "tukey": "Tukey HSD",
}
_CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni", "bh": "Benjamini-Hochberg"}


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


def _depth(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` sub-command and its options to an ``argparse`` sub-parsers object.

    The sub-parser's defaults carry ``handler=run``, for a dispatcher that calls ``args.handler(args)``.
    """
    p = subparsers.add_parser(
        "compare",
        help="compare runs with paired significance tests",
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
        choices=tuple(_TESTS),
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
        type=_count,
        default=10_000,
        help="bootstrap resamples of the confidence interval; 0 skips it (default 10000)",
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
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling tests (default 0)")
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
    p.add_argument("--format", choices=_FORMATS, default="table", help="output format (default table)")
    p.add_argument(
        "--plot",
        metavar="PATH",
        help="also draw the per-query differences to the first run (sorted bars, per measure) and each run's "
        "per-query distribution into PATH (.png, .pdf, .svg; needs matplotlib)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``torchrank compare``: print the result and return the exit status (2 on bad input).

    Bad input (unreadable or malformed files, unknown measures, runs sharing no query with the qrels, an
    unavailable device) gets one ``torchrank compare: error: ...`` line on stderr, never a traceback.
    """
    try:
        result = _compare(args)
        text = _render(result, args.format)
        if getattr(args, "plot", None):
            figure = plot_comparison(result.scores, result.names, result.measures)
            figure.savefig(args.plot, dpi=_DPI)
    except (TrecFormatError, ValueError, OSError, ImportError) as error:
        print(f"torchrank compare: error: {error}", file=sys.stderr)
        return 2
    print(text)
    return 0


# ----------------------------------------------------------------------------------------------------
# computation
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Result:
    """Everything printed: run names, means ``[R, K]`` and per-comparison values ``[P, K]`` (on CPU)."""

    names: list[str]
    paths: list[str]
    measures: list[str]
    n_queries: int
    pairs: list[tuple[int, int]]  # (baseline, run); differences are run - baseline
    means: Tensor
    diff: Tensor
    p_t: Tensor
    p_rand: Tensor | None
    ci_low: Tensor | None
    ci_high: Tensor | None
    p_adj: Tensor
    significant: Tensor
    settings: dict
    effect: Tensor  # Cohen's d of the paired differences
    p_wilcoxon: Tensor
    p_tukey: Tensor | None
    scores: Tensor  # per-query scores [R, K, Q], for plots


def _measures(option: list[str] | None) -> list[str]:
    names = [n.strip() for chunk in option for n in chunk.split(",") if n.strip()] if option else DEFAULT_MEASURES
    for name in names:
        parse_measure(name)  # ValueError naming the measure and the grammar
    return list(dict.fromkeys(names))


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise ValueError(f"--device: {error}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available on this machine")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    try:  # any other unusable device: say so now, in one line, rather than with a traceback later
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as error:
        raise ValueError(f"--device {name}: {str(error).splitlines()[0]}") from None
    return device


def _names(option: str | None, paths: Sequence[str]) -> list[str]:
    if option is not None:
        names = [n.strip() for n in option.split(",")]
        if len(names) != len(paths) or not all(names):
            raise ValueError(f"--names: expected {len(paths)} non-empty comma-separated names, got {option!r}")
        return names
    names = [os.path.basename(p) for p in paths]
    folders: dict[str, set[str]] = {}
    for name, path in zip(names, paths, strict=True):
        folders.setdefault(name, set()).add(os.path.normpath(path))
    if any(len(f) > 1 for f in folders.values()):  # same file name in different folders: show the paths
        names = list(paths)
    seen: dict[str, int] = {}
    out = []
    for name in names:  # the same file given twice: results.test, results.test#2
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _preview(keys: Sequence[str], n: int = 5) -> str:
    keys = sorted(keys)
    return ", ".join(keys[:n]) + (f", ... ({len(keys)} in all)" if len(keys) > n else "")


def _run_scores(
    qrels: TrecFile, path: str, qrels_path: str, measures: list[str], args: argparse.Namespace, device: torch.device
) -> tuple[Tensor, list[str], set[str]]:
    """One run's per-query scores ``[K, Q]`` on every qrels query (sorted), those qids, and the run's qids."""
    run_ = load_run(path)
    if not set(run_.qids) & set(qrels.qids):
        raise ValueError(
            f"{path}: the run shares no query with the qrels {qrels_path} "
            f"(run queries: {_preview(run_.qids)}; qrels queries: {_preview(qrels.qids)})"
        )
    # all_queries: a qrels query missing from the run becomes an empty row, scoring 0 (trec_eval -c).
    batch = read_trec(qrels, run_, depth=args.depth, all_queries=True, judged_only=args.judged_only).to(device)
    values = evaluate(
        batch.preds,
        batch.target,
        measures,
        mask=batch.mask,
        ideal_target=batch.ideal_target,
        judged=batch.judged,
        ties="first",
        reduction="none",
        relevance_threshold=args.level,
    )
    values |= _from_batch(batch, measures, args.level)
    return torch.stack([values[m].to(torch.float64) for m in measures]), list(batch.qids), set(run_.qids)


def _from_batch(batch: TrecBatch, measures: list[str], level: float) -> dict[str, Tensor]:
    """Measures whose trec_eval name reads more of the qrels than the lists hold (infAP the pool, bpref the
    judged count), computed as ``torchrank evaluate`` computes them."""
    out: dict[str, Tensor] = {}
    lists = None
    for name in measures:
        parsed = parse_measure(name)
        family = MEASURES[parsed.family]
        wanted = next((t.from_batch for t in family.trec if t.from_batch), ())
        if not wanted:
            continue
        if lists is None:
            lists = RankedLists(
                batch.preds, batch.target, mask=batch.mask, ideal_target=batch.ideal_target, judged=batch.judged,
                ties="first", relevance_threshold=level, validate_args=False,
            )  # fmt: skip
        params = family.kernel_params(**dict(parsed.params)) | {p: getattr(batch, p) for p in wanted}
        out[name] = lists.per_query(family.kernel, (parsed.k,), **params)[:, 0]
    return out


def _scores(args: argparse.Namespace, measures: list[str], device: torch.device) -> Tensor:
    """Per-query scores ``[R, K, Q]`` of every run on the compared queries (``--queries``)."""
    qrels = load_qrels(args.qrels)  # read once for all runs
    per_run, run_qids = [], []
    for path in args.runs:  # one run in memory at a time
        scores, qids, has = _run_scores(qrels, path, args.qrels, measures, args, device)
        per_run.append(scores)
        run_qids.append(has)
    stacked = torch.stack(per_run)
    if args.queries == "qrels":
        for path, has in zip(args.runs, run_qids, strict=True):
            missing = len(set(qids) - has)
            if missing:
                print(
                    f"torchrank compare: note: {path} has no results for {missing} of {len(qids)} qrels "
                    "queries; they score 0 (--queries common compares on shared queries only)",
                    file=sys.stderr,
                )
        return stacked
    keep = [i for i, q in enumerate(qids) if all(q in has for has in run_qids)]
    if not keep:
        raise ValueError("the runs share no qrels query (--queries common); try --queries qrels")
    if len(keep) < len(qids):
        print(
            f"torchrank compare: note: comparing on the {len(keep)} of {len(qids)} qrels queries that every "
            "run has results for",
            file=sys.stderr,
        )
    return stacked[..., torch.tensor(keep, device=stacked.device)]


def _pairs(n_runs: int, baseline: str) -> list[tuple[int, int]]:
    if baseline == "first":
        return [(0, j) for j in range(1, n_runs)]
    return [(i, j) for i in range(n_runs) for j in range(i + 1, n_runs)]


def _compare(args: argparse.Namespace) -> _Result:
    if len(args.runs) < 2:
        raise ValueError(f"give at least two runs to compare, got {len(args.runs)}")
    if args.test == "randomization" and args.permutations == 0:
        raise ValueError("--test randomization needs --permutations > 0")
    measures = _measures(args.measure)
    device = _device(args.device)
    names = _names(args.names, args.runs)
    scores = _scores(args, measures, device)  # [R, K, Q]

    pairs = _pairs(len(args.runs), args.baseline)
    base = scores[[i for i, _ in pairs]]
    other = scores[[j for _, j in pairs]]  # [P, K, Q]: every comparison of every measure in one batch
    ttest = paired_t_test(other, base)
    p_rand = ci = None
    if args.permutations:
        gen = torch.Generator(device=device).manual_seed(args.seed)
        p_rand = randomization_test(other, base, args.permutations, generator=gen).pvalue
    if args.bootstrap:
        # Its own stream, so that changing --permutations leaves the intervals as they were.
        gen = torch.Generator(device=device).manual_seed(args.seed + 1)
        ci = bootstrap_ci(other, base, args.bootstrap, confidence_level=1 - args.alpha, method=args.ci, generator=gen)
    p_wilcoxon = wilcoxon(other, base).pvalue
    p_tukey = None
    if args.test == "tukey":
        # one family per measure: every run at once, [K, R, R], read at the compared pairs
        matrix = tukey_hsd(scores.transpose(0, 1)).pvalue
        p_tukey = torch.stack([matrix[:, i, j] for i, j in pairs])
    tested = {"t": ttest.pvalue, "randomization": p_rand, "wilcoxon": p_wilcoxon, "tukey": p_tukey}[args.test]
    p_adj = adjust(tested, args.correction)
    diff = (other - base).mean(-1)
    settings = {
        "queries": args.queries,
        "baseline": args.baseline,
        "test": args.test,
        "correction": args.correction,
        "alpha": args.alpha,
        "permutations": args.permutations,
        "bootstrap": args.bootstrap,
        "ci": args.ci,
        "seed": args.seed,
        "level": args.level,
        "depth": args.depth,
        "judged_only": args.judged_only,
        "device": str(device),
    }
    return _Result(
        names=names,
        paths=list(args.runs),
        measures=measures,
        n_queries=scores.shape[-1],
        pairs=pairs,
        means=scores.mean(-1).cpu(),
        diff=diff.cpu(),
        p_t=ttest.pvalue.cpu(),
        p_rand=None if p_rand is None else p_rand.cpu(),
        ci_low=None if ci is None else ci.low.cpu(),
        ci_high=None if ci is None else ci.high.cpu(),
        p_adj=p_adj.cpu(),
        significant=(p_adj <= args.alpha).cpu(),
        settings=settings,
        effect=cohens_d(other, base).cpu(),
        p_wilcoxon=p_wilcoxon.cpu(),
        p_tukey=None if p_tukey is None else p_tukey.cpu(),
        scores=scores.cpu(),
    )


# ----------------------------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------------------------


def _letter(i: int) -> str:
    """a, b, ..., z, aa, ab, ... for run ``i``."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(97 + r) + out
    return out


def _better_than(res: _Result) -> list[list[list[int]]]:
    """``[run][measure]`` -> runs it is significantly better than (the direction of the measure)."""
    wins: list[list[list[int]]] = [[[] for _ in res.measures] for _ in res.names]
    for p, (i, j) in enumerate(res.pairs):
        for k, measure in enumerate(res.measures):
            if not res.significant[p, k]:
                continue
            d = float(res.diff[p, k])
            run_better = d < 0 if _lower_is_better(measure) else d > 0
            winner, loser = (j, i) if run_better else (i, j)
            if d != 0:
                wins[winner][k].append(loser)
    return [[sorted(w) for w in row] for row in wins]


def _lower_is_better(measure: str) -> bool:
    """Whether a smaller value of ``measure`` is better (its declaration says; no direction reads as higher)."""
    return MEASURES[parse_measure(measure).family].higher_is_better is False


def _best(res: _Result, k: int) -> set[int]:
    shown = [round(float(v), 4) for v in res.means[:, k]]
    lower = _lower_is_better(res.measures[k])
    top = min(shown) if lower else max(shown)
    return {r for r, v in enumerate(shown) if v == top}


def _fmt_d(d: float) -> str:
    return "n/a" if math.isnan(d) else f"{d:+.2f}"


def _fmt_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _describe(res: _Result) -> str:
    s = res.settings
    where = "every qrels query, missing ones scored 0" if s["queries"] == "qrels" else "queries every run has"
    test = _TESTS[s["test"]] + (f" ({s['permutations']} sign flips)" if s["test"] == "randomization" else "")
    name = _CORRECTION_NAMES.get(s["correction"])
    corr = f"{name}-adjusted over {res.p_adj.numel()} comparisons" if name else "not adjusted"
    return f"{res.n_queries} queries ({where}); {test}, {corr}; alpha {s['alpha']:g}"


def _legend(res: _Result, sup: str) -> str:
    s = res.settings
    test = _TESTS[s["test"]]
    adj = f"{_CORRECTION_NAMES[s['correction']]}-adjusted " if s["correction"] in _CORRECTION_NAMES else ""
    return f"{sup}: significantly better than run (x) ({adj}{test} p <= {s['alpha']:g}, {res.n_queries} queries)"


def _summary_rows(res: _Result, mark: str, bold: str) -> list[list[str]]:
    """Runs x measures cells with superscript letters (``mark`` and ``bold`` are format strings)."""
    wins = _better_than(res)
    best = [_best(res, k) for k in range(len(res.measures))]
    rows = []
    for r, name in enumerate(res.names):
        cells = [f"({_letter(r)}) {name}"]
        for k in range(len(res.measures)):
            cell = f"{float(res.means[r, k]):.4f}"
            if bold and r in best[k] and len(best[k]) < len(res.names):  # no bold when all runs tie
                cell = bold.format(cell)
            if wins[r][k]:
                cell += mark.format("".join(_letter(i) for i in wins[r][k]))
            cells.append(cell)
        rows.append(cells)
    return rows


def _detail_rows(res: _Result) -> list[list[str]]:
    level = round(100 * (1 - res.settings["alpha"]), 2)
    correction = _CORRECTION_NAMES.get(res.settings["correction"])
    header = ["measure", "run", "vs", "diff", "d"]
    header += [f"{level:g}% CI"] if res.ci_low is not None else []
    header += ["p (t)"] + (["p (rand.)"] if res.p_rand is not None else []) + ["p (Wilcoxon)"]
    header += ["p (Tukey)"] if res.p_tukey is not None else []
    header += ([f"p ({correction})"] if correction else []) + ["sig."]
    rows = [header]
    for k, measure in enumerate(res.measures):
        for p, (i, j) in enumerate(res.pairs):
            row = [
                measure,
                f"({_letter(j)}) {res.names[j]}",
                f"({_letter(i)}) {res.names[i]}",
                f"{float(res.diff[p, k]):+.4f}",
                _fmt_d(float(res.effect[p, k])),
            ]
            if res.ci_low is not None:
                row.append(f"[{float(res.ci_low[p, k]):+.4f}, {float(res.ci_high[p, k]):+.4f}]")
            row.append(_fmt_p(float(res.p_t[p, k])))
            if res.p_rand is not None:
                row.append(_fmt_p(float(res.p_rand[p, k])))
            row.append(_fmt_p(float(res.p_wilcoxon[p, k])))
            if res.p_tukey is not None:
                row.append(_fmt_p(float(res.p_tukey[p, k])))
            if correction:
                row.append(_fmt_p(float(res.p_adj[p, k])))
            row.append("*" if res.significant[p, k] else "")
            rows.append(row)
    return rows


def _text_table(rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    fmt = [(str.rjust if c in right else str.ljust) for c in range(len(widths))]
    lines = ["  ".join(f(cell, w) for f, cell, w in zip(fmt, row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _md_table(rows: list[list[str]], right: set[int]) -> str:
    esc = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    rule = ["---:" if c in right else "---" for c in range(len(rows[0]))]
    return "\n".join("| " + " | ".join(row) + " |" for row in [esc[0], rule, *esc[1:]])


_LATEX_SPECIAL = {c: "\\" + c for c in "&%$#_{}"} | {
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


def _render_table(res: _Result, markdown: bool) -> str:
    header = ["run", *res.measures]
    right = set(range(1, len(header)))
    detail = _detail_rows(res)
    detail_right = set(range(3, len(detail[0]) - 1))
    if markdown:
        summary = [header, *_summary_rows(res, "<sup>{}</sup>", "**{}**")]
        return (
            f"{_describe(res)}\n\n{_md_table(summary, right)}\n\n{_legend(res, '<sup>x</sup>')}; "
            f"bold: best run per measure.\n\n{_md_table(detail, detail_right)}"
        )
    summary = [header, *_summary_rows(res, "^{}", "")]
    legend = _legend(res, "^x")
    return f"{_describe(res)}\n\n{_text_table(summary, right)}\n{legend}\n\n{_text_table(detail, detail_right)}"


def _render_latex(res: _Result) -> str:
    rows = [[_latex_escape(c) for c in ["Run", *res.measures]]]
    for row in _summary_rows(res, "$^{{{}}}$", r"\textbf{{{}}}"):
        rows.append([_latex_escape(row[0]), *row[1:]])
    lines = [
        f"% torchrank compare: {_describe(res)}",
        f"% {_legend(res, 'superscript x')}; bold: best run per measure. Needs \\usepackage{{booktabs}}.",
        r"\begin{tabular}{l" + "r" * len(res.measures) + "}",
        r"\toprule",
        " & ".join(rows[0]) + r" \\",
        r"\midrule",
        *[" & ".join(row) + r" \\" for row in rows[1:]],
        r"\bottomrule",
        r"\end{tabular}",
    ]
    return "\n".join(lines)


def _records(res: _Result) -> list[dict]:
    def num(t: Tensor | None, p: int, k: int) -> float | None:
        v = None if t is None else float(t[p, k])
        return None if v is None or not math.isfinite(v) else v  # JSON has no NaN or Infinity

    out = []
    for k, measure in enumerate(res.measures):
        for p, (i, j) in enumerate(res.pairs):
            out.append(
                {
                    "measure": measure,
                    "run": res.names[j],
                    "baseline": res.names[i],
                    "queries": res.n_queries,
                    "mean_run": float(res.means[j, k]),
                    "mean_baseline": float(res.means[i, k]),
                    "diff": float(res.diff[p, k]),
                    "ci_low": num(res.ci_low, p, k),
                    "ci_high": num(res.ci_high, p, k),
                    "p_t": num(res.p_t, p, k),
                    "p_randomization": num(res.p_rand, p, k),
                    "p_adjusted": num(res.p_adj, p, k),
                    "significant": bool(res.significant[p, k]),
                    "cohens_d": num(res.effect, p, k),
                    "p_wilcoxon": num(res.p_wilcoxon, p, k),
                    "p_tukey": num(res.p_tukey, p, k),
                }
            )
    return out


def _render(res: _Result, fmt: str) -> str:
    if fmt in ("table", "markdown"):
        return _render_table(res, markdown=fmt == "markdown")
    if fmt == "latex":
        return _render_latex(res)
    records = _records(res)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=_CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in records)
        return buf.getvalue().rstrip("\n")
    runs = [
        {
            "label": _letter(r),
            "name": name,
            "path": res.paths[r],
            "means": {m: float(res.means[r, k]) for k, m in enumerate(res.measures)},
        }
        for r, name in enumerate(res.names)
    ]
    doc = {
        "queries": res.n_queries,
        "measures": res.measures,
        "settings": res.settings,
        "runs": runs,
        "comparisons": records,
    }
    return json.dumps(doc, indent=2)


# ----------------------------------------------------------------------------------------------------
# plots
# ----------------------------------------------------------------------------------------------------

_DPI = 100
_PANEL = (3.6, 2.4)  # inches per measure (width) and per row of panels (height)
_BETTER, _WORSE, _EVEN = "#2e7d32", "#c62828", "#9e9e9e"


def _figure_class() -> type:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plots need matplotlib: pip install 'torchrank[plot]' (or matplotlib)") from None
    return Figure


def _plot_inputs(scores: Tensor, names: Sequence[str], measures: Sequence[str]) -> Tensor:
    """``scores`` as a float64 CPU tensor ``[R, K, Q]``, checked against the names of runs and measures."""
    scores = torch.as_tensor(scores).detach().to("cpu", torch.float64)
    if scores.dim() != 3:
        raise ValueError(f"`scores` must be [runs, measures, queries], got shape {tuple(scores.shape)}")
    if scores.shape[0] != len(names) or scores.shape[1] != len(measures):
        raise ValueError(
            f"`scores` {tuple(scores.shape)} must have one row per run ({len(names)}) and per measure ({len(measures)})"
        )
    return scores


def _draw_differences(axes, diff: Tensor, measure: str, title: str) -> None:
    """Sorted per-query differences as bars: green where the run is better, red where worse (measure's direction)."""
    lower = _lower_is_better_name(measure)
    ordered = diff.sort(descending=not lower).values
    better = ordered < 0 if lower else ordered > 0
    worse = ordered > 0 if lower else ordered < 0
    colors = [_BETTER if b else _WORSE if w else _EVEN for b, w in zip(better.tolist(), worse.tolist(), strict=True)]
    axes.bar(range(ordered.numel()), ordered.tolist(), width=1.0, color=colors, linewidth=0)
    axes.axhline(0.0, color="black", linewidth=0.6)
    wins, losses = int(better.sum()), int(worse.sum())
    counts = f"mean {float(diff.mean()):+.4f}; better {wins}, worse {losses}, same {diff.numel() - wins - losses}"
    axes.set_title(f"{title}\n{counts}", fontsize=7.5)  # in the title: the bars never hide it
    axes.set_xlim(-0.5, max(ordered.numel(), 1) - 0.5)
    axes.set_xticks([])
    axes.tick_params(labelsize=7)


def _lower_is_better_name(measure: str) -> bool:
    try:
        return _lower_is_better(measure)
    except ValueError:  # a name outside the grammar (a caller's own label): higher is better
        return False


def _draw_distribution(axes, values: Tensor, names: Sequence[str], measure: str) -> None:
    """One box per run (quartiles, whiskers at 1.5 IQR, outliers as dots) and its mean as a diamond."""
    axes.boxplot([v.tolist() for v in values], widths=0.6, flierprops={"markersize": 2})
    axes.scatter(range(1, len(names) + 1), values.mean(-1).tolist(), marker="D", s=14, color="#1565c0", zorder=3)
    axes.set_xticks(range(1, len(names) + 1), [f"({_letter(i)})" for i in range(len(names))], fontsize=7)
    axes.set_title(f"{measure} per query", fontsize=8)
    axes.tick_params(labelsize=7)


def plot_differences(
    scores: Tensor, names: Sequence[str], measures: Sequence[str], *, baseline: int = 0, figure: Any = None
) -> Any:
    """Per-query differences of every run to the baseline, as sorted bar charts: a column per measure, a row per run.

    Each bar is one query's ``run - baseline``, sorted; green where the run is better (in the direction of the
    measure: smaller is better for ``mean_rank`` and ``frp``), red where worse, grey where equal; each panel's
    title gives the mean difference and the counts. Needs matplotlib (``pip install 'torchrank[plot]'``).

    Args:
        scores: Per-query scores ``[runs, measures, queries]`` (as ``compare`` computes them).
        names: Run names, one per row of ``scores``.
        measures: Measure names, one per column of ``scores``.
        baseline: Index of the run the others are compared with.
        figure: A ``matplotlib.figure.Figure`` to draw into (default: a new one sized to the grid).

    Returns:
        The figure; ``figure.savefig(path)`` writes it.

    Example:
        >>> import torch
        >>> scores = torch.rand(3, 2, 20)  # 3 runs, 2 measures, 20 queries
        >>> fig = plot_differences(scores, ["bm25", "dense", "hybrid"], ["map", "ndcg@10"])
        >>> len(fig.axes), [round(float(x), 1) for x in fig.get_size_inches()]
        (4, [7.2, 4.8])
    """
    scores = _plot_inputs(scores, names, measures)
    others = [r for r in range(len(names)) if r != baseline]
    if not 0 <= baseline < len(names) or not others:
        raise ValueError(f"need a baseline among the {len(names)} runs and at least one other run")
    if figure is None:
        figure = _figure_class()(figsize=(_PANEL[0] * len(measures), _PANEL[1] * len(others)), layout="constrained")
    grid = figure.subplots(len(others), len(measures), squeeze=False)
    for row, r in enumerate(others):
        for k, measure in enumerate(measures):
            title = f"{measure}: ({_letter(r)}) {names[r]} - ({_letter(baseline)}) {names[baseline]}"
            _draw_differences(grid[row][k], scores[r, k] - scores[baseline, k], measure, title)
    return figure


def plot_distributions(scores: Tensor, names: Sequence[str], measures: Sequence[str], *, figure: Any = None) -> Any:
    """Each run's per-query values of each measure as box plots (a panel per measure, a box per run, the mean as
    a diamond); runs are labelled ``(a)``, ``(b)``, ... as in ``compare``'s tables.

    Example:
        >>> import torch
        >>> fig = plot_distributions(torch.rand(2, 3, 30), ["bm25", "dense"], ["map", "P@10", "mrr"])
        >>> len(fig.axes)
        3
    """
    scores = _plot_inputs(scores, names, measures)
    if figure is None:
        figure = _figure_class()(figsize=(_PANEL[0] * len(measures), _PANEL[1]), layout="constrained")
    grid = figure.subplots(1, len(measures), squeeze=False)
    for k, measure in enumerate(measures):
        _draw_distribution(grid[0][k], scores[:, k], names, measure)
    return figure


def plot_comparison(scores: Tensor, names: Sequence[str], measures: Sequence[str], *, baseline: int = 0) -> Any:
    """:func:`plot_differences` above :func:`plot_distributions` in one figure (``torchrank compare --plot``).

    The figure is ``3.6`` inches wide per measure and ``2.4`` high per row (one row per compared run, one for the
    distributions), drawn at 100 dpi by ``--plot``: 360 x 240 pixels per panel.

    Example:
        >>> import torch
        >>> fig = plot_comparison(torch.rand(3, 2, 25), ["a", "b", "c"], ["map", "mrr"])
        >>> [round(float(x), 1) for x in fig.get_size_inches()], len(fig.axes)
        ([7.2, 7.2], 6)
    """
    scores = _plot_inputs(scores, names, measures)
    rows = len(names) - 1
    figure = _figure_class()(figsize=(_PANEL[0] * len(measures), _PANEL[1] * (rows + 1)), layout="constrained")
    top, bottom = figure.subfigures(2, 1, height_ratios=[rows, 1])
    plot_differences(scores, names, measures, baseline=baseline, figure=top)
    plot_distributions(scores, names, measures, figure=bottom)
    legend = ", ".join(f"({_letter(i)}) {n}" for i, n in enumerate(names))
    figure.suptitle(f"{scores.shape[-1]} queries; {legend}", fontsize=8)
    return figure
