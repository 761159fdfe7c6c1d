"""CPU benchmark of ``torchrank.functional`` against torchmetrics, pytrec_eval and ranx.

Run from the repository root::

    python -m benchmarks.bench_functional                 # full run, configs/bench/functional.yaml
    python -m benchmarks.bench_functional --smoke         # tiny run, configs/bench/smoke.yaml

Writes a JSON file (``--out``, default ``benchmarks/results/functional_cpu.json``) and a markdown table next to
it (same name, ``.md``). See ``benchmarks/README.md`` for what is measured and how to read the ratios.

Every contender is called through its public API on the same in-memory tensors. Before anything is timed,
each contender's values are checked against torchrank's (NDCG@10 and the 7-measure set, ``ties="first"``):
a benchmark that compares different numbers is worthless, so a mismatch aborts the run.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from torch.utils.benchmark import Timer

import torchrank
import torchrank.functional as F

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO_ROOT / "configs" / "bench" / "functional.yaml"
SMOKE_CONFIG = REPO_ROOT / "configs" / "bench" / "smoke.yaml"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "functional_cpu.json"
SMOKE_OUT = REPO_ROOT / "benchmarks" / "results" / "functional_cpu_smoke.json"

SEVEN = ["ndcg@5", "ndcg@10", "ndcg@20", "map", "mrr", "P@10", "recall@100"]

# Used when PyYAML is missing (it is not a torchrank dependency) or the config file does not exist.
DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "threads": 1,
    "num_labels": 5,
    "k": 10,
    "measures": SEVEN,
    "workloads": [{"queries": 10_000, "items": 100}, {"queries": 1_000, "items": 1_000}],
    "timing": {
        "min_run_time": 1.0,
        "rounds": 3,
        "slow_threshold_s": 1.0,
        "slow_repeats": 3,
        "slow_budget_s": 100.0,
        "pilot_queries": 200,
        "subset_queries": 1_000,
    },
    "tolerance": 1e-4,
}
SMOKE_DEFAULTS: dict[str, Any] = {
    **DEFAULTS,
    "workloads": [{"queries": 50, "items": 20}],
    "timing": {
        "min_run_time": 0.05,
        "rounds": 1,
        "slow_threshold_s": 1.0,
        "slow_repeats": 1,
        "slow_budget_s": 10.0,
        "pilot_queries": 50,
        "subset_queries": 50,
    },
}

# Headline contenders (keys of the JSON "contenders" objects)
TR_NDCG = "torchrank.ndcg@10 ties=average"
TR_NDCG_FIRST = "torchrank.ndcg@10 ties=first"
TR_NDCG_FLAT = "torchrank.ndcg@10 flat indexes"
TR_NDCG_TIED = "torchrank.ndcg@10 one tied row"
TR_SEVEN = "torchrank.evaluate 7 measures"
TM_CLASS = "torchmetrics RetrievalNormalizedDCG"
TM_COLLECTION = "torchmetrics MetricCollection 7"
TM_LOOP = "torchmetrics retrieval_normalized_dcg loop"
PT_NDCG = "pytrec_eval ndcg_cut.10 eval-only"
PT_SEVEN = "pytrec_eval 7 eval-only"
PT_CONV = "pytrec_eval conversion"
RX_NDCG = "ranx ndcg@10 eval-only"
RX_SEVEN = "ranx 7 eval-only"
RX_CONV = "ranx conversion"

# (name, numerator, denominator): a ratio > 1 means the denominator is faster
RATIOS = [
    ("torchmetrics_class_over_torchrank_ndcg10", TM_CLASS, TR_NDCG),
    ("torchmetrics_class_over_torchrank_ndcg10_first", TM_CLASS, TR_NDCG_FIRST),
    ("torchmetrics_class_over_torchrank_ndcg10_flat", TM_CLASS, TR_NDCG_FLAT),
    ("torchmetrics_loop_over_torchrank_ndcg10", TM_LOOP, TR_NDCG),
    ("torchrank_ndcg10_one_tied_row_over_torchrank_ndcg10", TR_NDCG_TIED, TR_NDCG),
    ("pytrec_eval_over_torchrank_ndcg10_one_tied_row", PT_NDCG, TR_NDCG_TIED),
    ("pytrec_eval_over_torchrank_ndcg10", PT_NDCG, TR_NDCG),
    ("pytrec_eval_over_torchrank_ndcg10_first", PT_NDCG, TR_NDCG_FIRST),
    ("pytrec_eval_conversion_over_torchrank_ndcg10", PT_CONV, TR_NDCG),
    ("ranx_over_torchrank_ndcg10", RX_NDCG, TR_NDCG),
    ("ranx_over_torchrank_ndcg10_first", RX_NDCG, TR_NDCG_FIRST),
    ("ranx_conversion_over_torchrank_ndcg10", RX_CONV, TR_NDCG),
    ("torchrank_7_over_torchrank_ndcg10", TR_SEVEN, TR_NDCG),
    ("torchmetrics_collection_over_torchrank_7", TM_COLLECTION, TR_SEVEN),
    ("pytrec_eval_7_over_torchrank_7", PT_SEVEN, TR_SEVEN),
    ("ranx_7_over_torchrank_7", RX_SEVEN, TR_SEVEN),
]
# the targets: (name, ratio, comparison, bound); reported, never asserted
TARGETS = [
    ("NDCG@10 >= 50x faster than torchmetrics RetrievalNormalizedDCG", "torchmetrics_class_over_torchrank_ndcg10",
     ">=", 50.0),
    ("NDCG@10 >= 10x faster than pytrec_eval (eval only)", "pytrec_eval_over_torchrank_ndcg10", ">=", 10.0),
    ("7-measure evaluate <= 2x NDCG@10 alone", "torchrank_7_over_torchrank_ndcg10", "<=", 2.0),
]


# ----------------------------------------------------------------------------------------------- config
def load_config(path: Path | None, smoke: bool) -> tuple[dict[str, Any], list[str]]:
    """The config at ``path`` over the baked-in defaults, and notes on where it came from."""
    defaults = copy.deepcopy(SMOKE_DEFAULTS if smoke else DEFAULTS)
    path = path or (SMOKE_CONFIG if smoke else DEFAULT_CONFIG)
    try:
        import yaml  # lazily: PyYAML is not a torchrank dependency
    except ImportError:
        return defaults, [f"PyYAML not importable: {path} ignored, built-in defaults used."]
    if not path.exists():
        return defaults, [f"config {path} not found: built-in defaults used."]
    with open(path) as f:
        loaded = yaml.safe_load(f) or {}
    timing = {**defaults["timing"], **(loaded.pop("timing", None) or {})}
    config = {**defaults, **loaded, "timing": timing}
    return config, [f"config: {_display_path(path)}"]


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


# ----------------------------------------------------------------------------------------------- measures
@dataclass(frozen=True)
class MeasureSpec:
    """One measure in every library's spelling."""

    name: str  # torchrank
    family: str  # ndcg | map | mrr | precision | recall
    k: int | None
    binary: bool  # torchmetrics needs a binary target

    @property
    def trec_key(self) -> str:
        base = {"ndcg": "ndcg_cut", "map": "map", "mrr": "recip_rank", "precision": "P", "recall": "recall"}
        return base[self.family] if self.k is None else f"{base[self.family]}_{self.k}"

    @property
    def ranx_name(self) -> str:
        base = {"ndcg": "ndcg", "map": "map", "mrr": "mrr", "precision": "precision", "recall": "recall"}
        return base[self.family] if self.k is None else f"{base[self.family]}@{self.k}"

    def torchmetrics_metric(self) -> Any:
        from torchmetrics import retrieval as tr

        if self.family == "ndcg":
            return tr.RetrievalNormalizedDCG(top_k=self.k)
        if self.family == "map":
            return tr.RetrievalMAP(top_k=self.k)
        if self.family == "mrr":
            return tr.RetrievalMRR(top_k=self.k)
        if self.family == "precision":
            return tr.RetrievalPrecision(top_k=self.k)
        return tr.RetrievalRecall(top_k=self.k)


_SPEC = re.compile(r"^(ndcg|map|mrr|p|precision|recall)(?:@(\d+))?$")


def parse_spec(name: str) -> MeasureSpec:
    match = _SPEC.match(name.lower())
    if match is None:
        raise ValueError(f"benchmark measure {name!r}: expected ndcg@k, map, mrr, P@k or recall@k")
    family = {"p": "precision"}.get(match[1], match[1])
    k = int(match[2]) if match[2] else None
    if family in ("ndcg", "precision", "recall") and k is None:
        raise ValueError(f"benchmark measure {name!r} needs a cut-off")
    if family in ("map", "mrr") and k is not None:
        raise ValueError(f"benchmark measure {name!r}: only the whole-list {family} is compared")
    return MeasureSpec(name, family, k, binary=family != "ndcg")


def trec_measure_set(specs: list[MeasureSpec]) -> set[str]:
    """pytrec_eval's measure set, e.g. ``{"ndcg_cut.5,10,20", "map", "P.10"}``."""
    cuts: dict[str, list[int]] = {}
    plain = set()
    for s in specs:
        base = s.trec_key.rsplit("_", 1)[0] if s.k is not None else s.trec_key
        if s.k is None:
            plain.add(base)
        else:
            cuts.setdefault(base, []).append(s.k)
    return plain | {f"{base}.{','.join(map(str, sorted(ks)))}" for base, ks in cuts.items()}


# ----------------------------------------------------------------------------------------------- data
class Data:
    """One workload: scores ``[Q, N]`` float32, graded labels ``[Q, N]`` int64, and the other layouts."""

    def __init__(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        self.preds, self.target = preds, target
        self.num_queries, self.num_items = preds.shape
        self.target_binary = target > 0  # torchmetrics' binary measures refuse graded labels
        self.preds_flat, self.target_flat = preds.reshape(-1), target.reshape(-1)
        self.target_binary_flat = self.target_binary.reshape(-1)
        # torchmetrics' binary retrieval measures ignore items scored <= 0: the same ranking, all scores > 0
        # (float32 -> float64 then a shift is exact, so no new ties)
        self.preds_positive_flat = (self.preds_flat.double() - self.preds_flat.min().double() + 1.0)
        self.indexes = torch.arange(self.num_queries).repeat_interleave(self.num_items)
        self.qids = [f"q{i}" for i in range(self.num_queries)]  # ids exist before evaluation: not timed
        self.docids = [f"d{j}" for j in range(self.num_items)]

    @staticmethod
    def generate(queries: int, items: int, num_labels: int, seed: int) -> Data:
        g = torch.Generator().manual_seed(seed)
        preds = torch.randn(queries, items, generator=g, dtype=torch.float32)
        target = torch.randint(0, num_labels, (queries, items), generator=g)
        return Data(preds, target)

    def head(self, queries: int) -> Data:
        """The first ``queries`` queries (for per-query loops timed on a subset)."""
        return self if queries >= self.num_queries else Data(self.preds[:queries], self.target[:queries])

    def trec_dicts(self) -> tuple[dict, dict]:
        """qrels ``{qid: {docid: int label}}`` and run ``{qid: {docid: float score}}`` from the tensors."""
        docids = self.docids
        qrels = {q: dict(zip(docids, row, strict=True)) for q, row in zip(self.qids, self.target.tolist(), strict=True)}
        run = {q: dict(zip(docids, row, strict=True)) for q, row in zip(self.qids, self.preds.tolist(), strict=True)}
        return qrels, run

    @cached_property
    def preds_one_tie(self) -> torch.Tensor:
        """The scores with query 0's second-highest score raised to its highest: one tie in one query."""
        preds = self.preds.clone()
        top = torch.topk(preds[0], 2).indices
        preds[0, top[1]] = preds[0, top[0]]
        return preds

    @cached_property
    def cached_trec_dicts(self) -> tuple[dict, dict]:
        return self.trec_dicts()

    @cached_property
    def ranx_objects(self) -> tuple[Any, Any]:
        from ranx import Qrels, Run

        qrels, run = self.cached_trec_dicts
        return Qrels(qrels), Run(run)


# ----------------------------------------------------------------------------------------------- contenders
@dataclass
class Contender:
    """A timed callable. ``build(data)`` does the untimed setup and returns the call; ``values(out)`` reads
    the measure means from its result (for the correctness guard)."""

    name: str
    library: str
    description: str
    build: Callable[[Data], Callable[[], Any]]
    values: Callable[[Any], dict[str, float]] | None = None
    per_query_loop: bool = False  # cost linear in the queries: may be timed on a subset and scaled
    role: str = "evaluation"  # or "conversion"


def _float(x: Any) -> float:
    return float(x.item() if isinstance(x, torch.Tensor) else x)


def make_contenders(config: dict[str, Any], available: dict[str, bool], threads: int) -> list[Contender]:
    k = int(config["k"])
    ndcg_name = f"ndcg@{k}"
    specs = [parse_spec(m) for m in config["measures"]]
    names = [s.name for s in specs]
    out: list[Contender] = [
        Contender(
            TR_NDCG, "torchrank", f"F.ndcg(preds, target, k={k}) (default ties='average'), dense [Q, N]",
            lambda d: lambda: F.ndcg(d.preds, d.target, k=k), lambda o: {ndcg_name: _float(o)},
        ),
        Contender(
            TR_NDCG_FIRST, "torchrank", f"F.ndcg(preds, target, k={k}, ties='first'), dense [Q, N]",
            lambda d: lambda: F.ndcg(d.preds, d.target, k=k, ties="first"), lambda o: {ndcg_name: _float(o)},
        ),
        Contender(
            TR_NDCG_FLAT, "torchrank",
            f"F.ndcg(preds_flat, target_flat, indexes=indexes, k={k}): torchmetrics' flat layout",
            lambda d: lambda: F.ndcg(d.preds_flat, d.target_flat, indexes=d.indexes, k=k),
            lambda o: {ndcg_name: _float(o)},
        ),
        Contender(
            TR_NDCG_TIED, "torchrank",
            f"F.ndcg(preds', target, k={k}): preds' = the scores with one tie at the top of query 0 (of Q); "
            "shows the cost of a tie inside the top k (values not compared: that one query changes)",
            lambda d: lambda: F.ndcg(d.preds_one_tie, d.target, k=k),
        ),
        Contender(
            TR_SEVEN, "torchrank", f"F.evaluate(preds, target, {names}) (ties='average'), one sort",
            lambda d: lambda: F.evaluate(d.preds, d.target, names),
            lambda o: {m: _float(v) for m, v in o.items()},
        ),
    ]
    if available["torchmetrics"]:
        out += _torchmetrics_contenders(k, specs)
    if available["pytrec_eval"]:
        out += _pytrec_contenders(k, specs)
    if available["ranx"]:
        out += _ranx_contenders(k, specs, threads)
    return out


def _torchmetrics_contenders(k: int, specs: list[MeasureSpec]) -> list[Contender]:
    from torchmetrics import MetricCollection
    from torchmetrics.functional.retrieval import retrieval_normalized_dcg
    from torchmetrics.retrieval import RetrievalNormalizedDCG

    ndcg_name = f"ndcg@{k}"
    graded = [s for s in specs if not s.binary]
    binary = [s for s in specs if s.binary]

    def tm_class(d: Data) -> Callable[[], Any]:
        def call() -> Any:
            metric = RetrievalNormalizedDCG(top_k=k)
            metric.update(d.preds_flat, d.target_flat, indexes=d.indexes)
            return metric.compute()

        return call

    def tm_collection(d: Data) -> Callable[[], Any]:
        def call() -> dict[str, Any]:
            result = {}
            inputs = ((graded, d.preds_flat, d.target_flat), (binary, d.preds_positive_flat, d.target_binary_flat))
            for group, preds, target in inputs:
                if not group:
                    continue
                collection = MetricCollection({f"m{i}": s.torchmetrics_metric() for i, s in enumerate(group)})
                collection.update(preds, target, indexes=d.indexes)
                values = collection.compute()
                result.update({s.name: values[f"m{i}"] for i, s in enumerate(group)})
            return result

        return call

    def tm_loop(d: Data) -> Callable[[], Any]:
        preds, target = d.preds, d.target

        def call() -> Any:
            per_query = [retrieval_normalized_dcg(preds[i], target[i], top_k=k) for i in range(len(preds))]
            return torch.stack(per_query).mean()

        return call

    return [
        Contender(
            TM_CLASS, "torchmetrics",
            f"RetrievalNormalizedDCG(top_k={k}): fresh metric, update(preds_flat, target_flat, indexes) + compute()",
            tm_class, lambda o: {ndcg_name: _float(o)}, per_query_loop=True,
        ),
        Contender(
            TM_COLLECTION, "torchmetrics",
            "two MetricCollections, fresh each call: graded target for "
            f"{[s.name for s in graded]}; `target > 0` and positive-shifted float64 scores (see notes) for "
            f"{[s.name for s in binary]}; update + compute each",
            tm_collection, lambda o: {m: _float(v) for m, v in o.items()}, per_query_loop=True,
        ),
        Contender(
            TM_LOOP, "torchmetrics",
            f"torch.stack([retrieval_normalized_dcg(preds[i], target[i], top_k={k}) for i in range(Q)]).mean()",
            tm_loop, lambda o: {ndcg_name: _float(o)}, per_query_loop=True,
        ),
    ]


def _pytrec_contenders(k: int, specs: list[MeasureSpec]) -> list[Contender]:
    import pytrec_eval

    ndcg_name = f"ndcg@{k}"
    ndcg_set = {f"ndcg_cut.{k}"}
    seven_set = trec_measure_set(specs)

    def means(result: dict[str, dict[str, float]], keys: dict[str, str]) -> dict[str, float]:
        rows = list(result.values())
        return {name: sum(r[key] for r in rows) / len(rows) for name, key in keys.items()}

    def eval_only(measures: set[str]) -> Callable[[Data], Callable[[], Any]]:
        def build(d: Data) -> Callable[[], Any]:
            qrels, run = d.cached_trec_dicts
            evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
            return lambda: evaluator.evaluate(run)

        return build

    def conversion(d: Data) -> Callable[[], Any]:
        def call() -> Any:
            qrels, run = d.trec_dicts()
            return pytrec_eval.RelevanceEvaluator(qrels, ndcg_set), run

        return call

    return [
        Contender(
            PT_NDCG, "pytrec_eval", f"RelevanceEvaluator(qrels, {ndcg_set}).evaluate(run); evaluator built untimed",
            eval_only(ndcg_set), lambda o: means(o, {ndcg_name: f"ndcg_cut_{k}"}),
        ),
        Contender(
            PT_SEVEN, "pytrec_eval", f"RelevanceEvaluator(qrels, {sorted(seven_set)}).evaluate(run)",
            eval_only(seven_set), lambda o: means(o, {s.name: s.trec_key for s in specs}),
        ),
        Contender(
            PT_CONV, "pytrec_eval",
            "tensors -> qrels/run dicts (.tolist() + dict building; id strings precomputed) + "
            f"RelevanceEvaluator(qrels, {ndcg_set})",
            conversion, role="conversion",
        ),
    ]


RANX_WARM_UP_S: dict[tuple[tuple[str, ...], int], float] = {}


def _ranx_warm_up(metrics: list[str], threads: int, data: Data) -> None:
    """Compile (or load from numba's cache) ranx's kernels once, untimed, on the first 12 queries of ``data``.

    ranx's numba dict types embed the doc-id string length (``[unichr x 3]`` for "d0".."d99"), so a warm-up on
    other ids would leave a recompilation inside the first timed call: warm up on the workload's own ids.
    """
    from ranx import evaluate

    key = (tuple(metrics), max(len(d) for d in data.docids))
    if key in RANX_WARM_UP_S:
        return
    start = time.perf_counter()
    qrels, run = data.head(12).ranx_objects
    evaluate(qrels, run, metrics, threads=threads, save_results_in_run=False)
    RANX_WARM_UP_S[key] = time.perf_counter() - start


def _ranx_contenders(k: int, specs: list[MeasureSpec], threads: int) -> list[Contender]:
    from ranx import Qrels, Run, evaluate

    ndcg_name = f"ndcg@{k}"
    seven = [s.ranx_name for s in specs]

    def eval_only(metrics: list[str]) -> Callable[[Data], Callable[[], Any]]:
        def build(d: Data) -> Callable[[], Any]:
            _ranx_warm_up(metrics, threads, d)
            qrels, run = d.ranx_objects
            return lambda: evaluate(qrels, run, metrics, threads=threads, save_results_in_run=False)

        return build

    def conversion(d: Data) -> Callable[[], Any]:
        def call() -> Any:
            qrels, run = d.trec_dicts()
            return Qrels(qrels), Run(run)

        return call

    return [
        Contender(
            RX_NDCG, "ranx",
            f'evaluate(qrels, run, ["{ndcg_name}"], threads={threads}, save_results_in_run=False); Qrels/Run '
            "built untimed, numba warmed up first",
            eval_only([ndcg_name]), lambda o: {ndcg_name: _float(o)},
        ),
        Contender(
            RX_SEVEN, "ranx", f"evaluate(qrels, run, {seven}, threads={threads}, save_results_in_run=False)",
            eval_only(seven), lambda o: {s.name: _float(o[s.ranx_name]) for s in specs},
        ),
        Contender(
            RX_CONV, "ranx", "tensors -> dicts (as for pytrec_eval) + Qrels(qrels) + Run(run)",
            conversion, role="conversion",
        ),
    ]


# ----------------------------------------------------------------------------------------------- timing
def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default)."""
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(times: list[float], scale: float = 1.0) -> dict[str, Any]:
    scaled = [t * scale for t in times]
    enough = len(scaled) >= 2
    return {
        "median_s": quantile(scaled, 0.5),
        "iqr_s": quantile(scaled, 0.75) - quantile(scaled, 0.25) if enough else None,
        "q1_s": quantile(scaled, 0.25) if enough else None,
        "q3_s": quantile(scaled, 0.75) if enough else None,
        "repeats": len(scaled),
    }


def timed_call(fn: Callable[[], Any]) -> tuple[float, Any]:
    """One call with ``time.perf_counter``, the garbage collector off (as timeit does)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        out = fn()
        return time.perf_counter() - start, out
    finally:
        gc.enable()


@dataclass
class Plan:
    contender: Contender
    fn: Callable[[], Any]
    method: str  # "blocked_autorange" | "perf_counter"
    queries: int  # queries actually timed
    repeats: int  # perf_counter repetitions
    pilot_s: float  # seconds per full-size call estimated from the pilot (warm-up) call
    values: dict[str, float] | None  # measure means from a call on the first ``values_queries`` queries
    values_queries: int


def plan_contender(c: Contender, data: Data, timing: dict[str, Any], log: Callable[[str], None]) -> Plan:
    """Warm the contender up with a pilot call and decide how to time it.

    Fast (under ``slow_threshold_s`` a call): ``blocked_autorange``. Slow: ``slow_repeats`` perf_counter calls at
    full size, fewer if they would exceed ``slow_budget_s``; a per-query loop that cannot fit even one full call in
    the budget is timed on the first ``subset_queries`` queries and scaled linearly (flagged in the output).
    """
    q = data.num_queries
    pilot_data = data.head(int(timing["pilot_queries"])) if c.per_query_loop else data
    pilot_s, out = timed_call(c.build(pilot_data))
    scale = q / pilot_data.num_queries
    if pilot_s * scale < timing["slow_threshold_s"] and pilot_data is data:
        pilot_s, out = timed_call(c.build(data))  # a second call: the first may pay one-off costs
    estimate = pilot_s * scale
    values = c.values(out) if c.values else None
    values_queries = pilot_data.num_queries
    if estimate < timing["slow_threshold_s"]:
        fn = c.build(data)
        if pilot_data is not data:
            _, out = timed_call(fn)  # warm-up at full size, and full-size values for the guard
            values, values_queries = (c.values(out) if c.values else None), q
        log(f"  {c.name}: ~{estimate:.3g} s/call -> blocked_autorange")
        return Plan(c, fn, "blocked_autorange", q, 0, estimate, values, values_queries)
    fits = int(timing["slow_budget_s"] // estimate)
    repeats = min(int(timing["slow_repeats"]), fits)
    queries = q
    if repeats < 1:
        if c.per_query_loop and int(timing["subset_queries"]) < q:
            queries, repeats = int(timing["subset_queries"]), int(timing["slow_repeats"])
        else:
            repeats = 1
    fn = c.build(data.head(queries))
    how = f"{repeats} x perf_counter on {queries} queries" + (" (scaled)" if queries < q else "")
    log(f"  {c.name}: ~{estimate:.3g} s/call -> {how}")
    return Plan(c, fn, "perf_counter", queries, repeats, estimate, values, values_queries)


def run_timings(
    plans: list[Plan], timing: dict[str, Any], threads: int, full_queries: int, log: Callable[[str], None]
) -> dict:
    """Interleave the contenders: ``rounds`` rounds of blocked_autorange over the fast ones (the order rotated
    each round), then the perf_counter repetitions of the slow ones, one of each per pass."""
    times: dict[str, list[float]] = {p.contender.name: [] for p in plans}
    last_out: dict[str, Any] = {}
    fast = [p for p in plans if p.method == "blocked_autorange"]
    slow = [p for p in plans if p.method == "perf_counter"]
    rounds = int(timing["rounds"])
    for r in range(rounds):
        order = fast[r % len(fast):] + fast[: r % len(fast)] if fast else []
        for p in order:
            timer = Timer(stmt="fn()", globals={"fn": p.fn}, num_threads=threads, description=p.contender.name)
            measurement = timer.blocked_autorange(min_run_time=float(timing["min_run_time"]))
            times[p.contender.name].extend(measurement.times)
        log(f"  fast round {r + 1}/{rounds} done")
    for r in range(max((p.repeats for p in slow), default=0)):
        order = slow[r % len(slow):] + slow[: r % len(slow)]
        for p in order:
            if r < p.repeats:
                seconds, last_out[p.contender.name] = timed_call(p.fn)
                times[p.contender.name].append(seconds)
                log(f"  {p.contender.name}: {seconds:.3g} s on {p.queries} queries")
    results = {}
    for p in plans:
        c, q = p.contender, p.queries
        scale = full_queries / q  # a per-query loop timed on a subset: scaled linearly to the full query count
        entry: dict[str, Any] = {"library": c.library, "role": c.role, "description": c.description, "method": p.method}
        entry |= summarize(times[c.name], scale)
        entry["measured_queries"] = q
        entry["scaled"] = scale != 1.0
        if scale != 1.0:
            entry["scale_factor"] = scale
            entry["measured_median_s"] = quantile(times[c.name], 0.5)
        entry["pilot_estimate_s"] = p.pilot_s
        results[c.name] = entry
        if c.name in last_out and c.values:
            p.values, p.values_queries = c.values(last_out[c.name]), q  # values of the timed calls themselves
    return results


# ----------------------------------------------------------------------------------------------- guard
def check_agreement(plans: list[Plan], reference: dict[str, torch.Tensor], tolerance: float) -> dict[str, Any]:
    """Every contender's means against torchrank's per-query values (``ties="first"``) on the same queries."""
    report: dict[str, Any] = {}
    failures = []
    for p in plans:
        if not p.values:
            continue
        values, q = p.values, p.values_queries
        rows = []
        for measure, value in values.items():
            ref = float(reference[measure][:q].double().mean())
            diff = abs(value - ref)
            rows.append({"measure": measure, "value": value, "torchrank_first": ref, "abs_diff": diff})
            if not diff <= tolerance:
                failures.append(f"{p.contender.name} {measure}: {value!r} vs torchrank {ref!r} (|diff| {diff:.3g})")
        report[p.contender.name] = {"queries": q, "max_abs_diff": max(r["abs_diff"] for r in rows), "values": rows}
    if failures:
        listing = "\n  ".join(failures)
        raise AssertionError(f"contenders disagree with torchrank beyond tolerance {tolerance}:\n  {listing}")
    return report


def torchrank_reference(data: Data, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    k = int(config["k"])
    per_query = F.evaluate(data.preds, data.target, list(config["measures"]), ties="first", reduction="none")
    per_query[f"ndcg@{k}"] = F.ndcg(data.preds, data.target, k=k, ties="first", reduction="none")
    return per_query


# ----------------------------------------------------------------------------------------------- ratios
def compute_ratios(contenders: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ratios: dict[str, Any] = {}
    for name, num, den in RATIOS:
        a, b = contenders.get(num), contenders.get(den)
        if a is None or b is None:
            missing = num if a is None else den
            ratios[name] = {"ratio": None, "numerator": num, "denominator": den, "note": f"{missing} not run"}
            continue
        entry = {"ratio": a["median_s"] / b["median_s"], "numerator": num, "denominator": den}
        if a["q1_s"] is not None and b["q1_s"] is not None:
            entry["range"] = [a["q1_s"] / b["q3_s"], a["q3_s"] / b["q1_s"]]  # quartile-based spread
        if a.get("scaled") or b.get("scaled"):
            entry["note"] = "numerator timed on a subset of queries and scaled linearly"
        ratios[name] = entry
    return ratios


def check_targets(ratios: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for label, ratio_name, op, bound in TARGETS:
        ratio = ratios[ratio_name]["ratio"]
        holds = None if ratio is None else (ratio >= bound if op == ">=" else ratio <= bound)
        rows.append({"target": label, "ratio": ratio_name, "value": ratio, "bound": f"{op} {bound:g}", "holds": holds})
    return rows


# ----------------------------------------------------------------------------------------------- metadata
def metadata(threads: int, available: dict[str, bool]) -> dict[str, Any]:
    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.rstrip("\n") if done.returncode == 0 else None  # porcelain lines start with a space

    status = git("status", "--porcelain", "--", "torchrank")
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {
        "git_commit": git("rev-parse", "HEAD"),
        "torchrank_dirty": None if status is None else bool(status),
        "torchrank_modified_files": None if not status else [line[3:] for line in status.splitlines()],
        "torchrank_source_sha256": _source_digest(),
        "torchrank": torchrank.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchmetrics": version("torchmetrics"),
        "pytrec_eval": version("pytrec-eval-terrier") or version("pytrec_eval"),
        "ranx": version("ranx"),
        "numba": version("numba"),
        "platform": platform.platform(),
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "torch_num_threads": torch.get_num_threads(),
        "device": "cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "available": available,
    }


def _source_digest() -> str:
    """SHA-256 over torchrank's ``*.py`` files (path and content): ties the figures to the exact code measured,
    uncommitted changes included."""
    digest = hashlib.sha256()
    package = Path(torchrank.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_availability(without: list[str]) -> tuple[dict[str, bool], dict[str, str]]:
    available, skipped = {}, {}
    for lib in ("torchmetrics", "pytrec_eval", "ranx"):
        if lib in without:
            available[lib], skipped[lib] = False, "excluded with --without"
        elif importlib.util.find_spec(lib) is None:
            available[lib], skipped[lib] = False, "package not installed: its contenders skipped"
        else:
            try:
                importlib.import_module(lib)
                available[lib] = True
            except Exception as e:  # a broken install is skipped like a missing one, with the reason
                available[lib], skipped[lib] = False, f"import failed: {type(e).__name__}: {e}"
    return available, skipped


# ----------------------------------------------------------------------------------------------- markdown
def _fmt_s(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.3g} s"


def _fmt_ratio(r: dict[str, Any]) -> str:
    if r["ratio"] is None:
        return "n/a"
    text = f"{r['ratio']:.3g}x"
    if "range" in r:
        text += f" ({r['range'][0]:.3g}-{r['range'][1]:.3g})"
    return text


def markdown(result: dict[str, Any]) -> str:
    meta = result["metadata"]
    dirty = ""
    if meta["torchrank_dirty"]:
        dirty = f" with uncommitted changes in {', '.join(meta['torchrank_modified_files'])}"
    lines = [
        "# torchrank.functional CPU benchmark",
        "",
        f"Generated by `python -m benchmarks.bench_functional` on {meta['date']}"
        + (" (**smoke run: tiny sizes, not meaningful figures**)" if result["smoke"] else "") + ".",
        "",
        f"- commit `{meta['git_commit']}`" + dirty,
        f"- CPU: {meta['cpu_model']} ({meta['cpu_count']} logical cores), threads = {meta['threads']}; "
        f"{meta['platform']}",
        f"- python {meta['python']}, torch {meta['torch']}, torchmetrics {meta['torchmetrics']}, "
        f"pytrec_eval {meta['pytrec_eval']}, ranx {meta['ranx']} (numba {meta['numba']})",
        f"- load average at start / end: {result['load_average']['start']} / {result['load_average']['end']}",
        "",
        "Times: median and IQR over the interleaved repeats (`repeats` samples). Ratios: median / median, with the "
        "quartile spread (q1/q3 .. q3/q1) in parentheses; > 1 means the denominator (torchrank) is faster.",
        "",
    ]
    for note in result["notes"]:
        lines.append(f"> {note}")
    if result["notes"]:
        lines.append("")
    for wname, w in result["workloads"].items():
        lines += [f"## {wname}: {w['queries']} queries x {w['items']} items", ""]
        lines += ["| contender | median | IQR | repeats | method | notes |", "|---|---|---|---|---|---|"]
        for cname, c in w["contenders"].items():
            notes = []
            if c["role"] == "conversion":
                notes.append("conversion")
            if c["scaled"]:
                notes.append(f"timed on {c['measured_queries']} queries, scaled x{c['scale_factor']:.3g}")
            lines.append(
                f"| {cname} | {_fmt_s(c['median_s'])} | {_fmt_s(c['iqr_s'])} | {c['repeats']} | {c['method']} | "
                f"{'; '.join(notes)} |"
            )
        lines += ["", "| ratio | value |", "|---|---|"]
        for r in w["ratios"].values():
            lines.append(f"| {r['numerator']} / {r['denominator']} | {_fmt_ratio(r)} |")
        lines += ["", "| target (reported, not asserted) | measured | holds |", "|---|---|---|"]
        for t in w["targets"]:
            value = "n/a" if t["value"] is None else f"{t['value']:.3g}x"
            holds = {True: "yes", False: "**no**", None: "n/a"}[t["holds"]]
            lines.append(f"| {t['target']} | {value} | {holds} |")
        worst = max((a["max_abs_diff"] for a in w["agreement"].values()), default=0.0)
        lines += ["", f"Correctness guard: every contender's means agree with torchrank's within {worst:.2g} "
                  f"(tolerance {result['config']['tolerance']:g}).", ""]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat (configs/bench/smoke.yaml)")
    parser.add_argument("--config", type=Path, help="YAML config (default: configs/bench/functional.yaml)")
    parser.add_argument("--out", type=Path, help="JSON output; the markdown goes next to it (.md)")
    parser.add_argument("--without", action="append", default=[], choices=["torchmetrics", "pytrec_eval", "ranx"],
                        help="treat a comparison library as missing (repeatable)")
    parser.add_argument("--threads", type=int, help="override the config's threads")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    config, notes = load_config(args.config, args.smoke)
    out_path = args.out or (SMOKE_OUT if args.smoke else DEFAULT_OUT)
    if args.threads is not None:
        config["threads"] = args.threads
    threads = int(config["threads"] or os.cpu_count() or 1)
    torch.set_num_threads(threads)
    available, skipped = library_availability(args.without)
    timing = config["timing"]
    start_load = _load_average()
    started = time.perf_counter()

    contenders = make_contenders(config, available, threads)
    if available["ranx"]:
        notes.append(
            "ranx: numba kernels warmed up (compiled or loaded from cache) before any timing, on the first 12 "
            "queries of each workload (its numba types depend on the doc-id length); see ranx_warm_up_s."
        )
    notes.append(
        "torchmetrics' MAP/MRR/P/recall get `target > 0` (they refuse graded labels), its NDCGs the graded labels. "
        "torchmetrics (1.9) also counts an item as retrieved by those four only if its score is > 0 "
        "(`torch.where(preds > 0, target, 0)`), which changes the measure for randn scores; so they get the scores "
        "shifted to be positive in float64 (exact, same order, same ranking). Both inputs are prepared untimed."
    )
    notes.append(
        "pytrec_eval/ranx eval-only times exclude building qrels/run (timed separately as 'conversion'); "
        "query/doc id strings are precomputed for both."
    )

    workloads = {}
    for wl in config["workloads"]:
        q, n = int(wl["queries"]), int(wl["items"])
        wname = wl.get("name") or f"Q{q}xN{n}"
        log(f"workload {wname}")
        data = Data.generate(q, n, int(config["num_labels"]), int(config["seed"]))
        reference = torchrank_reference(data, config)
        plans = [plan_contender(c, data, timing, log) for c in contenders]
        agreement = check_agreement(plans, reference, float(config["tolerance"]))  # before timing: fail fast
        timed = run_timings(plans, timing, threads, q, log)
        agreement = check_agreement(plans, reference, float(config["tolerance"]))  # and the timed calls' values
        ratios = compute_ratios(timed)
        workloads[wname] = {
            "queries": q,
            "items": n,
            "contenders": timed,
            "ratios": ratios,
            "targets": check_targets(ratios),
            "agreement": agreement,
            "ranx_warm_up_s": {f"{'+'.join(m)} (doc-id length {n})": t for (m, n), t in RANX_WARM_UP_S.items()},
        }
        RANX_WARM_UP_S.clear()
        del data, reference, plans
        gc.collect()

    result = {
        "metadata": metadata(threads, available),
        "smoke": args.smoke,
        "config": config,
        "notes": notes,
        "skipped": skipped,
        "load_average": {"start": start_load, "end": _load_average()},
        "total_wall_s": time.perf_counter() - started,
        "workloads": workloads,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    md_path = out_path.with_suffix(".md")
    md_path.write_text(markdown(result))
    log(f"wrote {_display_path(out_path)} and {_display_path(md_path)} ({result['total_wall_s']:.0f} s)")
    return 0


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
