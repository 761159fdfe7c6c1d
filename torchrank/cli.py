"""The ``torchrank`` command line: ``torchrank evaluate`` (trec_eval-compatible) and ``torchrank compare``.

``torchrank evaluate [QRELS RUN [RUN ...]]`` reads TREC files (the bundled trec_eval sample when none are
given) and prints trec_eval's output, byte for byte for the measures torchrank computes; ``--format``
picks ``json``, ``csv`` or a ``table`` instead. ``python -m torchrank`` is the same command.

Example:
    >>> main(["evaluate", "-m", "map", "-m", "P.10"])
    map                   	all	0.1785
    P_10                  	all	0.3000
    0
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from torchrank import _compare_args
from torchrank._extras import MissingExtra, require

# torch and everything built on it are imported only once a command runs: `torchrank --help` and
# `torchrank evaluate --help` answer without paying torch's start-up (over a second)
if TYPE_CHECKING:
    import torch

    from torchrank.io.trec_eval import RunScores

__all__ = ["ProgressBar", "add_evaluate_parser", "main", "run_evaluate"]


PROGRESS_MIN_BYTES = 32 << 20  # files smaller than this read in well under a second: no bar


class ProgressBar:
    """A carriage-return progress bar on a terminal stream; silent when the stream is not a terminal.

    Args:
        total: Units (bytes) of the whole job.
        label: Text before the bar.
        stream: Where to draw (default ``sys.stderr``).
        enabled: Force on or off; default: on when ``stream`` is a terminal and ``total`` is at least
            :data:`PROGRESS_MIN_BYTES`.

    Example:
        >>> import io
        >>> bar = ProgressBar(100, "reading", stream=io.StringIO())  # not a terminal: draws nothing
        >>> bar.enabled
        False
    """

    def __init__(
        self, total: int, label: str, stream: TextIO | None = None, enabled: bool | None = None, width: int = 30
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.total, self.label, self.width = max(int(total), 1), label, width
        if enabled is None:
            enabled = _isatty(self.stream) and total >= PROGRESS_MIN_BYTES
        self.enabled = enabled
        self.done = 0
        self._drawn = -1.0
        self._start = time.perf_counter()

    def __call__(self, n: int) -> None:
        """Advance by ``n`` units (a :data:`torchrank.io.ProgressCallback`)."""
        self.done += n
        if self.enabled:
            fraction = min(self.done / self.total, 1.0)
            if fraction - self._drawn >= 0.01 or fraction >= 1.0:
                self._draw(fraction)

    def stage(self, label: str) -> None:
        """Show what is being done after the files are read (ranking, evaluating)."""
        if self.enabled:
            self.label = label
            self._draw(1.0)

    def _draw(self, fraction: float) -> None:
        filled = int(fraction * self.width)
        elapsed = time.perf_counter() - self._start
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {fraction:4.0%} {elapsed:5.1f}s")
        self.stream.flush()
        self._drawn = fraction

    def close(self) -> None:
        """Erase the bar (the terminal line is left clean for the output)."""
        if self.enabled and self._drawn >= 0:
            self.stream.write("\r" + " " * (len(self.label) + self.width + 20) + "\r")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def add_evaluate_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``evaluate`` sub-command to ``commands``."""
    ev = commands.add_parser(
        "evaluate",
        help="evaluate TREC runs against qrels (trec_eval-compatible output)",
        description="Evaluate TREC runs against qrels. With no files, evaluates the bundled trec_eval sample.",
    )
    ev.add_argument(
        "qrels",
        nargs="?",
        help="qrels file 'qid iter docno rel' (.gz/.bz2/.xz too), or .parquet/.csv/.tsv with columns qid, docno, "
        "label (default: the bundled sample)",
    )
    ev.add_argument(
        "runs",
        nargs="*",
        metavar="run",
        help="run files 'qid Q0 docno rank score tag' (.gz/.bz2/.xz too), or .parquet/.csv/.tsv with columns qid, "
        "docno, score",
    )
    ev.add_argument(
        "-m",
        "--measure",
        action="append",
        metavar="MEASURE",
        help="trec_eval name with parameters (map, P.5,10, ndcg_cut.10, recip_rank, Rprec, recall.100, "
        "success.1, bpref, set_P, iprec_at_recall, official, all_trec) or torchrank names (ndcg@10, map@100, "
        "rbp.95, err@20), repeatable; default: trec_eval's official measures",
    )
    ev.add_argument("-q", "--per-query", action="store_true", help="also print each query's values (trec_eval -q)")
    ev.add_argument(
        "-c",
        "--complete",
        action="store_true",
        help="average over every qrels query; queries missing from a run score 0 (trec_eval -c)",
    )
    ev.add_argument("-M", "--depth", type=int, metavar="N", help="use only the top N documents of each query")
    ev.add_argument(
        "-J",
        "--judged-only",
        action="store_true",
        help="drop documents without a judgment (qrels label >= 0) before ranking (trec_eval -J)",
    )
    ev.add_argument(
        "-l", "--level", type=int, default=1, metavar="L", help="lowest label counted relevant (trec_eval -l)"
    )
    ev.add_argument(
        "--trec-eval",
        choices=("10", "9"),
        default="10",
        help="the trec_eval whose semantics to follow: 10 (10.0, default: scores ranked as doubles) or 9 (9.x and "
        "pytrec_eval: scores ranked as float32, iprec_at_recall's levels counted by adding 0.9 and truncating, "
        "with -c no per-query lines for queries missing from the run, all_trec without rbp, rbp_resid, unj)",
    )
    ev.add_argument("--format", choices=("trec_eval", "json", "csv", "table"), default="trec_eval")
    ev.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="also write every query's values to PATH: trec_eval -q text, or by extension .csv, .tsv, .parquet "
        "(rows run, runid, measure, qid, value)",
    )
    ev.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    ev.add_argument(
        "--ties",
        choices=("first", "average", "optimistic", "pessimistic"),
        default="first",
        help="order of equal scores: 'first' is trec_eval's (score, then docno, descending; default), "
        "'average' the expected value over random orders",
    )
    ev.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: for large files on a terminal)",
    )
    return ev


def _parser() -> argparse.ArgumentParser:
    """The ``torchrank`` parser (no torch import: ``compare``'s options are in :mod:`torchrank._compare_args`)."""
    parser = argparse.ArgumentParser(prog="torchrank", description="GPU-accelerated ranking evaluation.")
    commands = parser.add_subparsers(dest="command", required=True)
    add_evaluate_parser(commands)
    _compare_args.add_parser(commands)
    return parser


def _device(name: str) -> torch.device:
    import torch

    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available (torch.cuda.is_available() is False)")
    return device


def run_evaluate(args: argparse.Namespace, stream: TextIO | None = None) -> list[RunScores]:
    """Evaluate ``args.runs`` against ``args.qrels`` and print the result to ``stream`` (stdout)."""
    import torch

    from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN, load_qrels, load_run, read_trec
    from torchrank.io.frames import table_format
    from torchrank.io.trec_eval import evaluate_batch

    stream = sys.stdout if stream is None else stream
    if args.qrels is not None and not args.runs:
        raise ValueError("give QRELS and at least one RUN, or neither for the bundled sample")
    qrels_path, run_paths = (args.qrels, args.runs) if args.qrels else (SAMPLE_QRELS, [SAMPLE_RUN])
    if args.depth is not None and args.depth < 1:
        raise ValueError(f"-M/--depth must be a positive number of documents, got {args.depth}")
    device = _device(args.device)
    if args.output and table_format(args.output) == "parquet":
        require("pyarrow", "Writing parquet")  # now, rather than once the evaluation it would write has run
    total = sum(os.path.getsize(p) for p in [qrels_path, *run_paths]) * 2  # read, then scan
    bar = ProgressBar(total, "reading", enabled=args.progress if args.progress is not None else None)
    try:
        bar.label = f"reading {os.path.basename(qrels_path)}"
        qrels = load_qrels(qrels_path, progress=bar)
        results = []
        for path in run_paths:
            bar.label = f"reading {os.path.basename(path)}"
            run = load_run(path, progress=bar)
            bar.stage(f"evaluating {os.path.basename(path)}")
            batch = read_trec(
                qrels,
                run,
                depth=args.depth,
                all_queries=args.complete,
                judged_only=args.judged_only,
                score_dtype=torch.float64 if args.trec_eval == "10" else torch.float32,
            )
            results.append(
                evaluate_batch(
                    batch.to(device),
                    args.measure,
                    relevance_threshold=args.level,
                    ties=args.ties,
                    path=run.path,
                    trec_eval=args.trec_eval,
                )
            )
    finally:
        bar.close()
    stream.write(_render(results, args.format, args.per_query))
    if args.output:
        from torchrank.io import write_results

        write_results(results, args.output)
    return results


def _render(results: list[RunScores], fmt: str, per_query: bool) -> str:
    if fmt == "trec_eval":
        from torchrank.io.trec_eval import format_trec_eval

        return "".join(format_trec_eval(r, per_query=per_query) + "\n" for r in results)
    if fmt == "json":
        return json.dumps([_as_json(r, per_query) for r in results], indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["run", "runid", "measure", "qid", "value"])
        for r in results:
            if per_query:
                for name, v in r.values.items():
                    writer.writerows([r.path, r.runid, name, q, x] for q, x in zip(r.qids, v.tolist(), strict=True))
            writer.writerows([r.path, r.runid, name, "all", v] for name, v in r.summary().items())
        return out.getvalue()
    return _table(results, per_query)


def _as_json(r: RunScores, per_query: bool) -> dict:
    out: dict = {"run": r.path, "runid": r.runid, "num_q": len(r.qids), "all": r.summary()}
    if per_query:
        out["per_query"] = {name: dict(zip(r.qids, v.tolist(), strict=True)) for name, v in r.values.items()}
    return out


def _table(results: list[RunScores], per_query: bool) -> str:
    """One row per measure (and per query with -q), one column per run."""
    head = ["measure", "qid"] if per_query else ["measure"]
    rows = [head + [r.runid or os.path.basename(r.path or "") for r in results]]
    summaries = [r.summary() for r in results]
    for name in results[0].values:
        fmt = (lambda v: str(round(v))) if results[0].kinds[name] == "long" else (lambda v: f"{v:.4f}")
        rows.append([name] + (["all"] if per_query else []) + [fmt(s[name]) for s in summaries])
        if per_query and results[0].kinds[name] != "gm":
            columns = [dict(zip(r.qids, r.values[name].tolist(), strict=True)) for r in results]
            for qid in results[0].qids:
                rows.append([name, qid] + [fmt(c[qid]) if qid in c else "" for c in columns])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``torchrank`` and ``python -m torchrank``; returns the exit status.

    Bad input (a malformed file, an unknown measure, a run sharing no query with the qrels) prints one
    ``torchrank <command>: error: ...`` line on stderr and returns 2; never a traceback.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    from torchrank.io import TrecFormatError  # a command runs: torch is imported from here on

    try:
        if args.command == "evaluate":
            run_evaluate(args)
            return 0
        from torchrank import compare

        return int(compare.run(args))
    except (TrecFormatError, ValueError, OSError, RuntimeError, MissingExtra) as error:
        print(f"torchrank {args.command}: error: {error}", file=sys.stderr)
        return 2
