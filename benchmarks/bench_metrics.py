"""Workload ``metrics``: stateful metrics over a validation epoch, torchrank against torchmetrics' classes.

Run through the harness (``python -m benchmarks.run --config configs/bench/metrics.yaml``); :func:`measure`
takes one ``kind: metrics`` config section and returns records (``benchmarks/_records.py``).

An epoch is ``updates`` updates of ``[queries x items]`` (scores ``torch.rand``: positive, so torchmetrics'
``preds > 0`` filter changes nothing; graded labels 0-4), then ``compute``, on a fresh metric. Two workloads:

- ``epoch NDCG(k=10)``: torchrank ``NDCG(k=10)`` (primary) and the ``torchrank.compat`` drop-in (flat input,
  as torchmetrics takes it) against torchmetrics ``RetrievalNormalizedDCG(top_k=10)``;
- ``epoch set of 8``: torchrank ``RankingMetrics`` of 8 measures against a ``MetricCollection`` of the 8
  equivalent torchmetrics classes (its binary classes get ``target > 0``, untimed).

Also recorded (``extra``): each metric's state size after 10 updates and after the epoch, and, in 2 spawned
gloo processes, how many collectives one synced ``compute`` issues. Correctness guard: every contender's epoch
value lies within torchrank's functional tie bounds on the concatenated epoch (checked on the warm-up epoch and
on the last timed one).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torchrank.functional as F
from benchmarks._records import record
from benchmarks._timing import Contender, TimingConfig, measure_contenders

KIND = "metrics"
SET8 = ["ndcg@5", "ndcg@10", "ndcg@20", "map", "mrr", "P@10", "recall@100", "success@10"]
DEFAULTS: dict[str, Any] = {
    "updates": 100,
    "queries": 100,
    "items": 100,
    "collectives": True,  # count collectives per synced compute in 2 gloo processes
    "collectives_epoch": {"updates": 4, "queries": 10, "items": 20},  # the count does not depend on the size
    "tolerance": 1e-4,
    "seed": 0,
    "threads": 1,
    "device": "cpu",
    "timing": {"slow_threshold_s": 1.0, "slow_repeats": 3, "rounds": 2, "min_run_time": 1.0},
}
Batches = list[tuple[torch.Tensor, torch.Tensor]]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def epoch_data(updates: int, queries: int, items: int, seed: int, device: torch.device | str = "cpu") -> Batches:
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(queries, items, generator=g).to(device),
             torch.randint(0, 5, (queries, items), generator=g).to(device)) for _ in range(updates)]


# ----------------------------------------------------------------------------------------------- contenders
def _torchmetrics_collection() -> Any:
    from torchmetrics import MetricCollection
    from torchmetrics import retrieval as R

    return MetricCollection({
        "ndcg@5": R.RetrievalNormalizedDCG(top_k=5), "ndcg@10": R.RetrievalNormalizedDCG(top_k=10),
        "ndcg@20": R.RetrievalNormalizedDCG(top_k=20), "map": R.RetrievalMAP(), "mrr": R.RetrievalMRR(),
        "P@10": R.RetrievalPrecision(top_k=10), "recall@100": R.RetrievalRecall(top_k=100),
        "success@10": R.RetrievalHitRate(top_k=10),
    }, compute_groups=False)  # groups would merge states of different classes; each class keeps its own


class _BinaryTargets:
    """Feeds torchmetrics' binary classes ``target > 0`` and its NDCGs the graded labels."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def to(self, device: torch.device) -> _BinaryTargets:
        self.collection.to(device)
        return self

    def update(self, preds: torch.Tensor, target: torch.Tensor, indexes: torch.Tensor) -> None:
        for name, metric in self.collection.items():
            metric.update(preds, target if name.startswith("ndcg") else target > 0, indexes=indexes)

    def compute(self) -> dict[str, torch.Tensor]:
        return {name: metric.compute() for name, metric in self.collection.items()}

    def values(self) -> Any:
        return self.collection.values()


def contenders() -> dict[str, tuple[str, str, str, Callable[[], Any], bool]]:
    """name -> (workload label, library, role, factory, takes flat input with indexes)."""
    from torchmetrics.retrieval import RetrievalNormalizedDCG

    from torchrank import compat
    from torchrank.metrics import NDCG, RankingMetrics

    return {
        "NDCG(k=10)": ("NDCG(k=10)", "torchrank", "primary", lambda: NDCG(k=10), False),
        "compat.RetrievalNormalizedDCG(top_k=10)": (
            "NDCG(k=10)", "torchrank", "variant", lambda: compat.RetrievalNormalizedDCG(top_k=10), True),
        "RetrievalNormalizedDCG(top_k=10)": (
            "NDCG(k=10)", "torchmetrics", "incumbent", lambda: RetrievalNormalizedDCG(top_k=10), True),
        "RankingMetrics(8 measures)": ("set of 8", "torchrank", "primary", lambda: RankingMetrics(SET8), False),
        "MetricCollection(8 classes)": (
            "set of 8", "torchmetrics", "incumbent", lambda: _BinaryTargets(_torchmetrics_collection()), True),
    }


def update_all(metric: Any, flat: bool, batches: Batches, first_query: int = 0) -> None:
    """``metric.update`` on every batch; flat contenders get distinct query ids per batch (as a dataloader would)."""
    for i, (preds, target) in enumerate(batches):
        if flat:
            q, n = preds.shape
            start = first_query + i * q
            indexes = torch.arange(start, start + q, device=preds.device).repeat_interleave(n)
            metric.update(preds.flatten(), target.flatten(), indexes=indexes)
        else:
            metric.update(preds, target)


def state_bytes(metric: Any) -> int:
    """Bytes held in a metric's (or a collection's) states."""
    metrics = metric.values() if hasattr(metric, "values") and not hasattr(metric, "metric_state") else [metric]
    total = 0
    for m in metrics:
        for value in m.metric_state.values():
            tensors = value if isinstance(value, list) else [value]
            total += sum(t.numel() * t.element_size() for t in tensors)
    return total


# ----------------------------------------------------------------------------------------------- guard
def epoch_guard(batches: Batches, measures: list[str], tolerance: float) -> Callable[[Any, int], dict[str, Any]]:
    """The epoch's value of each measure within torchrank's functional tie bounds on the concatenated epoch."""
    preds = torch.cat([p for p, _ in batches])
    target = torch.cat([t for _, t in batches])
    bounds = {ties: {m: float(v) for m, v in F.evaluate(preds, target, measures, ties=ties).items()}
              for ties in ("pessimistic", "optimistic")}

    def check(output: Any, _updates: int) -> dict[str, Any]:
        values = output if isinstance(output, dict) else {measures[0]: output}
        report, worst = {}, 0.0
        for m in measures:
            value, lo, hi = float(values[m]), bounds["pessimistic"][m], bounds["optimistic"][m]
            outside = max(lo - value, value - hi, 0.0)
            worst = max(worst, outside)
            report[m] = {"value": value, "pessimistic": lo, "optimistic": hi}
            if not outside <= tolerance:
                raise AssertionError(f"correctness guard: epoch {m} {value!r} outside torchrank's [{lo!r}, {hi!r}]")
        return {"reference": "torchrank functional tie bounds on the concatenated epoch", "tolerance": tolerance,
                "max_outside": worst, "measures": report}

    return check


# ----------------------------------------------------------------------------------------------- collectives
def _count_collectives(rank: int, port: int, epoch: dict[str, int], out: Any) -> None:
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

    batches = epoch_data(epoch["updates"], epoch["queries"], epoch["items"], seed=rank + 1)
    for name, (_, _, _, factory, flat) in contenders().items():
        metric = factory()
        update_all(metric, flat, batches, first_query=rank * len(batches) * epoch["queries"])  # distinct ids per rank
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


def collectives_per_compute(epoch: dict[str, int]) -> dict[str, int]:
    """Collectives (all_gather, all_reduce, ...) one synced ``compute`` issues, per contender, in 2 gloo processes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_count_collectives, args=(rank, port, epoch, queue)) for rank in range(2)]
    for p in procs:
        p.start()
    counts = queue.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    return counts


# ----------------------------------------------------------------------------------------------- measure
def measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Time the epochs of one ``kind: metrics`` config section; records for :mod:`benchmarks.run`."""
    config = {**DEFAULTS, **config, "timing": {**DEFAULTS["timing"], **(config.get("timing") or {})}}
    device = torch.device(config["device"])
    updates, queries, items = int(config["updates"]), int(config["queries"]), int(config["items"])
    batches = epoch_data(updates, queries, items, int(config["seed"]), device)
    tolerance = float(config["tolerance"])
    guards = {"NDCG(k=10)": epoch_guard(batches, ["ndcg@10"], tolerance),
              "set of 8": epoch_guard(batches, SET8, tolerance)}
    states: dict[str, dict[str, int]] = {}
    entries = []
    for name, (label, library, role, factory, flat) in contenders().items():
        entries.append((label, _epoch_contender(name, library, role, factory, flat, batches, guards[label], states)))
    timing = TimingConfig.from_dict(config["timing"])
    _log(f"  epochs of {updates} updates of [{queries} x {items}]")
    timings = measure_contenders([c for _, c in entries], updates, timing, int(config["threads"]), device, _log)
    counts = collectives_per_compute(config["collectives_epoch"]) if config["collectives"] else {}
    params = {"updates": updates, "queries": queries, "items": items, "device": device.type}
    shape = f"{updates}x[{queries}x{items}]"
    out = []
    for (label, c), t in zip(entries, timings, strict=True):
        extra = {"state_bytes": states.get(c.name), "collectives_per_compute": counts.get(c.name)}
        out.append(record(f"epoch {label} {shape}", c.library, c.name, {**params, "metric": label}, t, role=c.role,
                          kind=KIND, group=f"epoch {label}", description=c.description, extra=extra))
    return out


def _epoch_contender(name: str, library: str, role: str, factory: Callable[[], Any], flat: bool, batches: Batches,
                     check: Callable[[Any, int], dict[str, Any]], states: dict[str, dict[str, int]]) -> Contender:
    """An epoch on a fresh metric as a :class:`Contender`; its guard also records the state size after 10 updates
    (a separate, untimed run) and after the epoch (the checked epoch's own metric)."""
    device = batches[0][0].device

    def build(_updates: int) -> Callable[[], Any]:
        def call() -> tuple[Any, Any]:
            metric = factory().to(device)
            update_all(metric, flat, batches)
            return metric, metric.compute()

        return call

    def check_and_size(output: tuple[Any, Any], updates: int) -> dict[str, Any]:
        metric, value = output
        if name not in states:
            early = factory().to(device)
            update_all(early, flat, batches[: min(10, len(batches))])
            states[name] = {"after_10_updates": state_bytes(early)}
        states[name][f"after_{updates}_updates"] = state_bytes(metric)
        return check(value, updates)

    description = (f"fresh {name}: {len(batches)} x update("
                   + ("preds.flatten(), target.flatten(), indexes" if flat else "preds [Q, N], target [Q, N]")
                   + ") + compute()")
    return Contender(name, library, role, description, build, check_and_size)
