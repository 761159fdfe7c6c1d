"""Stateful metrics over a validation epoch: torchrank against torchmetrics' retrieval classes.

An epoch is ``updates`` updates of ``[queries x items]`` (scores ``torch.rand``: positive, so torchmetrics'
``preds > 0`` filter changes nothing; graded labels), then ``compute``. Contenders: torchrank ``NDCG(k=10)``
and ``RankingMetrics`` of 8 measures; torchmetrics ``RetrievalNormalizedDCG(top_k=10)`` and a
``MetricCollection`` of the 8 equivalent classes. Also recorded: state memory after 10 and after all
updates, and the collectives one ``compute`` issues under ``torch.distributed`` (2 gloo processes).

    python -m benchmarks.bench_metrics [--smoke] [--out benchmarks/results/metrics_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks.bench_functional import REPO_ROOT, metadata, summarize, timed_call

MEASURES = ["ndcg@5", "ndcg@10", "ndcg@20", "map", "mrr", "P@10", "recall@100", "success@10"]
FULL = {"updates": 100, "queries": 100, "items": 100, "repeats": 3}
SMOKE = {"updates": 4, "queries": 10, "items": 20, "repeats": 1}


def epoch_data(updates: int, queries: int, items: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(queries, items, generator=g), torch.randint(0, 5, (queries, items), generator=g))
            for _ in range(updates)]


def _torchmetrics_collection() -> Any:
    from torchmetrics import MetricCollection
    from torchmetrics import retrieval as R

    return MetricCollection({
        "ndcg@5": R.RetrievalNormalizedDCG(top_k=5), "ndcg@10": R.RetrievalNormalizedDCG(top_k=10),
        "ndcg@20": R.RetrievalNormalizedDCG(top_k=20), "map": R.RetrievalMAP(), "mrr": R.RetrievalMRR(),
        "P@10": R.RetrievalPrecision(top_k=10), "recall@100": R.RetrievalRecall(top_k=100),
        "success@10": R.RetrievalHitRate(top_k=10),
    }, compute_groups=False)


def contenders() -> dict[str, tuple[Callable[[], Any], bool]]:
    """name -> (factory, takes flat input with indexes)."""
    from torchmetrics.retrieval import RetrievalNormalizedDCG

    from torchrank import compat
    from torchrank.metrics import NDCG, RankingMetrics

    return {
        "torchrank NDCG(k=10)": (lambda: NDCG(k=10), False),
        "torchrank.compat RetrievalNormalizedDCG": (lambda: compat.RetrievalNormalizedDCG(top_k=10), True),
        "torchrank RankingMetrics 8": (lambda: RankingMetrics(MEASURES), False),
        "torchmetrics RetrievalNormalizedDCG": (lambda: RetrievalNormalizedDCG(top_k=10), True),
        "torchmetrics MetricCollection 8": (_torchmetrics_collection, True),
    }


def run_epoch(metric: Any, flat: bool, batches: list[tuple[torch.Tensor, torch.Tensor]], offset: int = 0) -> Any:
    for i, (preds, target) in enumerate(batches):
        if flat:
            q, n = preds.shape
            indexes = torch.arange(offset + i * q, offset + (i + 1) * q).repeat_interleave(n)
            metric.update(preds.flatten(), target.flatten(), indexes=indexes)
        else:
            metric.update(preds, target)
    return metric.compute()


def _binary_for_torchmetrics(name: str, target: torch.Tensor) -> torch.Tensor:
    return target if name.startswith("ndcg") else target > 0


def state_bytes(metric: Any) -> int:
    metrics = metric.values() if hasattr(metric, "values") and not hasattr(metric, "metric_state") else [metric]
    total = 0
    for m in metrics:
        for value in m.metric_state.values():
            tensors = value if isinstance(value, list) else [value]
            total += sum(t.numel() * t.element_size() for t in tensors)
    return total


class _BinaryTargets:
    """Feeds torchmetrics' binary classes ``target > 0`` and its NDCGs the graded labels (untimed prep)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def update(self, preds: torch.Tensor, target: torch.Tensor, indexes: torch.Tensor) -> None:
        for name, metric in self.collection.items():
            metric.update(preds, _binary_for_torchmetrics(name, target), indexes=indexes)

    def compute(self) -> dict[str, torch.Tensor]:
        return {name: metric.compute() for name, metric in self.collection.items()}

    def values(self) -> Any:
        return self.collection.values()


def build(name: str) -> tuple[Any, bool]:
    factory, flat = contenders()[name]
    metric = factory()
    return (_BinaryTargets(metric) if name.endswith("MetricCollection 8") else metric), flat


def time_epochs(config: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    batches = epoch_data(config["updates"], config["queries"], config["items"])
    times: dict[str, list[float]] = {name: [] for name in contenders()}
    results: dict[str, Any] = {}
    for _ in range(config["repeats"]):  # interleaved: each repeat runs every contender once
        for name in contenders():
            metric, flat = build(name)
            elapsed, results[name] = timed_call(lambda m=metric, f=flat: run_epoch(m, f, batches))
            times[name].append(elapsed)
    memory = {}
    for name in contenders():
        metric, flat = build(name)
        run_epoch(metric, flat, batches[: min(10, len(batches))])
        after_10 = state_bytes(metric)
        metric, flat = build(name)
        run_epoch(metric, flat, batches)
        memory[name] = {"after_10_updates": after_10, f"after_{len(batches)}_updates": state_bytes(metric)}
    return {name: summarize(ts) for name, ts in times.items()}, results, memory


def check_agreement(results: dict[str, Any], tolerance: float = 1e-4) -> float:
    theirs_ndcg = float(results["torchmetrics RetrievalNormalizedDCG"])
    worst = max(abs(float(results[name]) - theirs_ndcg)
                for name in ("torchrank NDCG(k=10)", "torchrank.compat RetrievalNormalizedDCG"))
    ours, theirs = results["torchrank RankingMetrics 8"], results["torchmetrics MetricCollection 8"]
    worst = max([worst] + [abs(float(ours[m]) - float(theirs[m])) for m in MEASURES])
    if worst > tolerance:
        raise AssertionError(f"torchrank and torchmetrics disagree by {worst:.2e}: the timings would compare apples "
                             "and oranges")
    return worst


# ------------------------------------------------------------------------------------- collectives per compute
def _count_collectives(rank: int, port: int, config: dict[str, int], out: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    counts: dict[str, int] = {}
    calls = {"n": 0}
    names = ("all_gather", "all_gather_object", "all_reduce", "broadcast", "gather", "all_gather_into_tensor")
    originals = {n: getattr(dist, n) for n in names}

    def counting(fn: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            return fn(*args, **kwargs)

        return wrapper

    batches = epoch_data(config["updates"], config["queries"], config["items"], seed=rank + 1)
    for name in contenders():
        metric, flat = build(name)
        for i, (preds, target) in enumerate(batches):  # distinct query ids per rank
            if flat:
                first = (rank * len(batches) + i) * preds.shape[0]
                idx = torch.arange(first, first + preds.shape[0]).repeat_interleave(preds.shape[1])
                metric.update(preds.flatten(), target.flatten(), indexes=idx)
            else:
                metric.update(preds, target)
        for n in names:
            setattr(dist, n, counting(originals[n]))
        calls["n"] = 0
        metric.compute()
        counts[name] = calls["n"]
        for n in names:
            setattr(dist, n, originals[n])
    if rank == 0:
        out.put(counts)
    dist.barrier()
    dist.destroy_process_group()


def collectives_per_compute(config: dict[str, int]) -> dict[str, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_count_collectives, args=(rank, port, config, queue)) for rank in range(2)]
    for p in procs:
        p.start()
    counts = queue.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    return counts


# ----------------------------------------------------------------------------------------------- report
def markdown(report: dict[str, Any]) -> str:
    t = report["timings"]
    lines = [
        "# Stateful metrics over a validation epoch (CPU)", "",
        f"Generated by `python -m benchmarks.bench_metrics` on {report['metadata']['date']}; commit "
        f"`{report['metadata']['git_commit']}`; {report['metadata']['cpu_model']}, "
        f"{report['metadata']['torch_num_threads']} threads; torch {report['metadata']['torch']}, "
        f"torchmetrics {report['metadata']['torchmetrics']}.", "",
        f"Epoch: {report['config']['updates']} updates of [{report['config']['queries']} queries x "
        f"{report['config']['items']} items], graded labels 0-4, then compute. Medians over "
        f"{report['config']['repeats']} interleaved repeats.", "",
        "| contender | epoch (median) | IQR | state after 10 updates | state after the epoch "
        "| collectives per compute |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in t.items():
        early, late = report["state_bytes"][name].values()
        iqr = "-" if s["iqr_s"] is None else f"{s['iqr_s']:.3f} s"
        lines.append(f"| {name} | {s['median_s']:.3f} s | {iqr} | {early:,} B | {late:,} B | "
                     f"{report['collectives_per_compute'].get(name, '-')} |")
    lines += ["", "| ratio | value | target |", "|---|---|---|"]
    for key, value in report["ratios"].items():
        lines.append(f"| {key} | {value['value']:.1f}x | {value['target']} |")
    lines += ["", f"Correctness guard: torchrank and torchmetrics means agree within {report['agreement']:.1e}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny epoch, 1 repeat (CI)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "metrics_cpu.json")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-distributed", action="store_true", help="skip counting collectives (2 processes)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = SMOKE if args.smoke else FULL
    timings, results, memory = time_epochs(config)
    agreement = check_agreement(results)
    median = {name: s["median_s"] for name, s in timings.items()}
    ratios = {
        "torchmetrics RetrievalNormalizedDCG / torchrank NDCG(k=10)": {
            "value": median["torchmetrics RetrievalNormalizedDCG"] / median["torchrank NDCG(k=10)"],
            "target": ">= 50x",
        },
        "torchmetrics RetrievalNormalizedDCG / torchrank.compat RetrievalNormalizedDCG (flat input)": {
            "value": median["torchmetrics RetrievalNormalizedDCG"] / median["torchrank.compat RetrievalNormalizedDCG"],
            "target": "(migration)",
        },
        "torchmetrics MetricCollection 8 / torchrank RankingMetrics 8": {
            "value": median["torchmetrics MetricCollection 8"] / median["torchrank RankingMetrics 8"],
            "target": ">= 100x"},
    }
    report = {
        "metadata": metadata(args.threads, {"torchmetrics": True}), "config": config, "measures": MEASURES,
        "timings": timings, "ratios": ratios, "state_bytes": memory, "agreement": agreement,
        "collectives_per_compute": {} if args.no_distributed else collectives_per_compute(SMOKE),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    args.out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
