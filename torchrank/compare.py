"""``torchrank compare QRELS RUN_A RUN_B [...]``: compare runs with paired significance tests.

Each run is evaluated on the same queries (by default every qrels query; a run without results for a
query scores 0 there, as ``trec_eval -c``), per query and per measure. Every run is then compared with the
first (``--baseline first``) or with every other run (``--baseline all-pairs``): mean difference, Cohen's d,
paired t-test, paired randomisation test, Wilcoxon signed-rank test, bootstrap confidence interval of the
difference (and Tukey HSD over all runs with ``--test tukey``), and p-values adjusted over all (run pair,
measure) comparisons (Holm, Bonferroni or Benjamini-Hochberg). The tests are in :mod:`torchrank.stats`,
batched over all comparisons at once on ``--device``.

The command line wires this module in with :func:`add_parser` and :func:`run`. This module holds the command and
its computation; the output formats are in ``torchrank._compare_render``, the figures in ``torchrank._compare_plots``
(:func:`plot_comparison`, :func:`plot_differences` and :func:`plot_distributions` are imported from here).

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
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from torchrank import _compare_args
from torchrank._compare_plots import _DPI, plot_comparison, plot_differences, plot_distributions
from torchrank._compare_render import _lower_is_better as _lower_is_better  # tests/test_registry.py reads it here
from torchrank._compare_render import _render
from torchrank.functional import MEASURES, evaluate, parse_measure
from torchrank.functional.measures import RankedLists
from torchrank.io import TrecBatch, TrecFile, TrecFormatError, load_qrels, load_run, read_trec
from torchrank.stats import (
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
DEFAULT_MEASURES = _compare_args.DEFAULT_MEASURES
_MAX_SEED = _compare_args.MAX_SEED


def _bootstrap_seed(seed: int) -> int:
    """The bootstrap's own stream, ``seed + 1``, wrapped so that the largest seed stays a valid one."""
    return (seed + 1) % (_MAX_SEED + 1)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` sub-command and its options to an ``argparse`` sub-parsers object.

    The sub-parser's defaults carry ``handler=run``, for a dispatcher that calls ``args.handler(args)``.
    """
    _compare_args.add_parser(subparsers).set_defaults(handler=run)


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
        num_judged=batch.num_judged,
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
        gen = torch.Generator(device=device).manual_seed(_bootstrap_seed(args.seed))
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
