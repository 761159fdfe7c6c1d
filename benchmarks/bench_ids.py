"""Workload ``ids``: id-list input against the dense call on the same queries, and catalogue scoring to measures.

Run through the harness (``python -m benchmarks.run --config configs/bench/ids.yaml``); :func:`measure` takes one
``kind: ids`` config section and returns records (``benchmarks/_records.py``).

- ``ids ndcg@10 BxK M<=m``: ``B`` queries, each a top-``K`` list of distinct ids from a catalogue of ``items``
  and ``1..m`` relevant ids (about a third of them retrieved, the rest not: they count in R and the ideal),
  padded with -1; binary or graded (1-4) labels. Contenders: ``F.ndcg(**F.ids_to_dense(ranked, relevant), k=10)``
  (primary: what a user of id lists calls), ``F.ndcg`` on the tensors ``ids_to_dense`` returns, built beforehand
  and materialised (``dense call``: the same queries, the same measure, no matching; its scores are a contiguous
  copy of the list positions, as a user's dense ``[B, K]`` scores are, e.g. from ``topk``, so the ranking sorts
  them: the stride-0 scores ``ids_to_dense`` returns are known to be in rank order and skip the sort; its mask,
  all True where no list is padded, is read as no mask, as the id lists' is: the dense call costs what one without
  a mask does),
  ``ids_to_dense`` alone, the device matching (the ``"torch"`` backend's ``searchsorted``) on the same CPU for
  comparison and, where numba imports, a compiled matching torchrank does not ship (``_compiled_matching``: what a
  compiled kernel would give). Guard: every NDCG equals the dense call's.
- ``rank order ndcg@10 BxK M<=m``: that skip alone, ``F.ndcg`` on the tensors as returned (primary) against the
  dense call (the same timings: the five contenders of a cell are timed together).
- ``catalogue BxC k=K``: scores ``[B, C]`` over a whole catalogue, ``F.catalogue_to_dense(scores, relevant, K)``
  (top-K in chunks of queries, then the matching) and ``F.evaluate`` of NDCG@10, recall@K; and ``topk`` alone as
  the floor. On CPU in a fresh subprocess: its peak resident memory beyond what it held before the call (Linux:
  ``VmHWM`` after resetting it through ``/proc/self/clear_refs``) is the call's working memory. On a GPU
  (``--device cuda``) in this process, the scores made on the device: the working memory is the peak CUDA
  allocation beyond what was allocated before the call. ``catalogue_queries`` scales it down where memory is
  short (the scores take ``4 B C`` bytes).

Every record's ``extra`` names the machine's load; on a shared machine compare ratios within one run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import torch

import torchrank
import torchrank.functional as F
from benchmarks._records import REPO_ROOT, record
from benchmarks._timing import Contender, TimingConfig, measure_contenders, peak_memory_mb, single_call

KIND = "ids"
DEFAULTS: dict[str, Any] = {
    "queries": 10_000,
    "k": 100,
    "max_relevant": [10, 50],
    "items": 100_000,
    "labels": ["binary", "graded"],
    "catalogue": True,
    "catalogue_queries": 1_024,
    "catalogue_items": 1_000_000,
    "catalogue_k": 100,
    "tolerance": 1e-6,
    "seed": 0,
    "threads": 1,
    "device": "cpu",
    "timing": {"min_run_time": 1.0, "rounds": 3},
}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def id_lists(queries: int, k: int, max_relevant: int, items: int, graded: bool, seed: int, device: torch.device
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Top-``k`` lists of distinct ids, ``1..max_relevant`` relevant ids per query (about a third retrieved), -1
    padding; graded labels 1-4 or None."""
    g = torch.Generator().manual_seed(seed)
    catalogue = torch.randperm(items, generator=g)
    # distinct ids per row: k distinct offsets from a random start, through a random permutation of the catalogue
    start = torch.randint(0, items, (queries, 1), generator=g)
    offsets = torch.rand(queries, 4 * k, generator=g).argsort(1)[:, :k]
    ranked = catalogue[(start + offsets) % items]
    count = torch.randint(1, max_relevant + 1, (queries, 1), generator=g)
    retrieved = ranked.gather(1, torch.randint(0, k, (queries, max_relevant), generator=g))
    other = torch.randint(0, items, (queries, max_relevant), generator=g)
    relevant = torch.where(torch.rand(queries, max_relevant, generator=g) < 1 / 3, retrieved, other)
    relevant = torch.where(torch.arange(max_relevant) < count, relevant, -1)
    labels = torch.randint(1, 5, (queries, max_relevant), generator=g) if graded else None
    return ranked.to(device), relevant.to(device), None if labels is None else labels.to(device)


def _ids_workload(config: dict[str, Any], max_relevant: int, labels: str, device: torch.device,
                  timing: TimingConfig) -> list[dict[str, Any]]:
    queries, k, items = int(config["queries"]), int(config["k"]), int(config["items"])
    ranked, relevant, graded = id_lists(queries, k, max_relevant, items, labels == "graded", int(config["seed"]),
                                        device)
    returned = F.ids_to_dense(ranked, relevant, graded)
    # the dense baseline holds materialised scores (the stride-0 ones returned would skip the sort: see the docstring)
    dense = {name: t.contiguous().clone() for name, t in returned.items()}
    assert dense["preds"].stride(0) != 0 and returned["preds"].stride(0) == 0
    want = F.ndcg(**dense, k=10, reduction="none")
    tolerance = float(config["tolerance"])

    def check(out: Any, _q: int) -> dict[str, Any]:
        values = out if out.ndim else None
        if values is None:
            raise AssertionError("expected per-query values")
        worst = (values - want).abs().max().item()
        if worst > tolerance:
            raise AssertionError(f"ids: NDCG@10 differs from the dense call's by {worst}")
        return {"max_abs_diff": worst, "tolerance": tolerance, "against": "F.ndcg on the dense tensors"}

    def torch_matching() -> torch.Tensor:
        with torchrank.use_backend("torch"):
            inputs = F.ids_to_dense(ranked, relevant, graded)
        return F.ndcg(**inputs, k=10, reduction="none")

    contenders = [
        Contender("F.ndcg(**F.ids_to_dense(ranked, relevant), k=10)", "torchrank", "primary",
                  "id lists: the matching, then NDCG@10", lambda _q: lambda: F.ndcg(
                      **F.ids_to_dense(ranked, relevant, graded), k=10, reduction="none"), check),
        Contender("F.ndcg(**dense, k=10)", "torchrank", "variant",
                  "the dense call on the same tensors, built beforehand", lambda _q: lambda: F.ndcg(
                      **dense, k=10, reduction="none"), check),
        Contender("F.ids_to_dense(ranked, relevant)", "torchrank", "variant", "the matching alone",
                  lambda _q: lambda: F.ids_to_dense(ranked, relevant, graded)),
        Contender("device matching (searchsorted) + F.ndcg", "torchrank", "variant",
                  "the torch backend's matching (the device path) on the same device, then NDCG@10",
                  lambda _q: torch_matching, check),
        # timed with the others (interleaved), shown in a workload of its own with the dense call: the sort skipped
        Contender("F.ndcg(**ids_to_dense output, k=10)", "torchrank", "primary",
                  "NDCG@10 on the tensors ids_to_dense returns, built beforehand: scores in rank order, no sort",
                  lambda _q: lambda: F.ndcg(**returned, k=10, reduction="none"), check),
    ]
    compiled = _compiled_matching() if device.type == "cpu" else None
    if compiled is not None:  # what a compiled kernel would give: sizes the case for a numba dependency
        contenders.append(Contender(
            "compiled matching (numba, not in torchrank) + F.ndcg", "benchmarks", "variant",
            "benchmarks/_compiled_matching.py: a hash table per query in compiled code, then NDCG@10",
            lambda _q: lambda: F.ndcg(**compiled(ranked, relevant, graded), k=10, reduction="none"), check))
    shape = f"{queries}x{k} M<={max_relevant} {labels}"
    _log(f"  ids {shape}")
    timings = measure_contenders(contenders, queries, timing, int(config["threads"]), device, _log)
    params = {"queries": queries, "k": k, "max_relevant": max_relevant, "items": items, "labels": labels,
              "device": device.type}
    dense_s = timings[1]["median_s"]
    out = []
    for prefix, indices in (("ids", (0, 1, 2, 3, *range(5, len(contenders)))), ("rank order", (4, 1))):
        for i in indices:
            c, t = contenders[i], timings[i]
            out.append(record(f"{prefix} ndcg@10 {shape}", c.library, c.name, params, t, role=c.role, kind=KIND,
                              group=f"{prefix} ndcg@10 {queries}x{k}", description=c.description,
                              extra={"time_over_dense_call": t["median_s"] / dense_s}))
    return out


def _compiled_matching() -> Any:
    """The compiled matching of benchmarks/_compiled_matching.py, or None where numba does not import."""
    try:
        from benchmarks._compiled_matching import compiled_ids_to_dense
    except ImportError:
        return None
    return compiled_ids_to_dense


# ----------------------------------------------------------------------------------------------- catalogue
def catalogue_data(
    queries: int, items: int, seed: int, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Catalogue scores ``[queries, items]`` (standard normal) and up to 50 relevant ids per query (-1 padding), the
    top-scored item always among them, made on ``device``."""
    g = torch.Generator(device=device).manual_seed(seed)
    scores = torch.empty(queries, items, device=device)
    for start in range(0, queries, 64):  # a slice at a time: no temporary of the scores' size
        scores[start:start + 64] = torch.randn(min(64, queries - start), items, generator=g, device=device)
    relevant = torch.randint(0, items, (queries, 50), generator=g, device=device)
    relevant[torch.rand(queries, 50, generator=g, device=device) < 0.5] = -1
    relevant[:, :1] = scores.argmax(1, keepdim=True)  # the top item is relevant: one retrieved relevant item at least
    return scores, relevant


_CATALOGUE_SCRIPT = r"""
import json, re, sys, time
import torch
import torchrank.functional as F
from benchmarks.bench_ids import catalogue_data
queries, items, k, seed, threads, call = json.loads(sys.argv[1])
torch.set_num_threads(threads)
scores, relevant = catalogue_data(queries, items, seed, "cpu")
def run():
    if call == "topk":
        return scores.topk(k, dim=1)
    return F.evaluate(measures=["ndcg@10", f"recall@{k}"], **F.catalogue_to_dense(scores, relevant, k))
def status(field):
    return int(re.search(field + r":\s+(\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
times, peaks = [], []
for _ in range(3):
    open("/proc/self/clear_refs", "w").write("5")  # Linux: the peak resident size restarts from the current one
    before = status("VmRSS")
    start = time.perf_counter()
    out = run()
    times.append(time.perf_counter() - start)
    peaks.append(status("VmHWM") - before)
    value = {n: float(v) for n, v in out.items()} if isinstance(out, dict) else None
    del out
print(json.dumps({"times": times, "peak_extra_bytes": max(peaks), "scores_bytes": scores.numel() * 4,
                  "values": value}))
"""


def _catalogue_contenders(k: int) -> list[tuple[str, str, str, str]]:
    """``(call, name, role, description)`` of the catalogue workload's two contenders."""
    return [
        ("measures", f"F.evaluate(**F.catalogue_to_dense(scores, relevant, {k}), [ndcg@10, recall@{k}])",
         "primary", "top-k in chunks of queries, the matching, two measures"),
        ("topk", f"scores.topk({k}, dim=1)", "variant", "torch's top-k alone, in one call: the floor"),
    ]


def _catalogue(config: dict[str, Any]) -> list[dict[str, Any]]:
    queries, items, k = int(config["catalogue_queries"]), int(config["catalogue_items"]), int(config["catalogue_k"])
    out = []
    shape = f"{queries}x{items} k={k}"
    for call, name, role, description in _catalogue_contenders(k):
        _log(f"  catalogue {shape}: {call} (subprocess)")
        args = json.dumps([queries, items, k, int(config["seed"]), int(config["threads"]), call])
        done = subprocess.run([sys.executable, "-c", _CATALOGUE_SCRIPT, args], capture_output=True, text=True,
                              cwd=REPO_ROOT)
        if done.returncode:
            raise RuntimeError(f"catalogue subprocess failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        times = sorted(result["times"])
        timing = {"median_s": times[len(times) // 2], "iqr_s": None, "repeats": len(times),
                  "method": "single calls (fresh subprocess)"}
        extra = {"peak_extra_resident_mb": result["peak_extra_bytes"] / 2**20,
                 "scores_mb": result["scores_bytes"] / 2**20, "values": result["values"], "times_s": times}
        out.append(record(f"catalogue {shape}", "torchrank", name,
                          {"queries": queries, "items": items, "k": k, "device": "cpu"}, timing, role=role,
                          kind=KIND, group="catalogue", description=description, extra=extra))
    return out


def _catalogue_on_device(config: dict[str, Any], device: torch.device) -> list[dict[str, Any]]:
    """The catalogue workload in this process, its scores made on ``device`` (a GPU; any device runs it): after
    one warm-up call, three calls on a synchronising clock, and the device memory one call allocates beyond what
    was allocated before it (CUDA's allocator statistics; None elsewhere)."""
    queries, items, k = int(config["catalogue_queries"]), int(config["catalogue_items"]), int(config["catalogue_k"])
    scores, relevant = catalogue_data(queries, items, int(config["seed"]), device)
    calls = {
        "measures": lambda: F.evaluate(measures=["ndcg@10", f"recall@{k}"],
                                       **F.catalogue_to_dense(scores, relevant, k)),
        "topk": lambda: scores.topk(k, dim=1),
    }
    shape = f"{queries}x{items} k={k}"
    out = []
    for call, name, role, description in _catalogue_contenders(k):
        _log(f"  catalogue {shape}: {call} ({device.type})")
        _, result = single_call(calls[call])  # warm-up: kernels built, caches filled
        values = {n: float(v) for n, v in result.items()} if isinstance(result, dict) else None
        del result
        times = sorted(single_call(calls[call])[0] for _ in range(3))
        timing = {"median_s": times[1], "iqr_s": None, "repeats": 3, "method": "single calls (after a warm-up)"}
        extra = {"peak_extra_allocated_mb": peak_memory_mb(calls[call], device),
                 "scores_mb": scores.numel() * 4 / 2**20, "values": values, "times_s": times}
        out.append(record(f"catalogue {shape}", "torchrank", name,
                          {"queries": queries, "items": items, "k": k, "device": device.type}, timing, role=role,
                          kind=KIND, group="catalogue", description=description, extra=extra))
    return out


def measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Time one ``kind: ids`` config section; records for :mod:`benchmarks.run`."""
    config = {**DEFAULTS, **config, "timing": {**DEFAULTS["timing"], **(config.get("timing") or {})}}
    device = torch.device(config["device"])
    timing = TimingConfig.from_dict(config["timing"])
    out = []
    for max_relevant in config["max_relevant"]:
        for labels in config["labels"]:
            out += _ids_workload(config, int(max_relevant), labels, device, timing)
    if config["catalogue"]:
        out += _catalogue(config) if device.type == "cpu" else _catalogue_on_device(config, device)
    return out
