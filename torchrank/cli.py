"""The ``torchrank`` command line.

``torchrank evaluate [QRELS RUN]`` reads TREC files (the bundled trec_eval sample when none are given)
and prints a table of measures; ``-q`` adds one column per query.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from torchrank.functional import evaluate, parse_measure
from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN, TrecFormatError, read_qrels, read_run, trec_to_dense

DEFAULT_MEASURES = (
    "map", "P@5", "P@10", "recall@100", "ndcg", "ndcg@10", "mrr", "rprec", "success@1", "err@20", "rbp",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchrank", description="GPU-accelerated ranking evaluation.")
    commands = parser.add_subparsers(dest="command", required=True)
    ev = commands.add_parser("evaluate", help="evaluate a TREC run against qrels")
    ev.add_argument("qrels", nargs="?", help="qrels file (default: the bundled trec_eval sample)")
    ev.add_argument("run", nargs="?", help="run file (default: the bundled trec_eval sample)")
    ev.add_argument("-m", "--measure", action="append", help="measure names, comma-separated (repeatable)")
    ev.add_argument("-q", "--per-query", action="store_true", help="also print each query's value")
    ev.add_argument("-l", "--level", type=float, default=1, help="relevance threshold (trec_eval -l)")
    ev.add_argument("--device", default="cpu", help="cpu or cuda")
    return parser


def _measures(option: list[str] | None) -> list[str]:
    names = [n.strip() for chunk in option for n in chunk.split(",") if n.strip()] if option else DEFAULT_MEASURES
    for name in names:
        parse_measure(name)
    return list(names)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_evaluate(args: argparse.Namespace) -> str:
    """Evaluate ``args.run`` against ``args.qrels`` and return the printed table."""
    if (args.qrels is None) != (args.run is None):
        raise ValueError("give both QRELS and RUN, or neither for the bundled sample")
    qrels_path, run_path = (args.qrels, args.run) if args.qrels else (SAMPLE_QRELS, SAMPLE_RUN)
    measures = _measures(args.measure)
    batch = trec_to_dense(read_qrels(qrels_path), read_run(run_path)).to(torch.device(args.device))
    values = evaluate(
        batch.preds, batch.target, measures, mask=batch.mask, ideal_target=batch.ideal_target, judged=batch.judged,
        ties="first", reduction="none", relevance_threshold=args.level,
    )
    header = ["measure", "all"] + (batch.qids if args.per_query else [])
    rows = [header]
    for name, per_query in values.items():
        cells = [f"{per_query.mean().item():.4f}"]
        if args.per_query:
            cells += [f"{v:.4f}" for v in per_query.tolist()]
        rows.append([name, *cells])
    title = f"{len(batch.qids)} queries, run {run_path}, qrels {qrels_path}"
    return f"{title}\n{_table(rows)}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``torchrank`` and ``python -m torchrank``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        print(run_evaluate(args))
    except (TrecFormatError, ValueError, OSError) as error:
        print(f"torchrank {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0
