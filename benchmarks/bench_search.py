"""Workload ``search``: exact top-k search of a corpus by embeddings, and search plus five measures, against the
anchors.

Run through the harness (``python -m benchmarks.run --config configs/bench/search.yaml``); :func:`measure` takes one
``kind: search`` config section and returns records (``benchmarks/_records.py``).

Data: ``queries`` x ``dim`` and ``corpus`` x ``dim`` float32 embeddings, rows of unit length; each query has 1 to
``max_relevant`` relevant documents and is their mean plus noise, so the measures are neither 0 nor 1. Similarity:
the dot product, ``k`` = 100.

- ``search QxCxD float32 k=K``: ``F.search(queries, corpus, k)`` (primary) beside the bare ``queries @ corpus.T``
  (the ``[Q, C]`` matrix alone: the floor, role ``partial``), the same product into a buffer allocated beforehand
  (no page faults: the arithmetic alone), a plain torch loop of chunked ``matmul`` + ``topk`` with a ``topk`` merge
  (chunks of 50,000 rows, as sentence-transformers' evaluator) and faiss' ``IndexFlatIP.search`` (the index built
  beforehand, faiss on the same number of OpenMP threads).
- ``search + 5 measures QxCxD k=K``: ``F.search`` then ``F.evaluate(ndcg@10, recall@100, mrr@10, map@100, P@10)`` on
  ``F.ids_to_dense(ids, relevant)`` (primary), beside sentence-transformers' ``InformationRetrievalEvaluator``
  given the same embeddings (``compute_all_metrics(model, corpus_embeddings=corpus)``, a stand-in model whose
  ``encode_query`` returns the query embeddings, dot-product score function), configured for the same measures.

Every contender runs in a worker process of its own, started once: the data loaded from ``.npy`` files, its setup
done and one warm-up call made before any timing. The workers then take turns, one call at a time, the order
rotated each round (``repeats`` rounds): interleaved, so a load that comes and goes on a shared machine falls on
every contender alike. Per call: wall time, the process' CPU time, and the peak resident memory beyond what the
worker held before the call (Linux: ``VmHWM`` after resetting it through ``/proc/self/clear_refs``). Records give
the median and the minimum of the wall times; on a shared machine the minimum is the least disturbed call.

On a GPU (``configs/bench/search_gpu.yaml``, ``--device cuda``: MS MARCO-sized, float16) the contenders run in this
process (:func:`on_device`): ``F.search`` against the same products in chunks into one buffer with no top-k (its
floor: the ``[Q, C]`` matrix does not fit), on a synchronising clock, with CUDA's peak allocation per call.

Guards, on the warm-up calls: every search contender's top ``k`` against ``F.search``'s (the same ids, scores within
``1e-4``: chunked products may round the last bit differently), and the evaluator's values against torchrank's where
the definitions agree (NDCG@10, recall@100, MRR@10, P@10) and, for MAP@100, against torchrank's AP@100 rescaled to
the evaluator's definition (it divides by ``min(k, R)`` where trec_eval divides by ``R``).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks._records import REPO_ROOT, record
from benchmarks._timing import peak_memory_mb, single_call, summarize

KIND = "search"
MEASURES = ["ndcg@10", "recall@100", "mrr@10", "map@100", "P@10"]
# the evaluator's names of the measures it shares with torchrank's definitions
EVALUATOR_NAMES = {"ndcg@10": ("ndcg@k", 10), "recall@100": ("recall@k", 100), "mrr@10": ("mrr@k", 10),
                   "P@10": ("precision@k", 10)}
SEARCH_CONTENDERS = ["matmul", "matmul_into_buffer", "chunked_topk", "search", "faiss"]
END_TO_END_CONTENDERS = ["search_measures", "evaluator"]
DEFAULTS: dict[str, Any] = {
    "queries": 1_000,
    "corpus": 500_000,
    "dim": 384,
    "k": 100,
    "max_relevant": 5,
    "contenders": SEARCH_CONTENDERS + END_TO_END_CONTENDERS,
    "repeats": 5,
    "loop_chunk": 50_000,
    "score_tolerance": 1e-4,
    "value_tolerance": 1e-4,
    "seed": 0,
    "threads": 1,
    "device": "cpu",
}
# name, library, role, description of each contender
CONTENDERS = {
    "search": ("F.search(queries, corpus, k)", "torchrank", "primary",
               "exact top-k by chunked products, candidates from group maxima, running merge"),
    "matmul": ("queries @ corpus.T", "torch", "partial", "the [Q, C] score matrix alone: the floor, no top-k"),
    "matmul_into_buffer": ("torch.matmul(queries, corpus.T, out=buffer)", "torch", "partial",
                           "the same product into a [Q, C] buffer allocated beforehand: no page faults"),
    "chunked_topk": ("chunked matmul + topk loop", "torch", "incumbent",
                     "chunks of 50,000 rows: matmul, topk(k), cat with the running top k, topk(k)"),
    "faiss": ("faiss.IndexFlatIP.search", "faiss", "incumbent", "exact inner-product search, index built beforehand"),
    "search_measures": ("F.evaluate(**F.ids_to_dense(F.search(...)[1], relevant), 5 measures)", "torchrank",
                        "primary", "search, the id matching, NDCG@10, recall@100, MRR@10, MAP@100, P@10"),
    "evaluator": ("InformationRetrievalEvaluator.compute_all_metrics", "sentence-transformers", "incumbent",
                  "given the corpus embeddings and a stand-in query encoder; chunks of 50,000, Python merge and "
                  "measures per query"),
}
_NEEDS = {"faiss": "faiss", "evaluator": "sentence_transformers"}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- data
def make_data(queries: int, corpus: int, dim: int, max_relevant: int, seed: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(queries [Q, D], corpus [C, D], relevant [Q, max_relevant])``: unit rows; each query the mean of its 1 to
    ``max_relevant`` relevant documents (-1 pads) plus noise."""
    g = torch.Generator().manual_seed(seed)
    docs = torch.empty(corpus, dim)
    for start in range(0, corpus, 65_536):  # a block at a time: no temporary of the corpus' size
        block = torch.randn(min(65_536, corpus - start), dim, generator=g)
        docs[start:start + len(block)] = torch.nn.functional.normalize(block, dim=1)
    relevant = torch.randint(0, corpus, (queries, max_relevant), generator=g)
    count = torch.randint(1, max_relevant + 1, (queries, 1), generator=g)
    relevant = torch.where(torch.arange(max_relevant) < count, relevant, -1)
    centre = (docs[relevant.clamp(min=0)] * (relevant >= 0).unsqueeze(-1)).sum(1) / count
    noisy = centre + torch.randn(queries, dim, generator=g) / dim**0.5
    return torch.nn.functional.normalize(noisy, dim=1), docs, relevant


# ----------------------------------------------------------------------------------------------- worker side
def _status(field: str) -> int:
    return int(re.search(field + r":\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024


def _chunked_topk(queries: torch.Tensor, corpus: torch.Tensor, k: int, chunk: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    best_scores = best_ids = None
    for start in range(0, len(corpus), chunk):
        scores, ids = (queries @ corpus[start:start + chunk].T).topk(min(k, len(corpus) - start), dim=1)
        ids += start
        if best_scores is not None:
            scores, ids = torch.cat([best_scores, scores], 1), torch.cat([best_ids, ids], 1)
            scores, where = scores.topk(k, dim=1)
            ids = ids.gather(1, where)
        best_scores, best_ids = scores, ids
    return best_scores, best_ids


class _QueryEncoder:
    """What InformationRetrievalEvaluator calls on its model: ``encode_query`` (the query embeddings, given)."""

    def __init__(self, embeddings: torch.Tensor) -> None:
        self.embeddings = embeddings

    def encode_query(self, sentences: list[str], **_: Any) -> torch.Tensor:
        assert len(sentences) == len(self.embeddings)
        return self.embeddings


def _build(name: str, spec: dict[str, Any]) -> tuple[Any, Any]:
    """``(call, summarise)``: the zero-argument call to time and, for its warm-up output, what the guard compares."""
    import torchrank.functional as F

    folder = Path(spec["folder"])
    # memory-mapped: every worker reads the one copy in the page cache (none of them writes to it)
    arrays = (np.load(folder / f"{n}.npy", mmap_mode="r") for n in ("queries", "corpus", "relevant"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "non-writable array": read only, by design
        queries, corpus, relevant = (torch.from_numpy(a) for a in arrays)
    k = int(spec["k"])

    def top_k(out: tuple[torch.Tensor, torch.Tensor]) -> dict[str, Any]:
        return {"scores": torch.as_tensor(out[0]).tolist(), "ids": torch.as_tensor(out[1]).long().tolist()}

    if name == "search":
        return lambda: F.search(queries, corpus, k), top_k
    if name == "matmul":
        return lambda: queries @ corpus.T, lambda out: top_k(out.topk(k, dim=1))
    if name == "matmul_into_buffer":
        buffer = torch.empty(len(queries), len(corpus))
        return lambda: torch.matmul(queries, corpus.T, out=buffer), lambda out: top_k(out.topk(k, dim=1))
    if name == "chunked_topk":
        return lambda: _chunked_topk(queries, corpus, k, int(spec["loop_chunk"])), top_k
    if name == "faiss":
        import faiss

        faiss.omp_set_num_threads(int(spec["threads"]))
        index = faiss.IndexFlatIP(corpus.shape[1])
        index.add(corpus.numpy())
        queries_np = queries.numpy()
        return lambda: index.search(queries_np, k), top_k
    if name == "search_measures":
        def search_and_measure() -> dict[str, torch.Tensor]:
            _, ids = F.search(queries, corpus, k)
            return F.evaluate(measures=MEASURES, reduction="none", **F.ids_to_dense(ids, relevant))

        def values(out: dict[str, torch.Tensor]) -> dict[str, float]:
            found = {name: float(v.mean()) for name, v in out.items()}
            # the evaluator's MAP@k divides the sum of precisions by min(k, R), trec_eval's by R
            total = (relevant >= 0).sum(1).double()
            found["map@100 (evaluator's definition)"] = float(
                (out["map@100"].double() * total / total.clamp(max=100)).mean())
            return found

        return search_and_measure, values
    if name == "evaluator":
        from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
        from sentence_transformers.util import dot_score

        evaluator = InformationRetrievalEvaluator(
            queries={q: "" for q in range(len(queries))}, corpus={c: "" for c in range(len(corpus))},
            relevant_docs={q: {int(i) for i in row if i >= 0} for q, row in enumerate(relevant.tolist())},
            corpus_chunk_size=int(spec["loop_chunk"]), mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[10],
            precision_recall_at_k=[10, 100], map_at_k=[100], score_functions={"dot": dot_score}, write_csv=False)
        model = _QueryEncoder(queries)

        def values(out: dict[str, dict[str, dict[int, float]]]) -> dict[str, float]:
            found = {ours: float(out["dot"][theirs][at]) for ours, (theirs, at) in EVALUATOR_NAMES.items()}
            found["map@100 (evaluator's definition)"] = float(out["dot"]["map@k"][100])
            return found

        return lambda: evaluator.compute_all_metrics(model, corpus_embeddings=corpus), values
    raise ValueError(f"unknown contender {name!r}")


def worker() -> None:
    """One contender's process: set up, warm up (its output summarised for the guard), then one timed call per
    ``run`` line on stdin, each answered with a JSON line on stdout."""
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(int(spec["threads"]))
    call, summarise = _build(spec["contender"], spec)
    out = call()
    print(json.dumps({"ready": True, "summary": summarise(out)}), flush=True)
    del out
    for line in sys.stdin:
        if line.strip() != "run":
            break
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # the peak resident size restarts from the current one
        before = _status("VmRSS")
        wall, cpu = time.perf_counter(), time.process_time()
        out = call()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        peak = _status("VmHWM") - before
        del out
        print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_extra_bytes": peak}), flush=True)


_WORKER = "from benchmarks.bench_search import worker; worker()"


# ----------------------------------------------------------------------------------------------- parent side
class _Worker:
    def __init__(self, name: str, spec: dict[str, Any]) -> None:
        self.name = name
        self.process = subprocess.Popen([sys.executable, "-c", _WORKER, json.dumps({**spec, "contender": name})],
                                        cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.summary: Any = None
        self.calls: list[dict[str, float]] = []

    def wait_ready(self) -> None:
        """Its setup and warm-up call done (the workers start together: their imports and setups overlap)."""
        self.summary = self._reply()["summary"]

    def _reply(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            raise RuntimeError(f"search worker {self.name!r} exited with code {self.process.returncode}")
        return json.loads(line)

    def run(self) -> None:
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        self.calls.append(self._reply())

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)


def _check_top_k(name: str, got: dict[str, Any], want: dict[str, Any], tolerance: float) -> dict[str, Any]:
    """The same top-k ids as F.search's, scores within ``tolerance`` (a near tie may swap two neighbours)."""
    got_ids, want_ids = torch.tensor(got["ids"]), torch.tensor(want["ids"])
    worst = (torch.tensor(got["scores"]).sort(1, descending=True).values
             - torch.tensor(want["scores"])).abs().max().item()
    same_sets = sum(len(set(a) & set(b)) for a, b in zip(got_ids.tolist(), want_ids.tolist(), strict=True))
    agreement = same_sets / want_ids.numel()
    if worst > tolerance or agreement < 0.999:
        raise AssertionError(f"search: {name} disagrees with F.search (scores by {worst}, ids {agreement:.4%} same)")
    return {"max_abs_score_diff": worst, "same_ids": agreement, "tolerance": tolerance, "against": "F.search",
            "max_outside": 0.0, "checked": ["warm-up call"]}


def _check_values(got: dict[str, float], want: dict[str, float], tolerance: float) -> dict[str, Any]:
    names = [*EVALUATOR_NAMES, "map@100 (evaluator's definition)"]
    diffs = {n: abs(got[n] - want[n]) for n in names}
    if max(diffs.values()) > tolerance:
        raise AssertionError(f"search: the evaluator's values differ from torchrank's: {diffs}")
    return {"max_outside": max(diffs.values()), "tolerance": tolerance, "values": got, "torchrank": want,
            "map@100 (trec_eval's definition, torchrank)": want["map@100"], "checked": ["warm-up call"],
            "against": "torchrank's values; MAP@100 rescaled to the evaluator's min(k, R) definition"}


def _available(name: str) -> bool:
    needed = _NEEDS.get(name)
    return needed is None or importlib.util.find_spec(needed) is not None


def measure(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Time one ``kind: search`` config section; records for :mod:`benchmarks.run`."""
    config = {**DEFAULTS, **config}
    q, c, d = (int(config[n]) for n in ("queries", "corpus", "dim"))
    if config["device"] != "cpu":
        return on_device(config, torch.device(config["device"]))
    names = [n for n in config["contenders"] if _available(n)]
    skipped = [n for n in config["contenders"] if n not in names]
    with tempfile.TemporaryDirectory(prefix="torchrank-search-") as folder:
        for name, tensor in zip(("queries", "corpus", "relevant"),
                                make_data(q, c, d, int(config["max_relevant"]), int(config["seed"])), strict=True):
            np.save(Path(folder) / f"{name}.npy", tensor.numpy())
        spec = {n: config[n] for n in ("k", "threads", "loop_chunk")} | {"folder": folder}
        workers: list[_Worker] = []
        try:
            for name in names:
                _log(f"  search {q}x{c}x{d}: starting {name}")
                workers.append(_Worker(name, spec))
            for w in workers:
                w.wait_ready()
            for r in range(int(config["repeats"])):
                for w in workers[r % len(workers):] + workers[:r % len(workers)]:
                    w.run()
                _log(f"  round {r + 1}: " + ", ".join(f"{w.name} {w.calls[-1]['wall_s']:.2f} s" for w in workers))
        finally:
            for w in workers:
                w.close()
    return _records(config, workers, skipped)


def _records(config: dict[str, Any], workers: list[_Worker], skipped: list[str]) -> list[dict[str, Any]]:
    q, c, d, k = (int(config[n]) for n in ("queries", "corpus", "dim", "k"))
    by_name = {w.name: w for w in workers}
    params = {"queries": q, "corpus": c, "dim": d, "k": k, "dtype": "float32", "similarity": "dot",
              "threads": int(config["threads"]), "device": "cpu"}
    floor = by_name.get("matmul")
    floor_min = min(x["wall_s"] for x in floor.calls) if floor else None
    floor_median = summarize([x["wall_s"] for x in floor.calls])["median_s"] if floor else None
    out = []
    for w in workers:
        walls = [x["wall_s"] for x in w.calls]
        timing = summarize(walls) | {"method": "single calls, interleaved, one worker process per contender"}
        guard = None
        if w.name in SEARCH_CONTENDERS and w.name != "search" and "search" in by_name:
            guard = _check_top_k(w.name, w.summary, by_name["search"].summary, float(config["score_tolerance"]))
        if w.name == "evaluator" and "search_measures" in by_name:
            guard = _check_values(w.summary, by_name["search_measures"].summary, float(config["value_tolerance"]))
        extra = {"min_s": min(walls), "times_s": walls, "cpu_s": [x["cpu_s"] for x in w.calls],
                 "peak_extra_resident_mb": max(x["peak_extra_bytes"] for x in w.calls) / 2**20}
        if floor:
            extra |= {"median_over_matmul": timing["median_s"] / floor_median,
                      "min_over_matmul": min(walls) / floor_min}
        if w.name == "search_measures":
            extra["values"] = w.summary
        end_to_end = w.name in END_TO_END_CONTENDERS
        workload = f"search{' + 5 measures' if end_to_end else ''} {q}x{c}x{d} float32 k={k}"
        name, library, role, description = CONTENDERS[w.name]
        out.append(record(workload, library, name, params, timing, role=role, kind=KIND, guard=guard,
                          group="search + 5 measures" if end_to_end else "search", description=description,
                          extra=extra))
    for name in skipped:
        label, library, _, _ = CONTENDERS[name]
        out.append({"workload": f"search {q}x{c}x{d} float32 k={k}", "library": library, "name": label,
                    "kind": KIND, "skipped": f"{_NEEDS[name]} is not installed"})
    return out


# ----------------------------------------------------------------------------------------------- on a GPU
def on_device(config: dict[str, Any], device: torch.device) -> list[dict[str, Any]]:
    """``F.search`` against its floor on ``device`` (a GPU; any device runs it), in this process: the same chunked
    products into one buffer with no top-k (the ``[Q, C]`` matrix of an MS MARCO-sized search does not fit), each
    call on a synchronising clock, interleaved, ``repeats`` times after a warm-up; the peak device memory one call
    allocates beyond what was allocated before it (CUDA's allocator statistics; None elsewhere). ``dtype`` and
    ``floor_chunk`` (corpus rows per product of the floor) come from the config."""
    import torchrank.functional as F

    q, c, d, k = (int(config[n]) for n in ("queries", "corpus", "dim", "k"))
    dtype = getattr(torch, str(config.get("dtype", "float32")))
    g = torch.Generator(device=device).manual_seed(int(config["seed"]))
    corpus = torch.empty(c, d, dtype=dtype, device=device)
    for start in range(0, c, 65_536):  # a block at a time: no float32 temporary of the corpus' size
        block = torch.randn(min(65_536, c - start), d, generator=g, device=device)
        corpus[start:start + len(block)] = torch.nn.functional.normalize(block, dim=1).to(dtype)
    queries = torch.nn.functional.normalize(torch.randn(q, d, generator=g, device=device), dim=1).to(dtype)
    chunk = min(int(config.get("floor_chunk", 262_144)), c)
    buffer = torch.empty(q * chunk, dtype=dtype, device=device)

    def floor() -> torch.Tensor:
        for start in range(0, c, chunk):
            rows = corpus[start:start + chunk]
            torch.matmul(queries, rows.T, out=buffer[:q * len(rows)].view(q, len(rows)))
        return buffer

    calls = {"floor": floor, "search": lambda: F.search(queries, corpus, k)}
    for call in calls.values():
        single_call(call)  # warm-up: kernels chosen, caches filled
    times: dict[str, list[float]] = {name: [] for name in calls}
    for r in range(int(config["repeats"])):
        for name in list(calls)[r % 2:] + list(calls)[:r % 2]:
            times[name].append(single_call(calls[name])[0])
    params = {"queries": q, "corpus": c, "dim": d, "k": k, "dtype": str(config.get("dtype", "float32")),
              "similarity": "dot", "device": device.type}
    workload = f"search {q}x{c}x{d} {params['dtype']} k={k} ({device.type})"
    floor_median = summarize(times["floor"])["median_s"]
    out = []
    for name, label, library, role, description in (
            ("floor", f"matmul in chunks of {chunk} rows into a buffer", "torch", "partial",
             "the products alone, no top-k: the floor"),
            ("search", CONTENDERS["search"][0], "torchrank", "primary", CONTENDERS["search"][3])):
        timing = summarize(times[name]) | {"method": "single calls, interleaved, synchronising clock"}
        extra = {"min_s": min(times[name]), "times_s": times[name],
                 "median_over_floor": timing["median_s"] / floor_median,
                 "peak_extra_allocated_mb": peak_memory_mb(calls[name], device)}
        out.append(record(workload, library, label, params, timing, role=role, kind=KIND, group="search on device",
                          description=description, extra=extra))
    return out
