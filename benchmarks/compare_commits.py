"""torchrank's headline kernel calls in two source trees, interleaved on one machine: is a change slower?

A results file records one machine on one day; this VM's speed has drifted by 2x between sessions, so a new run
cannot be read against an old file at 10%. This script times the primary calls of the kernels grid (the
``F.ndcg`` / ``F.average_precision`` / ``F.precision`` / ``F.evaluate`` calls of ``bench_functional``, on its data:
``randn`` scores, ``randint`` labels, seed 0) in two persistent worker processes, one per tree, alternating which
goes first, and reports each cell's best median of the rounds as new / old.

    git worktree add /tmp/old 450900d          # the commit whose figures are committed
    python -m benchmarks.compare_commits /tmp/old . --grid kernels_targets     # the issue's headline cells
    python -m benchmarks.compare_commits /tmp/old . --grid kernels --rounds 2  # the whole CPU grid (~10 min)
    python -m benchmarks.compare_commits /tmp/old . --grid kernels --rounds 6 --only "1000x1000 bfloat16"  # a rerun

Both workers call ``torchrank.allocator.warm_cpu_allocator()`` (``torchrank.functional.allocator`` in older trees)
where the tree has it (the committed grids were timed with it; before it was opt-in, torchrank made the same change
itself). One thread each.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

SET8 = ["ndcg@5", "ndcg@10", "ndcg@20", "map", "mrr", "P@10", "recall@100", "success@10"]
GRIDS = {  # shapes, dtypes, labels, (family, k) as configs/bench/kernels*.yaml
    "kernels_targets": ([[10_000, 100], [1_000, 1_000]], ["float32"], ["graded"], [("ndcg", 10), ("set", None)]),
    "kernels": (
        [[10_000, 100], [1_000, 1_000], [100_000, 100], [10_000, 1_000]], ["float32", "bfloat16"],
        ["binary", "graded"],
        [("ndcg", 10), ("ndcg", 100), ("map", 10), ("map", 100), ("precision", 10), ("precision", 100),
         ("set", None)],
    ),
}


def _warm_up_of_the_tree():
    """The tree's ``warm_cpu_allocator`` (``torchrank.allocator``, or ``torchrank.functional.allocator`` in older
    trees), or None in trees from before it was opt-in, which make the change themselves."""
    for module in ("torchrank.allocator", "torchrank.functional.allocator"):
        try:
            return importlib.import_module(module).warm_cpu_allocator
        except ImportError:
            continue
    return None


def worker(tree: str) -> None:
    """Answer one JSON cell per stdin line with the median seconds of its call in ``tree``'s torchrank."""
    sys.path.insert(0, str(Path(tree).resolve()))
    import torch

    import torchrank.functional as F

    if not F.__file__.startswith(str(Path(tree).resolve())):
        raise SystemExit(f"torchrank imported from {F.__file__}, not from {tree}")
    warm_cpu_allocator = _warm_up_of_the_tree()
    if warm_cpu_allocator is not None:
        warm_cpu_allocator()
    torch.set_num_threads(1)
    data: dict[tuple, tuple] = {}
    for line in sys.stdin:
        cell = json.loads(line)
        key = (tuple(cell["shape"]), cell["dtype"], cell["labels"])
        if key not in data:
            data.clear()  # one cell's tensors at a time
            g = torch.Generator().manual_seed(0)
            scores = torch.randn(*cell["shape"], generator=g)
            target = torch.randint(0, 2 if cell["labels"] == "binary" else 5, tuple(cell["shape"]), generator=g)
            data[key] = (scores.to(getattr(torch, cell["dtype"])), target)
        preds, target = data[key]
        if cell["family"] == "set":
            call = functools.partial(F.evaluate, preds, target, SET8)
        else:
            function = {"ndcg": F.ndcg, "map": F.average_precision, "precision": F.precision}[cell["family"]]
            call = functools.partial(function, preds, target, k=cell["k"])
        call()
        times: list[float] = []
        stop = time.perf_counter() + cell["seconds"]
        while time.perf_counter() < stop or len(times) < 3:
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        print(json.dumps(sorted(times)[len(times) // 2]), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="source tree of the reference (a git worktree of the committed grid's commit)")
    parser.add_argument("new", help="source tree to check (e.g. .)")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="kernels_targets")
    parser.add_argument("--rounds", type=int, default=3, help="timings per tree and cell, alternating the order")
    parser.add_argument("--seconds", type=float, default=0.4, help="time of one timing (repeated calls)")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="time only the cells whose name holds TEXT (repeat for more), e.g. '1000x1000 bfloat16'")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.old)
        return
    trees = {"old": args.old, "new": args.new}
    workers = {  # one process per side, even for one tree twice (a check of the noise)
        side: subprocess.Popen([sys.executable, "-m", "benchmarks.compare_commits", tree, tree, "--worker"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for side, tree in trees.items()
    }

    def median_of(side: str, cell: dict) -> float:
        workers[side].stdin.write(json.dumps(cell) + "\n")
        workers[side].stdin.flush()
        return json.loads(workers[side].stdout.readline())

    shapes, dtypes, labels, families = GRIDS[args.grid]
    ratios = []
    print("| cell | old | new | new / old |\n|---|---|---|---|")
    for shape, dtype, label, (family, k) in itertools.product(shapes, dtypes, labels, families):
        name = f"{family}@{k}" if k else "set of 8"
        name = f"{name} {shape[0]}x{shape[1]} {dtype} {label}"
        if args.only and not any(text in name for text in args.only):
            continue
        cell = {"shape": shape, "dtype": dtype, "labels": label, "family": family, "k": k, "seconds": args.seconds}
        best = {"old": float("inf"), "new": float("inf")}
        for round_ in range(args.rounds):
            for side in ("old", "new") if round_ % 2 == 0 else ("new", "old"):
                best[side] = min(best[side], median_of(side, cell))
        ratio = best["new"] / best["old"]
        ratios.append(ratio)
        print(f"| {name} | {best['old'] * 1e3:.2f} ms | "
              f"{best['new'] * 1e3:.2f} ms | {ratio:.3f} |", flush=True)
    print(f"\n{len(ratios)} cells: geometric mean {statistics.geometric_mean(ratios):.3f}, "
          f"best {min(ratios):.3f}, worst {max(ratios):.3f}")
    for proc in workers.values():
        proc.stdin.close()
        proc.wait()


if __name__ == "__main__":
    main()
