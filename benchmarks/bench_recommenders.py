"""Workload ``recommenders``: the beyond-accuracy classes over an epoch against a plain numpy implementation.

Run through the harness (``python -m benchmarks.run --config configs/bench/recommenders.yaml``); :func:`measure`
takes one ``kind: recommenders`` config section and returns records (``benchmarks/_records.py``).

An epoch is ``updates`` batches of top-``k`` lists ``[lists, k]`` of distinct ids from ``items`` items (Zipf-like
popularity, so exposure is uneven). torchrank: a fresh metric of each class, ``update`` per batch, then
``compute`` (primary). numpy: the same measure as RecBole and recmetrics compute it, in plain numpy: the epoch's
lists collected batch by batch, then the measure from item counts (``bincount``), per-list means (fancy
indexing), per-list cosine similarities (``matmul`` of ``[lists, k, d]``) over all collected lists (incumbent).
Personalization in numpy uses the same per-item weights as torchrank (``sum_i w_i^2``): recmetrics' all-pairs
matrix of ``U x U`` similarities is out of reach at ``U = updates x lists`` (``U^2`` entries).

A variant gives torchrank numpy's schedule (the epoch's lists concatenated, one ``update``): what the per-update
cost is, against what the measure costs. Guard: every epoch's value equals numpy's within ``tolerance`` (relative),
on the warm-up epoch and the last timed one.
RecBole itself is not installable here (it pins old numpy/torch); the numpy functions follow its formulas.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from benchmarks._records import record
from benchmarks._timing import Contender, TimingConfig, measure_contenders
from torchrank.metrics import (
    AveragePopularity,
    Coverage,
    ExposureEntropy,
    GiniIndex,
    IntraListDiversity,
    LongTailShare,
    Novelty,
    Personalization,
)

KIND = "recommenders"
DEFAULTS: dict[str, Any] = {
    "updates": 1000,
    "lists": 64,
    "k": 20,
    "items": 10_000,
    "dim": 32,
    "classes": ["Coverage", "GiniIndex", "ExposureEntropy", "Novelty", "AveragePopularity", "LongTailShare",
                "IntraListDiversity", "Personalization"],
    "tolerance": 1e-5,
    "seed": 0,
    "threads": 1,
    "device": "cpu",
    "timing": {"slow_threshold_s": 0.0, "slow_repeats": 5},
}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def epoch(updates: int, lists: int, k: int, items: int, seed: int) -> list[torch.Tensor]:
    """``updates`` batches of ``[lists, k]`` distinct ids, popular items more often (weights ``1 / rank``)."""
    g = torch.Generator().manual_seed(seed)
    weights = 1 / torch.arange(1, items + 1, dtype=torch.float64)
    return [torch.multinomial(weights.expand(lists, items), k, replacement=False, generator=g)
            for _ in range(updates)]


# ----------------------------------------------------------------------------------------------- numpy
def _collect(batches: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(batches)


def np_coverage(lists: np.ndarray, items: int) -> float:
    return np.unique(lists).size / items


def np_gini(lists: np.ndarray, items: int) -> float:
    counts = np.sort(np.bincount(lists.ravel(), minlength=items).astype(np.float64))
    index = np.arange(1, items + 1)
    return float(((2 * index - items - 1) * counts).sum() / (items * counts.sum()))


def np_entropy(lists: np.ndarray, items: int) -> float:
    counts = np.bincount(lists.ravel(), minlength=items).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def np_list_mean(lists: np.ndarray, values: np.ndarray) -> float:
    return float(values[lists].mean(1).mean())


def np_ild(lists: np.ndarray, unit: np.ndarray) -> float:
    vectors = unit[lists]
    similarity = vectors @ vectors.transpose(0, 2, 1)
    k = lists.shape[1]
    off = similarity.sum((1, 2)) - np.trace(similarity, axis1=1, axis2=2)
    return float((1 - off / (k * (k - 1))).mean())


def np_personalization(lists: np.ndarray, items: int) -> float:
    users, k = lists.shape
    weights = np.bincount(lists.ravel(), minlength=items) / np.sqrt(k)
    return float(1 - ((weights**2).sum() - users) / (users * (users - 1)))


def _cases(items: int, dim: int, seed: int) -> dict[str, tuple[Callable[[int], Any], Callable[[np.ndarray], float]]]:
    """Class name -> (torchrank factory of k, numpy measure of the collected lists)."""
    g = torch.Generator().manual_seed(seed + 1)
    popularity = (1 / torch.arange(1, items + 1, dtype=torch.float64)) / 2  # shares in (0, 1]
    tail = torch.zeros(items, dtype=torch.bool)
    tail[items // 5:] = True
    embeddings = torch.randn(items, dim, generator=g, dtype=torch.float64)
    info, pop, tail_np = (-np.log2(popularity.numpy()), popularity.numpy(), tail.numpy().astype(np.float64))
    unit = (embeddings / embeddings.norm(dim=1, keepdim=True)).numpy()
    return {
        "Coverage": (lambda k: Coverage(k=k, num_items=items), lambda x: np_coverage(x, items)),
        "GiniIndex": (lambda k: GiniIndex(k=k, num_items=items), lambda x: np_gini(x, items)),
        "ExposureEntropy": (lambda k: ExposureEntropy(k=k, num_items=items), lambda x: np_entropy(x, items)),
        "Novelty": (lambda k: Novelty(k=k, item_popularity=popularity), lambda x: np_list_mean(x, info)),
        "AveragePopularity": (lambda k: AveragePopularity(k=k, item_popularity=popularity),
                              lambda x: np_list_mean(x, pop)),
        "LongTailShare": (lambda k: LongTailShare(k=k, long_tail=tail), lambda x: np_list_mean(x, tail_np)),
        "IntraListDiversity": (lambda k: IntraListDiversity(k=k, item_embeddings=embeddings),
                               lambda x: np_ild(x, unit)),
        "Personalization": (lambda k: Personalization(k=k, num_items=items), lambda x: np_personalization(x, items)),
    }


def measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Time one ``kind: recommenders`` config section; records for :mod:`benchmarks.run`."""
    config = {**DEFAULTS, **config, "timing": {**DEFAULTS["timing"], **(config.get("timing") or {})}}
    updates, lists, k, items = (int(config[key]) for key in ("updates", "lists", "k", "items"))
    batches = epoch(updates, lists, k, items, int(config["seed"]))
    arrays = [b.numpy() for b in batches]
    cases = _cases(items, int(config["dim"]), int(config["seed"]))
    timing = TimingConfig.from_dict(config["timing"])
    tolerance = float(config["tolerance"])
    params = {"updates": updates, "lists": lists, "k": k, "items": items, "device": "cpu"}
    out = []
    for name in config["classes"]:
        factory, reference = cases[name]
        want = reference(_collect(arrays))

        def check(value: Any, _q: int, want: float = want, name: str = name) -> dict[str, Any]:
            diff = abs(float(value) - want)
            if not diff <= tolerance * max(1.0, abs(want)):  # relative: compute returns the default float dtype
                raise AssertionError(f"recommenders: {name} {float(value)} != numpy's {want}")
            return {"abs_diff": diff, "tolerance": tolerance, "against": "the numpy implementation"}

        def torchrank_epoch(_q: int, factory: Callable[[int], Any] = factory) -> Callable[[], Any]:
            def call() -> torch.Tensor:
                metric = factory(k)
                for batch in batches:
                    metric.update(batch)
                return metric.compute()

            return call

        def torchrank_collected(_q: int, factory: Callable[[int], Any] = factory) -> Callable[[], Any]:
            def call() -> torch.Tensor:
                metric = factory(k)
                metric.update(torch.cat(batches))  # the numpy contender's schedule: lists collected, one pass
                return metric.compute()

            return call

        def numpy_epoch(_q: int, reference: Callable[[np.ndarray], float] = reference) -> Callable[[], Any]:
            def call() -> float:
                collected = []
                for batch in arrays:
                    collected.append(batch)
                return reference(_collect(collected))

            return call

        contenders = [
            Contender(f"{name}(k={k})", "torchrank", "primary", "fresh metric, update per batch, compute",
                      torchrank_epoch, check),
            Contender(f"numpy {name}", "numpy", "incumbent", "lists collected per batch, then the measure",
                      numpy_epoch, check),
            Contender(f"{name}(k={k}), one update of the collected lists", "torchrank", "variant",
                      "torch.cat of the epoch's lists, one update, compute: numpy's schedule",
                      torchrank_collected, check),
        ]
        _log(f"  {name}: epoch of {updates} updates of [{lists} x {k}]")
        timings = measure_contenders(contenders, updates, timing, int(config["threads"]), torch.device("cpu"), _log)
        numpy_s = timings[1]["median_s"]
        for c, t in zip(contenders, timings, strict=True):
            out.append(record(f"epoch {name} {updates}x[{lists}x{k}]", c.library, c.name, {**params, "class": name},
                              t, role=c.role, kind=KIND, group="beyond-accuracy epoch", description=c.description,
                              extra={"numpy_time_over_this": numpy_s / t["median_s"]}))
    return out
