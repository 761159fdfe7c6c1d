"""Chunked evaluation past a memory budget: 10M queries x 100 items on CPU with bounded extra memory.

Builds the input (float32 scores, int8 labels), records the process's resident memory, evaluates NDCG@10 and
a set of 7 measures under ``torchrank.functional.memory_budget``, and reports the peak resident memory beyond
the input (``ru_maxrss``: the run is one process, so its peak is the input plus the largest working set) and
the time. A chunk's working memory over its size gives the bytes per item that ``BYTES_PER_ITEM`` bounds.

    python -m benchmarks.bench_chunked [--queries 10000000] [--budget-mib 256] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time
from datetime import UTC, datetime
from pathlib import Path

import torch

import torchrank.functional as F
from torchrank.functional._chunking import BYTES_PER_ITEM

SEVEN = ["ndcg@5", "ndcg@10", "ndcg@20", "map", "mrr", "P@10", "recall@100"]


def resident_bytes() -> int:
    """Current resident set size (Linux /proc), in bytes."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize()


def peak_resident_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def make_input(queries: int, items: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores and labels generated a slice at a time, so building them needs no temporary of their size."""
    g = torch.Generator().manual_seed(seed)
    preds = torch.empty(queries, items)
    target = torch.empty(queries, items, dtype=torch.int8)
    step = 100_000
    for start in range(0, queries, step):
        stop = min(start + step, queries)
        preds[start:stop] = torch.randn(stop - start, items, generator=g)
        target[start:stop] = torch.randint(0, 5, (stop - start, items), generator=g, dtype=torch.int8)
    return preds, target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000_000)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--budget-mib", type=int, default=256)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/chunked_cpu.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    preds, target = make_input(args.queries, args.items, seed=0)
    input_bytes = preds.numel() * preds.element_size() + target.numel() * target.element_size()
    baseline = resident_bytes()
    budget = args.budget_mib * 2**20
    results = {}
    for name, call in {
        "ndcg@10": lambda: F.ndcg(preds, target, k=10),
        "7 measures": lambda: F.evaluate(preds, target, SEVEN),
    }.items():
        start = time.perf_counter()
        with F.memory_budget(budget):
            value = call()
        elapsed = time.perf_counter() - start
        extra = peak_resident_bytes() - baseline
        results[name] = {
            "seconds": elapsed,
            "peak_extra_resident_bytes": extra,
            "peak_extra_over_budget": extra / budget,
            "mean": {k: float(v) for k, v in value.items()} if isinstance(value, dict) else float(value),
        }
        print(f"{name:12s} {elapsed:7.1f} s  peak extra {extra / 2**20:8.1f} MiB (budget {args.budget_mib} MiB)")
    record = {
        "benchmark": "chunked",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": 1,
        "queries": args.queries,
        "items": args.items,
        "input_bytes": input_bytes,
        "budget_bytes": budget,
        "bytes_per_item_assumed": BYTES_PER_ITEM,
        "baseline_resident_bytes": baseline,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"input {input_bytes / 2**30:.2f} GiB; written {args.out}")


if __name__ == "__main__":
    main()
