"""Workload ``kernels``: ``torchrank.functional`` against torchmetrics, torcheval, pytrec_eval and ranx.

Run through the harness (``python -m benchmarks.run --config configs/bench/kernels.yaml``); this module's
:func:`measure` takes one ``kind: kernels`` section of a config and returns records (``benchmarks/_records.py``).

The grid: every (queries x items) shape x score dtype (float32, bfloat16) x labels (binary 0/1, graded 0-4)
is a *cell*: one tensor pair, generated with a fixed seed. In each cell, each measure family is a *workload*:
``ndcg@k``, ``map@k``, ``P@k`` for every k, and ``set`` (8 measures evaluated together). A workload times
torchrank's call (``role: primary``; other torchrank calls are ``variant``) against every incumbent's call of the
same measure (``incumbent``), each through its public API, at its best:

- torchmetrics: the per-query functional in a loop, and the class (fresh, ``update`` + ``compute``) on the flat
  layout it takes (``indexes``); for ``set`` a ``MetricCollection`` of the 8 classes;
- torcheval: ``retrieval_precision`` on the dense ``[Q, N]`` batch (it has no NDCG or AP);
- pytrec_eval and ranx: evaluation of prebuilt dicts / ``Qrels`` + ``Run`` (their construction from tensors is
  timed separately, as workload ``conversion QxN``).

Correctness guard: before timing (on the warm-up call) and after (on the last timed call), every contender's
mean of each measure must lie within torchrank's tie bounds on the same queries:
``mean(ties="pessimistic") - tol <= value <= mean(ties="optimistic") + tol``. Without tied scores the bounds
coincide and this is equality within ``tol``; with ties (bfloat16 scores) each library may order tied items its
own way, and any order gives a value between those bounds. A value outside aborts the run.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

import torchrank.functional as F
from benchmarks._records import record
from benchmarks._timing import Contender, TimingConfig, measure_contenders

KIND = "kernels"
SET8 = ["ndcg@5", "ndcg@10", "ndcg@20", "map", "mrr", "P@10", "recall@100", "success@10"]
INCUMBENTS = ("torchmetrics", "torcheval", "pytrec_eval", "ranx")
FAMILIES = ("ndcg", "map", "precision", "set")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
LABEL_LEVELS = {"binary": 2, "graded": 5}  # labels: torch.randint(0, levels)

DEFAULTS: dict[str, Any] = {
    "shapes": [[10_000, 100], [1_000, 1_000]],
    "k": [10],
    "dtypes": ["float32"],
    "labels": ["graded"],
    "measures": list(FAMILIES),
    "set": SET8,
    "incumbents": list(INCUMBENTS),
    "torch_incumbent_devices": None,  # torchmetrics/torcheval devices; None: the run's device
    "conversions": True,
    "variants_up_to": None,  # time torchrank's variants only on cells of at most this many items (Q x N); None: all
    # call torchrank.allocator.warm_cpu_allocator() first (CPU runs): the documented opt-in for programs
    # that evaluate large CPU batches in a loop; it sets glibc's thresholds for the whole process, incumbents included
    "warm_cpu_allocator": False,
    "tolerance": 1e-4,
    "seed": 0,
    "threads": 1,
    "device": "cpu",
    "timing": {},
}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- measure names
@dataclass(frozen=True)
class Spec:
    """One torchrank measure name in each incumbent's spelling."""

    name: str
    family: str  # torchrank's: ndcg | map | precision | recall | mrr | success
    k: int | None

    @staticmethod
    def parse(name: str) -> Spec:
        parsed = F.parse_measure(name)
        if parsed.family not in ("ndcg", "map", "precision", "recall", "mrr", "success") or parsed.params:
            raise ValueError(f"kernels: measure {name!r} has no incumbent spelling here")
        return Spec(name, parsed.family, parsed.k)

    @property
    def binary(self) -> bool:
        """torchmetrics' binary classes refuse graded labels (its NDCG takes them)."""
        return self.family != "ndcg"

    @property
    def trec_measure(self) -> tuple[str, str]:
        """pytrec_eval's (measure to request, key in its output), e.g. ``("ndcg_cut.10", "ndcg_cut_10")``."""
        base = {"ndcg": "ndcg_cut", "map": "map_cut" if self.k else "map", "precision": "P", "recall": "recall",
                "mrr": "recip_rank", "success": "success"}[self.family]
        return (base, base) if self.k is None else (f"{base}.{self.k}", f"{base}_{self.k}")

    @property
    def ranx_name(self) -> str:
        base = {"precision": "precision", "success": "hit_rate"}.get(self.family, self.family)
        return base if self.k is None else f"{base}@{self.k}"

    def torchmetrics_class(self) -> Any:
        from torchmetrics import retrieval as tr

        cls = {"ndcg": tr.RetrievalNormalizedDCG, "map": tr.RetrievalMAP, "precision": tr.RetrievalPrecision,
               "recall": tr.RetrievalRecall, "mrr": tr.RetrievalMRR, "success": tr.RetrievalHitRate}[self.family]
        return cls() if self.k is None else cls(top_k=self.k)

    def torchmetrics_function(self) -> Callable[..., torch.Tensor]:
        from torchmetrics.functional import retrieval as fr

        return {"ndcg": fr.retrieval_normalized_dcg, "map": fr.retrieval_average_precision,
                "precision": fr.retrieval_precision, "recall": fr.retrieval_recall,
                "mrr": fr.retrieval_reciprocal_rank, "success": fr.retrieval_hit_rate}[self.family]


def pytrec_measure_set(specs: list[Spec]) -> set[str]:
    """pytrec_eval's measure set, cut-offs merged per measure: ``{"ndcg_cut.5,10,20", "map", "P.10"}``."""
    cuts: dict[str, list[int]] = {}
    plain = set()
    for s in specs:
        request = s.trec_measure[0]
        if s.k is None:
            plain.add(request)
        else:
            cuts.setdefault(request.split(".")[0], []).append(s.k)
    return plain | {f"{base}.{','.join(map(str, sorted(ks)))}" for base, ks in cuts.items()}


# ----------------------------------------------------------------------------------------------- data
class Cell:
    """One grid cell: scores ``[Q, N]`` in ``dtype`` on ``device`` and labels ``[Q, N]``, and the layouts the
    incumbents take, built lazily (untimed) for the first ``q`` queries."""

    def __init__(self, queries: int, items: int, dtype: str, labels: str, seed: int, device: torch.device) -> None:
        g = torch.Generator().manual_seed(seed)
        scores = torch.randn(queries, items, generator=g)  # float32 first: the bfloat16 cell is its rounding
        target = torch.randint(0, LABEL_LEVELS[labels], (queries, items), generator=g)
        self.queries, self.items, self.dtype, self.labels = queries, items, dtype, labels
        self.device = device
        self.preds = scores.to(DTYPES[dtype]).to(device)
        self.target = target.to(device)
        self.qids = [f"q{i}" for i in range(queries)]  # ids exist before evaluation: never timed
        self.docids = [f"d{j}" for j in range(items)]
        self._layouts: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
        self._dicts: dict[int, tuple[dict, dict]] = {}
        self._ranx: dict[int, tuple[Any, Any]] = {}

    @property
    def name(self) -> str:
        return f"{self.queries}x{self.items} {self.dtype} {self.labels}"

    def layouts(self, device: str, q: int) -> dict[str, torch.Tensor]:
        """The first ``q`` queries for torchmetrics/torcheval on ``device``: scores in float32 (the same values;
        neither library is faster in bfloat16), flat views with ``indexes``, ``target > 0`` for binary measures,
        and scores shifted to be positive for torchmetrics' binary measures (see :func:`_torchmetrics_positive`)."""
        key = (device, q)
        if key not in self._layouts:
            preds = self.preds[:q].float().to(device)
            target = self.target[:q].to(device)
            flat = preds.reshape(-1)
            self._layouts[key] = {
                "preds": preds, "target": target, "binary": target > 0,
                "preds_flat": flat, "target_flat": target.reshape(-1), "binary_flat": (target > 0).reshape(-1),
                "positive_flat": _torchmetrics_positive(flat),
                "positive": _torchmetrics_positive(flat).reshape(preds.shape),
                "indexes": torch.arange(q, device=device).repeat_interleave(self.items),
            }
        return self._layouts[key]

    def trec_dicts(self, q: int) -> tuple[dict, dict]:
        """qrels ``{qid: {docid: int}}`` and run ``{qid: {docid: float}}`` of the first ``q`` queries."""
        preds, target = self.preds[:q].float().tolist(), self.target[:q].tolist()
        docids = self.docids
        qrels = {qid: dict(zip(docids, row, strict=True)) for qid, row in zip(self.qids, target, strict=False)}
        run = {qid: dict(zip(docids, row, strict=True)) for qid, row in zip(self.qids, preds, strict=False)}
        return qrels, run

    def cached_trec_dicts(self, q: int) -> tuple[dict, dict]:
        if q not in self._dicts:
            self._dicts[q] = self.trec_dicts(q)
        return self._dicts[q]

    def ranx_objects(self, q: int) -> tuple[Any, Any]:
        from ranx import Qrels, Run

        if q not in self._ranx:
            qrels, run = self.cached_trec_dicts(q)
            self._ranx[q] = Qrels(qrels), Run(run)
        return self._ranx[q]


def _torchmetrics_positive(flat: torch.Tensor) -> torch.Tensor:
    """The same ranking with every score > 0, in float64.

    torchmetrics (1.9) counts an item as retrieved by MAP, MRR, precision, recall and hit rate only if its score is
    > 0 (``torch.where(preds > 0, target, 0)``), which changes the measure for ``randn`` scores. Shifting float32
    values in float64 is exact: same order, same ties, the measure everyone else computes.
    """
    return flat.double() - flat.min().double() + 1.0


class References:
    """torchrank's per-query values of every measure of a cell under the pessimistic, optimistic and average tie
    rules: the guard's bounds."""

    def __init__(self, cell: Cell, names: list[str]) -> None:
        self.cell, self.names = cell, names
        self._per_query: dict[str, dict[str, torch.Tensor]] = {}

    def per_query(self, ties: str) -> dict[str, torch.Tensor]:
        """Per-query values (float64, CPU) of every measure under ``ties``, computed on first use."""
        if ties not in self._per_query:
            values = F.evaluate(self.cell.preds, self.cell.target, self.names, ties=ties, reduction="none")
            self._per_query[ties] = {m: v.double().cpu() for m, v in values.items()}
        return self._per_query[ties]

    def bounds(self, measure: str, q: int) -> tuple[float, float]:
        lo, hi = (float(self.per_query(t)[measure][:q].mean()) for t in ("pessimistic", "optimistic"))
        return lo, hi

    def tie_free(self, measures: list[str], q: int) -> bool:
        """No tie changes any of ``measures`` on any of the first ``q`` queries."""
        lo, hi = self.per_query("pessimistic"), self.per_query("optimistic")
        return all(torch.equal(lo[m][:q], hi[m][:q]) for m in measures)


def guard(refs: References, values: Callable[[Any], dict[str, float]], tolerance: float) -> Callable[[Any, int], dict]:
    """A check for :class:`benchmarks._timing.Contender`: every measure's value within torchrank's tie bounds."""

    def check(output: Any, q: int) -> dict[str, Any]:
        report, worst, failures = {}, 0.0, []
        for measure, value in values(output).items():
            lo, hi = refs.bounds(measure, q)
            outside = max(lo - value, value - hi, 0.0)
            worst = max(worst, outside)
            report[measure] = {"value": value, "pessimistic": lo, "optimistic": hi}
            if not outside <= tolerance:
                failures.append(f"{measure}: {value!r} outside torchrank's tie bounds [{lo!r}, {hi!r}]")
        if failures:
            raise AssertionError("correctness guard: " + "; ".join(failures) + f" (first {q} queries)")
        return {"reference": "torchrank tie bounds", "queries": q, "tolerance": tolerance,
                "max_outside": worst, "measures": report}

    return check


def derived_map_guard(refs: References, measure: str, k: int, tolerance: float) -> Callable[[Any, int], dict]:
    """torchmetrics' AP@k divides by the relevant items found in the top k, trec_eval's (torchrank's) by all R
    relevant items: its value per query is torchrank's AP@k / R@k (0 where R@k = 0). Only used tie-free, where
    that identity is exact for one order."""

    def check(output: Any, q: int) -> dict[str, Any]:
        ap = refs.per_query("first")[measure][:q]
        rec = refs.per_query("first")[f"recall@{k}"][:q]
        expected = float(torch.where(rec > 0, ap / rec.clamp_min(1e-300), torch.zeros_like(ap)).mean())
        value = _float(output)
        diff = abs(value - expected)
        if not diff <= tolerance:
            raise AssertionError(f"correctness guard: torchmetrics AP@{k} {value!r} vs torchrank AP@k/R@k {expected!r}")
        return {"reference": "torchrank AP@k / R@k per query (torchmetrics' definition)", "queries": q,
                "tolerance": tolerance, "max_outside": diff, "measures": {measure: {"value": value,
                                                                                     "expected": expected}}}

    return check


def _float(x: Any) -> float:
    return float(x.item() if isinstance(x, torch.Tensor) else x)


# ----------------------------------------------------------------------------------------------- contenders
@dataclass
class Workload:
    """One measure family in one cell: its name, torchrank measure names, and the contenders' context."""

    cell: Cell
    family: str
    k: int | None
    names: list[str]
    refs: References
    config: dict[str, Any]

    @property
    def title(self) -> str:
        return f"{self.label} {self.cell.name}"

    @property
    def label(self) -> str:
        return "set of 8" if self.family == "set" else self.names[0]

    @property
    def group(self) -> str:
        """Row of the summary plot: the variants of k, dtype and labels of one family and shape share it."""
        base = "set of 8" if self.family == "set" else {"ndcg": "ndcg@k", "map": "map@k", "precision": "P@k"}[
            self.family]
        return f"{base} {self.cell.queries}x{self.cell.items}"

    @cached_property
    def specs(self) -> list[Spec]:
        return [Spec.parse(n) for n in self.names]

    def check(self, values: Callable[[Any], dict[str, float]]) -> Callable[[Any, int], dict]:
        return guard(self.refs, values, float(self.config["tolerance"]))


def torchrank_contenders(w: Workload) -> list[Contender]:
    """torchrank's primary call, and its variants unless the cell is above ``variants_up_to`` items."""
    limit = w.config.get("variants_up_to")
    variants = limit is None or w.cell.queries * w.cell.items <= int(limit)
    contenders = _torchrank_set(w) if w.family == "set" else _torchrank_single(w)
    return contenders if variants else [c for c in contenders if c.role == "primary"]


def _torchrank_single(w: Workload) -> list[Contender]:
    cell, names = w.cell, w.names
    name, k = names[0], w.k
    fn = {"ndcg": F.ndcg, "map": F.average_precision, "precision": F.precision}[w.family]
    label = {"ndcg": "F.ndcg", "map": "F.average_precision", "precision": "F.precision"}[w.family]
    one = w.check(lambda o: {name: _float(o)})
    out = [Contender(f"{label}(k={k})", "torchrank", "primary",
                     f"{label}(preds, target, k={k}) on dense [Q, N] {cell.dtype} scores (default ties='average')",
                     lambda q: lambda p=cell.preds[:q], t=cell.target[:q]: fn(p, t, k=k), one)]
    if w.family == "ndcg":
        flat = {}

        def build_flat(q: int) -> Callable[[], Any]:
            flat["p"], flat["t"] = cell.preds[:q].reshape(-1), cell.target[:q].reshape(-1)
            flat["i"] = torch.arange(q, device=cell.device).repeat_interleave(cell.items)
            return lambda: F.ndcg(flat["p"], flat["t"], indexes=flat["i"], k=k)

        ragged = {}

        def build_ragged(q: int) -> Callable[[], Any]:
            # every third query gets a tenth more items, scored below all of its own and labelled 0: the same NDCG@k
            # (k <= N), from queries of unequal lengths, which torchrank pads
            preds, target = cell.preds[:q], cell.target[:q]
            extra = max(1, cell.items // 10)
            below = (preds.float().amin(1, keepdim=True) - 1).to(preds.dtype).expand(q, extra)
            keep = torch.ones(q, cell.items + extra, dtype=torch.bool, device=cell.device)
            keep[torch.arange(q, device=cell.device) % 3 != 0, cell.items:] = False
            ragged["p"] = torch.cat([preds, below], 1)[keep]
            ragged["t"] = torch.cat([target, target.new_zeros(q, extra)], 1)[keep]
            ragged["i"] = torch.arange(q, device=cell.device).unsqueeze(1).expand_as(keep)[keep]
            return lambda: F.ndcg(ragged["p"], ragged["t"], indexes=ragged["i"], k=k)

        out += [
            Contender(f"F.ndcg(k={k}, ties='first')", "torchrank", "variant",
                      "input order breaks ties (no tie-group work)",
                      lambda q: lambda p=cell.preds[:q], t=cell.target[:q]: F.ndcg(p, t, k=k, ties="first"), one),
            Contender(f"F.ndcg(k={k}) flat indexes", "torchrank", "variant",
                      "flat preds/target with indexes: torchmetrics' layout, grouped by torchrank", build_flat, one),
            Contender(f"F.ndcg(k={k}) flat ragged indexes", "torchrank", "variant",
                      "flat input of unequal queries (every third a tenth longer, its extra items last, "
                      "labelled 0): padded rows", build_ragged, one),
        ]
    return out


def _torchrank_set(w: Workload) -> list[Contender]:
    from torchrank.metrics import RankingMetrics

    cell, names = w.cell, w.names
    many = w.check(lambda o: {m: _float(v) for m, v in o.items()})

    def metric_call(q: int) -> Callable[[], Any]:
        preds, target = cell.preds[:q], cell.target[:q]

        def call() -> dict[str, torch.Tensor]:
            metric = RankingMetrics(names).to(cell.device)
            metric.update(preds, target)
            return metric.compute()

        return call

    return [
        Contender("F.evaluate(8 measures)", "torchrank", "primary",
                  f"F.evaluate(preds, target, {names}): one sort for all",
                  lambda q: lambda p=cell.preds[:q], t=cell.target[:q]: F.evaluate(p, t, names), many),
        Contender("RankingMetrics(8 measures)", "torchrank", "variant",
                  "fresh torchrank.metrics.RankingMetrics: update(preds, target) + compute()", metric_call, many),
    ]


def torchmetrics_contenders(w: Workload, device: str) -> tuple[list[Contender], list[dict[str, Any]]]:
    """The per-query functional loop and the class (or a MetricCollection for the set), on ``device``."""
    cell, tol = w.cell, float(w.config["tolerance"])
    suffix = "" if device == cell.device.type else f" ({device})"
    skipped: list[dict[str, Any]] = []
    if w.family == "set":
        return [_torchmetrics_collection(w, device, suffix)], skipped
    spec = w.specs[0]
    check = w.check(lambda o: {spec.name: _float(o)})
    if spec.family == "map" and spec.k is not None and spec.k < cell.items:
        # a different measure (see derived_map_guard): compared only where no tie can change it
        if not w.refs.tie_free([spec.name, f"recall@{spec.k}"], cell.queries):
            reason = (f"torchmetrics' AP@{spec.k} divides by the relevant items in the top k (not by R): checked via "
                      "torchrank's AP@k / R@k, which is exact only without tied scores, and this cell has ties")
            return [], [{"name": f"RetrievalMAP(top_k={spec.k}){suffix}", "library": "torchmetrics", "skipped": reason}]
        check = derived_map_guard(w.refs, spec.name, spec.k, tol)
    function = spec.torchmetrics_function()
    keyword = {"top_k": spec.k} if spec.k is not None else {}
    dense, flat = ("preds", "target") if not spec.binary else ("positive", "binary")
    flat_preds, flat_target = ("preds_flat", "target_flat") if not spec.binary else ("positive_flat", "binary_flat")

    def loop(q: int) -> Callable[[], Any]:
        data = cell.layouts(device, q)
        preds, target = data[dense], data[flat]
        return lambda: torch.stack([function(preds[i], target[i], **keyword) for i in range(q)]).mean()

    def cls(q: int) -> Callable[[], Any]:
        data = cell.layouts(device, q)

        def call() -> torch.Tensor:
            metric = spec.torchmetrics_class().to(device)
            metric.update(data[flat_preds], data[flat_target], indexes=data["indexes"])
            return metric.compute()

        return call

    name = function.__name__
    cls_name = type(spec.torchmetrics_class()).__name__
    inputs = "graded labels" if not spec.binary else "target > 0 and positive-shifted scores (see notes)"
    return [
        Contender(f"{name} loop{suffix}", "torchmetrics", "incumbent",
                  f"torch.stack([{name}(preds[i], target[i], {keyword}) for i in range(Q)]).mean(); {inputs}",
                  loop, check, scalable=True),
        Contender(f"{cls_name}{suffix}", "torchmetrics", "incumbent",
                  f"fresh {cls_name}({keyword}): update(preds_flat, target_flat, indexes) + compute(); {inputs}",
                  cls, check, scalable=True),
    ], skipped


def _torchmetrics_collection(w: Workload, device: str, suffix: str) -> Contender:
    from torchmetrics import MetricCollection

    cell, specs = w.cell, w.specs
    graded = [s for s in specs if not s.binary]
    binary = [s for s in specs if s.binary]

    def build(q: int) -> Callable[[], Any]:
        data = cell.layouts(device, q)
        groups = [(graded, data["preds_flat"], data["target_flat"]), (binary, data["positive_flat"],
                                                                       data["binary_flat"])]

        def call() -> dict[str, Any]:
            result = {}
            for group, preds, target in groups:
                if group:
                    collection = MetricCollection({f"m{i}": s.torchmetrics_class() for i, s in enumerate(group)})
                    collection.to(device).update(preds, target, indexes=data["indexes"])
                    values = collection.compute()
                    result.update({s.name: values[f"m{i}"] for i, s in enumerate(group)})
            return result

        return call

    return Contender(f"MetricCollection(8){suffix}", "torchmetrics", "incumbent",
                     "fresh MetricCollections (graded labels for the NDCGs; target > 0 and positive-shifted scores "
                     "for the binary measures): update + compute", build,
                     w.check(lambda o: {m: _float(v) for m, v in o.items()}), scalable=True)


def torcheval_contenders(w: Workload, device: str) -> list[Contender]:
    """torcheval has ``retrieval_precision`` on a dense ``[Q, N]`` batch (no NDCG, no AP): P@k only."""
    if w.family != "precision":
        return []
    from torcheval.metrics.functional import retrieval_precision

    cell, spec = w.cell, w.specs[0]
    suffix = "" if device == cell.device.type else f" ({device})"

    def build(q: int) -> Callable[[], Any]:
        data = cell.layouts(device, q)
        preds, binary = data["preds"], data["binary"]
        return lambda: retrieval_precision(preds, binary, k=spec.k, num_tasks=q).mean()

    return [Contender(f"retrieval_precision{suffix}", "torcheval", "incumbent",
                      f"retrieval_precision(preds, target > 0, k={spec.k}, num_tasks=Q).mean() on dense [Q, N] "
                      "float32", build, w.check(lambda o: {spec.name: _float(o)}))]


def pytrec_contenders(w: Workload) -> list[Contender]:
    import pytrec_eval

    cell, specs = w.cell, w.specs
    measures = pytrec_measure_set(specs)

    def build(q: int) -> Callable[[], Any]:
        qrels, run = cell.cached_trec_dicts(q)
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
        return lambda: evaluator.evaluate(run)

    def values(result: dict[str, dict[str, float]]) -> dict[str, float]:
        rows = list(result.values())
        return {s.name: sum(r[s.trec_measure[1]] for r in rows) / len(rows) for s in specs}

    label = f"{len(specs)} measures" if len(specs) > 1 else specs[0].trec_measure[0]
    return [Contender(f"RelevanceEvaluator({label})", "pytrec_eval", "incumbent",
                      f"RelevanceEvaluator(qrels, {sorted(measures)}).evaluate(run); dicts and evaluator built untimed",
                      build, w.check(values), scalable=True)]


RANX_WARM_UP_S: dict[str, float] = {}


def ranx_contenders(w: Workload, threads: int) -> list[Contender]:
    from ranx import evaluate

    cell, specs = w.cell, w.specs
    metrics = [s.ranx_name for s in specs]

    def build(q: int) -> Callable[[], Any]:
        _ranx_warm_up(cell, metrics, threads)
        qrels, run = cell.ranx_objects(q)
        return lambda: evaluate(qrels, run, metrics, threads=threads, save_results_in_run=False)

    def values(result: Any) -> dict[str, float]:
        if len(specs) == 1:
            return {specs[0].name: _float(result)}
        return {s.name: _float(result[s.ranx_name]) for s in specs}

    label = f"{len(specs)} measures" if len(specs) > 1 else metrics[0]
    return [Contender(f"evaluate({label})", "ranx", "incumbent",
                      f"evaluate(qrels, run, {metrics}, threads={threads}, save_results_in_run=False) on prebuilt "
                      "Qrels/Run; numba compiled (or loaded from its cache) before timing", build, w.check(values),
                      scalable=True)]


def _ranx_warm_up(cell: Cell, metrics: list[str], threads: int) -> None:
    """Compile (or load from numba's cache) ranx's kernels untimed, on the first 12 queries of the cell.

    ranx's numba dict types embed the doc-id string length, so a warm-up on other ids would leave a compilation
    inside the first timed call: warm up on the cell's own ids.
    """
    from ranx import Qrels, Run, evaluate

    key = f"{'+'.join(metrics)} (doc-id length {max(len(d) for d in cell.docids)})"
    if key in RANX_WARM_UP_S:
        return
    start = time.perf_counter()
    qrels, run = cell.trec_dicts(12)
    evaluate(Qrels(qrels), Run(run), metrics, threads=threads, save_results_in_run=False)
    RANX_WARM_UP_S[key] = time.perf_counter() - start


def conversion_contenders(cell: Cell, available: dict[str, bool]) -> list[Contender]:
    """Tensors -> what pytrec_eval / ranx evaluate (``.tolist()``, dicts, their objects): part of any real use from
    tensors, timed apart from evaluation. Id strings are precomputed (they exist before evaluation)."""
    out = []
    if available.get("pytrec_eval"):
        import pytrec_eval

        def pytrec(q: int) -> Callable[[], Any]:
            def call() -> Any:
                qrels, run = cell.trec_dicts(q)
                return pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}), run

            return call

        out.append(Contender("conversion", "pytrec_eval", "conversion",
                             "tensors -> qrels/run dicts (.tolist() + dict building) + RelevanceEvaluator(qrels, ...)",
                             pytrec, scalable=True))
    if available.get("ranx"):
        from ranx import Qrels, Run

        def ranx(q: int) -> Callable[[], Any]:
            def call() -> Any:
                qrels, run = cell.trec_dicts(q)
                return Qrels(qrels), Run(run)

            return call

        out.append(Contender("conversion", "ranx", "conversion",
                             "tensors -> dicts (as for pytrec_eval) + Qrels(qrels) + Run(run)", ranx, scalable=True))
    return out


# ----------------------------------------------------------------------------------------------- the grid
def library_availability(wanted: list[str]) -> tuple[dict[str, bool], dict[str, str]]:
    """Which incumbents can run; a missing or broken one is skipped with the reason, never a failure."""
    available, skipped = {}, {}
    for lib in wanted:
        if lib not in INCUMBENTS:
            raise ValueError(f"kernels: unknown incumbent {lib!r}; expected some of {INCUMBENTS}")
        if importlib.util.find_spec(lib) is None:
            available[lib], skipped[lib] = False, "not installed"
            continue
        try:
            importlib.import_module(lib)
            available[lib] = True
        except Exception as e:  # a broken install is skipped like a missing one, with the reason
            available[lib], skipped[lib] = False, f"import failed: {type(e).__name__}: {e}"
    return available, skipped


def cells(config: dict[str, Any], device: torch.device) -> Iterator[Cell]:
    """Cells in grid order; each is freed before the next is generated (the largest is 10M items)."""
    for queries, items in config["shapes"]:
        for dtype in config["dtypes"]:
            for labels in config["labels"]:
                if dtype not in DTYPES or labels not in LABEL_LEVELS:
                    raise ValueError(f"kernels: dtype {dtype!r} / labels {labels!r} unknown")
                yield Cell(int(queries), int(items), dtype, labels, int(config["seed"]), device)


def workloads(cell: Cell, config: dict[str, Any]) -> list[Workload]:
    names: dict[tuple[str, int | None], list[str]] = {}
    for family in config["measures"]:
        if family not in FAMILIES:
            raise ValueError(f"kernels: measure family {family!r} unknown; expected some of {FAMILIES}")
        if family == "set":
            names[(family, None)] = list(config["set"])
            continue
        for k in config["k"]:
            names[(family, int(k))] = [{"ndcg": "ndcg@{}", "map": "map@{}", "precision": "P@{}"}[family].format(k)]
    every = sorted({n for ns in names.values() for n in ns} | {f"recall@{k}" for k in config["k"]})
    refs = References(cell, every)
    return [Workload(cell, family, k, ns, refs, config) for (family, k), ns in names.items()]


def measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the grid of one ``kind: kernels`` config section; records for :mod:`benchmarks.run`."""
    config = {**DEFAULTS, **config}
    device = torch.device(config["device"])
    threads = int(config["threads"])
    timing = TimingConfig.from_dict(config["timing"])
    available, unavailable = library_availability(list(config["incumbents"]))
    torch_devices = list(config["torch_incumbent_devices"] or [device.type])
    records: list[dict[str, Any]] = [
        {"workload": "(all)", "library": lib, "name": lib, "kind": KIND, "skipped": reason}
        for lib, reason in unavailable.items()
    ]
    if config["warm_cpu_allocator"] and device.type == "cpu":
        from torchrank.allocator import warm_cpu_allocator

        warm_cpu_allocator()
    converted: set[tuple[int, int]] = set()
    for cell in cells(config, device):
        _log(f"  cell {cell.name}")
        for w in workloads(cell, config):
            _log(f"   workload {w.title}")
            records += _measure_workload(w, available, torch_devices, timing, threads)
        if config["conversions"] and (cell.queries, cell.items) not in converted:
            converted.add((cell.queries, cell.items))  # the same cost for every dtype and label kind
            contenders = conversion_contenders(cell, available)
            if contenders:
                _log(f"   conversions {cell.queries}x{cell.items}")
                timings = measure_contenders(contenders, cell.queries, timing, threads, device, _log)
                params = {"queries": cell.queries, "items": cell.items}
                records += [record(f"conversion {cell.queries}x{cell.items}", c.library, c.name, params, t,
                                   role=c.role, kind=KIND, group=f"conversion {cell.queries}x{cell.items}",
                                   description=c.description) for c, t in zip(contenders, timings, strict=True)]
        del cell
    if RANX_WARM_UP_S:
        records.append({"workload": "(all)", "library": "ranx", "name": "numba warm-up", "kind": KIND,
                        "skipped": "not a timing: seconds of untimed numba compilation/cache loading per metric set",
                        "extra": dict(RANX_WARM_UP_S)})
    return records


def _measure_workload(w: Workload, available: dict[str, bool], torch_devices: list[str], timing: TimingConfig,
                      threads: int) -> list[dict[str, Any]]:
    contenders = torchrank_contenders(w)
    skipped: list[dict[str, Any]] = []
    for dev in torch_devices:
        if available.get("torchmetrics"):
            found, missed = torchmetrics_contenders(w, dev)
            contenders += found
            skipped += missed
        if available.get("torcheval"):
            contenders += torcheval_contenders(w, dev)
    if available.get("pytrec_eval"):
        contenders += pytrec_contenders(w)
    if available.get("ranx"):
        contenders += ranx_contenders(w, threads)
    cell = w.cell
    params = {"queries": cell.queries, "items": cell.items, "k": w.k, "dtype": cell.dtype, "labels": cell.labels,
              "measures": w.names, "device": cell.device.type}
    timings = measure_contenders(contenders, cell.queries, timing, threads, cell.device, _log)
    common = {"kind": KIND, "group": w.group}
    out = [record(w.title, c.library, c.name, params, t, role=c.role, description=c.description, **common)
           for c, t in zip(contenders, timings, strict=True)]
    return out + [{"workload": w.title, "params": params, **common, **s} for s in skipped]


def main() -> int:
    """``python -m benchmarks.bench_functional`` runs the kernels grid through the harness."""
    from benchmarks import run

    return run.main(["--config", str(run.CONFIG_DIR / "kernels.yaml"), *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
