"""Each route of the numpy backend against the route that runs without it, end to end, on distinct batches.

A route is switched off through the engine's own switches (a tuning constant set past every input, or the route's
test answering "not taken"), in every engine module that binds the name, so what runs is what would run were the
route deleted. Each cell times public calls (``F.evaluate`` of a few measures) on its own pool of distinct batches:
no contender sees a batch twice in a row, and on small batches no batch is seen twice at all (a CPU learns the
branches of a data-dependent route on an input timed over and over: benchmarks/notes/numpy_routes.md). The
contenders are interleaved, their order rotated every repetition; one thread; by default each call's CPU time
(``time.process_time``: on a machine shared with other processes, wall time also counts the time slices they
take, CPU time does not, though their use of the caches still shows). A cell's figure is the median time
of each configuration and the median over repetitions of its ratio to the default (every route on), with the
quartiles of that ratio (the noise), and the ratio of the fastest calls (the least disturbed by other processes on
a shared machine). A switch whose names this tree no longer binds (a deleted route) is skipped:
the figures that deleted a route come from the commit before (benchmarks/notes/numpy_routes.md).

    PYTHONPATH=$PWD python -m benchmarks.numpy_routes                   # every cell -> results/numpy_routes_cpu.json
    PYTHONPATH=$PWD python -m benchmarks.numpy_routes --only top-k --reps 9 --no-save
    PYTHONPATH=$PWD python -m benchmarks.numpy_routes --calls          # which engine functions each switch reaches
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import platform
import statistics
import subprocess
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

import torchrank
import torchrank.functional as F
from torchrank.functional import _descending, _ranked
from torchrank.functional.backends import _numpy as _numpy_backend
from torchrank.functional.backends import _torch as _torch_order
from torchrank.functional.backends._numpy import order as _numpy_order

ENGINE = [_numpy_backend, _numpy_order, _torch_order, _ranked, _descending]
with contextlib.suppress(ImportError):  # modules a route's deletion may have removed
    from torchrank.functional.backends._numpy import keys as _numpy_keys

    ENGINE.append(_numpy_keys)
with contextlib.suppress(ImportError):
    from torchrank.functional.backends._numpy import compact_keys as _compact_keys

    ENGINE.append(_compact_keys)
with contextlib.suppress(ImportError):
    from torchrank.functional.backends._numpy import tied_rows as _tied_rows

    ENGINE.append(_tied_rows)

RESULTS = Path(__file__).parent / "results" / "numpy_routes_cpu.json"


def _never(*args: object, **kwargs: object) -> bool:
    return False


def _none(*args: object, **kwargs: object) -> None:
    return None


# configuration name -> the engine names it sets (in every module binding them); "default" sets none
SWITCHES: dict[str, dict[str, object]] = {
    "default": {},
    "no top-k": {"_takes_topk": _never},
    "no 64-bit keys": {"_packs": _never},  # every key route: numpy's argsort of the negated scores instead
    "no label keys": {"_labels_ride_in_keys": _never},  # the 32-bit ones with them
    "no 32-bit keys": {"_compact_key_ranking": _none},
    "no head items": {"_selects_head": _never},
    "no head bound": {"_HEAD_GROUPS": 10**9},
    "no partition": {"_PARTITION_MIN_ITEMS": 10**9},  # the keys' and the ideal's selection of a head
    "no label bits": {"_nonnegative_head": _none},  # the ideal's labels sorted as floats
    "no 32-bit keys, partition": {"_compact_key_ranking": _none, "_PARTITION_MIN_ITEMS": 10**9},
    "no 32-bit keys, head items": {"_compact_key_ranking": _none, "_selects_head": _never},
}
# the routes issue 31 deleted and their switches; all off at once: the engine as it became, inside fa490a6 (where they
# all exist), and each one back in turn: what it wins against the engine without it
DELETED: dict[str, dict[str, object]] = {
    "32-bit keys": {"_compact_key_ranking": _none},
    "head bound": {"_HEAD_GROUPS": 10**9},
    "partition": {"_PARTITION_MIN_ITEMS": 10**9},
    "label bits": {"_nonnegative_head": _none},
    "large-batch selection": {"_SELECTION_MIN_ITEMS_LARGE_BATCH": 200},
}
SWITCHES["no deleted route"] = {name: v for switch in DELETED.values() for name, v in switch.items()}
SWITCHES.update({
    f"no deleted route but {route}": {
        name: v for other, switch in DELETED.items() if other != route for name, v in switch.items()
    }
    for route in DELETED
})
SWITCHES |= {
    "no rows apart": {"_MAX_TIED_SHARE": 0},  # any tie: the whole batch ranked with the ties applied
    "no enumeration": {"_MAX_ENUMERATED_PAIRS": 0},  # tied pairs: the closed forms
}


@contextlib.contextmanager
def switched(config: str) -> Iterator[None]:
    """The engine with ``config``'s names set in every module binding them (a name no module binds: an error)."""
    saved = []
    try:
        for name, value in SWITCHES[config].items():
            modules = [m for m in ENGINE if hasattr(m, name)]
            if not modules:
                raise KeyError(f"{config}: no engine module binds {name} (a deleted route?)")
            for module in modules:
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, value)
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)


@dataclass
class Cell:
    """One workload: ``make(generator)`` builds a batch (the keyword arguments of ``F.evaluate``)."""

    name: str
    route: str  # the route the cell is chosen for
    make: Callable[[torch.Generator], dict]
    measures: list[str]
    configs: list[str]
    items: int
    kwargs: dict = field(default_factory=dict)


def _scores(q: int, n: int, dtype: torch.dtype = torch.float32, padded: bool = False, tied_rows: float = 0.0):
    def make(g: torch.Generator) -> dict:
        preds = torch.randn(q, n, generator=g)
        if tied_rows:  # a tie between two items of the head in this share of the rows (labels differ or not)
            rows = torch.rand(q, generator=g) < tied_rows
            order = preds.argsort(dim=1, descending=True)
            at = torch.randint(0, 8, (q,), generator=g)
            top = order.gather(1, at.unsqueeze(1))
            after = order.gather(1, at.unsqueeze(1) + 1)
            preds[rows, after[rows, 0]] = preds[rows, top[rows, 0]]
        batch = {"preds": preds.to(dtype), "target": torch.randint(0, 5, (q, n), generator=g)}
        if padded:  # lengths from half the row to all of it
            lengths = torch.randint(n // 2, n + 1, (q, 1), generator=g)
            batch["mask"] = torch.arange(n) < lengths
        return batch

    return make


SET_OF_8 = ["ndcg", "map", "mrr", "P@10", "recall@100", "rprec", "ndcg@10", "err@20"]
CUT_SET = ["ndcg@10", "P@10", "recall@10", "mrr@10"]

CELLS = [
    Cell("P@1, 5,000 x 150", "top-k", _scores(5000, 150), ["P@1"], ["default", "no top-k"], 750_000),
    Cell("P@1 ndcg@2 recall@2, 5,000 x 196", "top-k", _scores(5000, 196), ["P@1", "ndcg@2", "recall@2"],
         ["default", "no top-k"], 980_000),
    Cell("first: NDCG@10, 10,000 x 100", "64-bit keys", _scores(10000, 100), ["ndcg@10"],
         ["default", "no 64-bit keys"], 1_000_000, {"ties": "first"}),
    Cell("first: cut set, 1,000 x 1,000", "64-bit keys", _scores(1000, 1000), CUT_SET,
         ["default", "no 64-bit keys"], 1_000_000, {"ties": "first"}),
    Cell("bf16 first: P@10, 1,000 x 1,000", "64-bit keys", _scores(1000, 1000, torch.bfloat16), ["P@10"],
         ["default", "no 64-bit keys"], 1_000_000, {"ties": "first"}),
    Cell("NDCG@10, 10,000 x 100", "32-bit / label keys", _scores(10000, 100), ["ndcg@10"],
         ["default", "no 32-bit keys", "no label keys", "no 64-bit keys", "no label bits"], 1_000_000),
    Cell("set of 8, 10,000 x 100", "32-bit / label keys", _scores(10000, 100), SET_OF_8,
         ["default", "no 32-bit keys", "no label keys"], 1_000_000),
    Cell("set of 8, 1,000 x 1,000", "32-bit / label keys", _scores(1000, 1000), SET_OF_8,
         ["default", "no 32-bit keys", "no label keys"], 1_000_000),
    Cell("NDCG@10, 100 x 100", "32-bit / label keys", _scores(100, 100), ["ndcg@10"],
         ["default", "no 32-bit keys", "no label keys"], 10_000),
    Cell("P@10, 1,000 x 1,000", "head items", _scores(1000, 1000), ["P@10"],
         ["default", "no head items", "no head bound", "no label keys"], 1_000_000),
    Cell("NDCG@10, 1,000 x 1,000", "head items", _scores(1000, 1000), ["ndcg@10"],
         ["default", "no head items", "no head bound", "no partition", "no label bits"], 1_000_000),
    Cell("bf16 P@10, 1,000 x 1,000", "head items", _scores(1000, 1000, torch.bfloat16), ["P@10"],
         ["default", "no head items", "no head bound", "no label keys"], 1_000_000),
    Cell("P@10, 10,000 x 1,000", "head items", _scores(10000, 1000), ["P@10"],
         ["default", "no head items", "no head bound"], 10_000_000),
    Cell("P@10 NDCG@10, 100,000 x 100", "head items", _scores(100000, 100), ["P@10", "ndcg@10"],
         ["default", "no head items"], 10_000_000),
    Cell("cut set, 5,000 x 200", "head items", _scores(5000, 200), CUT_SET,
         ["default", "no head items", "no label keys", "no 32-bit keys, head items"], 1_000_000),
    Cell("cut set, 2,500 x 400", "head items", _scores(2500, 400), CUT_SET,
         ["default", "no 32-bit keys, head items"], 1_000_000),
    Cell("padded NDCG@10, 1,000 x 1,000", "partition", _scores(1000, 1000, padded=True), ["ndcg@10"],
         ["default", "no partition", "no 32-bit keys, partition"], 1_000_000),
    Cell("padded cut set, 2,000 x 500", "partition", _scores(2000, 500, padded=True), CUT_SET,
         ["default", "no partition", "no 32-bit keys, partition"], 1_000_000),
    Cell("10% tied rows: NDCG@10, 10,000 x 100", "rows apart", _scores(10000, 100, tied_rows=0.1), ["ndcg@10"],
         ["default", "no rows apart", "no enumeration"], 1_000_000),
    Cell("10% tied rows: set of 8, 10,000 x 100", "rows apart", _scores(10000, 100, tied_rows=0.1), SET_OF_8,
         ["default", "no rows apart", "no enumeration"], 1_000_000),
    Cell("40% tied rows: set of 8, 1,000 x 1,000", "rows apart", _scores(1000, 1000, tied_rows=0.4), SET_OF_8,
         ["default", "no rows apart", "no enumeration"], 1_000_000),
]


def _pool(cell: Cell, size: int, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    return [cell.make(g) for _ in range(size)]


def _call(cell: Cell, batch: dict) -> dict[str, torch.Tensor]:
    return F.evaluate(**batch, measures=cell.measures, **cell.kwargs)


def _available(config: str) -> bool:
    """Whether every name ``config`` sets is bound in this tree (a deleted route's are not)."""
    return all(any(hasattr(m, name) for m in ENGINE) for name in SWITCHES[config])


# calls in a row of one configuration, the first untimed: a call's cost depends on the one before it (glibc's heap
# adapts its trim and mmap thresholds to the sizes freed: a configuration that frees other sizes changes the next
# call's page faults), and a loop calls one configuration over and over
BURST = 3


def measure(
    cell: Cell, reps: int, log: Callable[[str], None], clock: Callable[[], float] = time.perf_counter
) -> dict | None:
    """Median seconds per call of each configuration of ``cell``, and of its per-repetition ratio to the default."""
    gone = [c for c in cell.configs if not _available(c)]
    if gone:
        log(f"  (not in this tree: {', '.join(gone)})")
    configs = [c for c in cell.configs if c not in gone]
    contenders = len(configs)
    if contenders < 2:
        return None
    # large batches flush the caches between calls: a pool of 8 cycled gives each contender a batch it did not just
    # see; small ones get a batch of their own for every call
    size = reps * contenders * BURST if cell.items <= 100_000 else 2 * BURST * contenders + 1
    pool = _pool(cell, size + 1, seed=zlib.crc32(cell.name.encode()))
    warm = pool.pop()
    want = _call(cell, warm)
    for config in configs:  # warm-up, and every configuration's values checked against the default's
        with switched(config):
            got = _call(cell, warm)
        for name, value in want.items():
            torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-6, msg=f"{config}: {name} differs")
    times: dict[str, list[float]] = {c: [] for c in configs}
    call = 0
    for rep in range(reps):
        for j in range(contenders):
            config = configs[(rep + j) % contenders]
            with switched(config):
                for burst in range(BURST):
                    batch = pool[call % len(pool)]
                    call += 1
                    start = clock()
                    _call(cell, batch)
                    if burst:  # the first call of a burst follows another configuration's
                        times[config].append(clock() - start)
    default = times[configs[0]]  # the baseline: every route on, or (--restore) the engine without the deleted ones
    record = {"cell": cell.name, "route": cell.route, "measures": cell.measures, "items": cell.items,
              "kwargs": cell.kwargs, "reps": reps, "configs": {}}
    for config in configs:
        ratios = sorted(t / d for t, d in zip(times[config], default, strict=True))
        quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        fastest = min(times[config]) / min(default)
        record["configs"][config] = {
            "median_ms": 1e3 * statistics.median(times[config]),
            "min_ms": 1e3 * min(times[config]),
            "ratio_to_default": statistics.median(ratios),
            "ratio_quartiles": [quartiles[0], quartiles[2]],
            "ratio_of_minimums": fastest,
        }
        log(f"  {config:>16}: {1e3 * statistics.median(times[config]):8.2f} ms  x{statistics.median(ratios):.2f}"
            f"  [{quartiles[0]:.2f}, {quartiles[2]:.2f}]  fastest x{fastest:.2f}")
    return record


def calls(cell: Cell) -> None:
    """Print which engine functions each configuration of ``cell`` calls on one batch (that a switch bites)."""
    names = ["_head_items", "_head_candidates", "_compact_keys", "_rank_by_label_keys", "_packed_sort",
             "_set_rows_apart", "_other_tie_orders", "_sorted_ranking", "_nonnegative_head", "_fast_order"]
    batch = _pool(cell, 1, seed=1)[0]
    for config in filter(_available, cell.configs):
        counts: dict[str, int] = {}
        saved = []
        for name in names:
            for module in [m for m in ENGINE if hasattr(m, name)]:
                original = getattr(module, name)

                def spy(*a: object, _f: Callable = original, _n: str = name, _c: dict = counts, **k: object) -> object:
                    _c[_n] = _c.get(_n, 0) + 1
                    return _f(*a, **k)

                saved.append((module, name, original))
                setattr(module, name, spy)
        try:
            with switched(config):
                _call(cell, batch)
        finally:
            for module, name, original in reversed(saved):
                setattr(module, name, original)
        print(f"  {config:>16}: {dict(sorted(counts.items()))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--only", action="append", help="cells of this route, or this cell (repeatable)")
    parser.add_argument("--calls", action="store_true", help="print the engine functions each switch reaches")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--deleted", action="store_true",
                        help="every deleted route off at once against all on (run on fa490a6, where they exist)")
    parser.add_argument("--restore", action="store_true",
                        help="each deleted route back in turn, against the engine without them (on fa490a6)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="cpu",
                        help="cpu: this process's CPU time (the time other processes hold the cores left out)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cells = [c for c in CELLS if not args.only or c.route in args.only or c.name in args.only]
    if args.deleted:  # every cell: the engine before issue 31's deletions against the engine after them
        cells = [dataclasses.replace(c, configs=["default", "no deleted route"]) for c in cells]
    if args.restore:  # every cell: the engine after the deletions, then with each deleted route back in turn
        restored = [f"no deleted route but {route}" for route in DELETED]
        cells = [dataclasses.replace(c, configs=["no deleted route", *restored]) for c in cells]
    records = []
    for cell in cells:
        print(f"{cell.name} ({cell.route}; {', '.join(cell.measures)} {cell.kwargs or ''})", flush=True)
        if args.calls:
            calls(cell)
            continue
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        record = measure(cell, args.reps, lambda s: print(s, flush=True), clock)
        if record is not None:
            records.append(record)
    if args.calls or args.no_save:
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    meta = {"commit": commit or None, "torchrank": torchrank.__version__, "torch": torch.__version__, "threads": 1,
            "clock": args.clock,
            "machine": platform.processor() or platform.machine(), "reps": args.reps}
    args.out.write_text(json.dumps({"meta": meta, "cells": records}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
