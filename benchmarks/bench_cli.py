"""``torchrank evaluate`` on large TREC files against the trec_eval binary, pytrec_eval, ranx and ir_measures.

Run from the repository root::

    python -m benchmarks.bench_cli                  # 7,000 queries x 1,000 documents (7M run lines)
    python -m benchmarks.bench_cli --smoke          # 200 x 100, a few seconds
    python -m benchmarks.bench_cli --device cuda    # torchrank on a GPU as well

A run of ``queries x docs`` lines (random scores written in rank order with 6 decimals, as retrieval
systems write them) and qrels of ``judged`` documents per query (half of them retrieved, labels 0-3) are
generated with a fixed seed into a temporary folder (never committed). Each contender reads both files
from disk and computes the same 10 measures (``MEASURES``); the timed call covers reading, parsing and
evaluation, everything a user waits for:

* ``torchrank evaluate (process)``: ``python -m torchrank evaluate -m ... qrels run`` as a subprocess, the
  command a user types (Python start-up and imports included);
* ``torchrank score_run``: :func:`torchrank.io.trec_eval.score_run` in this process;
* ``trec_eval (C binary)``: ``trec_eval -m ... qrels run`` as a subprocess, the command IR researchers type.
  Neither PyPI nor Debian packages trec_eval, but Anserini's jar inside pyserini's wheel carries its compiled
  binary (9.0.4): ``python -m benchmarks.get_trec_eval`` fetches it into ``benchmarks/tools/trec_eval`` and
  checks it against trec_eval's published outputs. Found there, at ``$TREC_EVAL`` or on the PATH; skipped
  (and said so in the results) when absent;
* ``trec_eval (pytrec_eval)``: trec_eval's C evaluation through pytrec_eval, its Python binding: its own
  ``parse_qrel``/``parse_run`` readers plus ``RelevanceEvaluator.evaluate``; its evaluation alone (files
  already parsed) is recorded too;
* ``ranx``: ``Qrels.from_file``/``Run.from_file`` (kind trec) plus ``evaluate``;
* ``ir_measures``: ``read_trec_qrels``/``read_trec_run`` plus ``calc_aggregate``.

Before anything is timed every contender's means are checked against torchrank's (a mismatch aborts).
Writes ``benchmarks/results/cli_cpu.json`` and ``.md`` (``--smoke``: ``cli_cpu_smoke.*``).
:func:`measure` returns the records for the benchmark harness (``python -m benchmarks.run``).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.get_trec_eval import find as find_trec_eval
from benchmarks.get_trec_eval import version as trec_eval_version

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results"

# the 10 measures, in trec_eval's -m syntax, and their names in each contender
MEASURES = ["map", "P.5,10", "recall.100", "ndcg_cut.10,20", "recip_rank", "Rprec", "success.1", "bpref"]
TREC_NAMES = [
    "map",
    "P_5",
    "P_10",
    "recall_100",
    "ndcg_cut_10",
    "ndcg_cut_20",
    "recip_rank",
    "Rprec",
    "success_1",
    "bpref",
]
RANX = [
    "map",
    "precision@5",
    "precision@10",
    "recall@100",
    "ndcg@10",
    "ndcg@20",
    "mrr",
    "r-precision",
    "hit_rate@1",
    "bpref",
]
IR_MEASURES = ["AP", "P@5", "P@10", "R@100", "nDCG@10", "nDCG@20", "RR", "Rprec", "Success@1", "Bpref"]

DEFAULTS: dict[str, Any] = {
    "queries": 7000,
    "docs": 1000,
    "judged": 20,
    "seed": 0,
    "repeats": 3,
    "device": "cpu",
    "tools": ["torchrank", "trec_eval", "pytrec_eval", "ranx", "ir_measures"],
}
SMOKE: dict[str, Any] = {**DEFAULTS, "queries": 200, "docs": 100, "repeats": 1}


def generate(folder: Path, queries: int, docs: int, judged: int, seed: int) -> tuple[Path, Path]:
    """Write ``run.txt`` (queries x docs, rank order) and ``qrels.txt`` (judged per query) into ``folder``."""
    rng = random.Random(seed)
    run_path, qrels_path = folder / "run.txt", folder / "qrels.txt"
    with open(run_path, "w") as run, open(qrels_path, "w") as qrels:
        for q in range(queries):
            qid = str(1000 + q)
            ids = rng.sample(range(10_000_000), docs + judged // 2)
            retrieved = ids[:docs]
            scores = sorted((rng.gauss(10.0, 3.0) for _ in range(docs)), reverse=True)
            run.write(
                "".join(
                    f"{qid} Q0 D{d:08d} {r} {s:.6f} bench\n"
                    for r, (d, s) in enumerate(zip(retrieved, scores, strict=True), 1)
                )
            )
            judged_ids = rng.sample(retrieved, judged - judged // 2) + ids[docs:]
            qrels.write("".join(f"{qid} 0 D{d:08d} {rng.randint(0, 3)}\n" for d in judged_ids))
    return qrels_path, run_path


def _torchrank_process(qrels: Path, run: Path, device: str) -> Callable[[], dict[str, float]]:
    argv = [sys.executable, "-m", "torchrank", "evaluate", "--device", device]
    for m in MEASURES:
        argv += ["-m", m]

    def call() -> dict[str, float]:
        done = subprocess.run([*argv, str(qrels), str(run)], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
        return {line.split("\t")[0].strip(): float(line.split("\t")[2]) for line in done.stdout.splitlines()}

    return call


def _torchrank_inprocess(qrels: Path, run: Path, device: str) -> Callable[[], dict[str, float]]:
    from torchrank.io.trec_eval import score_run

    return lambda: score_run(qrels, run, MEASURES, device=device).summary()


def _trec_eval_binary(binary: Path, qrels: Path, run: Path) -> Callable[[], dict[str, float]]:
    argv = [str(binary)] + [f"-m{m}" for m in MEASURES] + [str(qrels), str(run)]

    def call() -> dict[str, float]:
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        values = {line.split()[0]: float(line.split()[2]) for line in done.stdout.splitlines() if line.strip()}
        return {m: values[m] for m in TREC_NAMES}

    return call


def _pytrec_eval(qrels: Path, run: Path) -> tuple[Callable[[], dict[str, float]], Callable[[], dict[str, float]]]:
    import pytrec_eval

    names = {"map", "P.5,10", "recall.100", "ndcg_cut.10,20", "recip_rank", "Rprec", "success.1", "bpref"}

    def mean(results: dict) -> dict[str, float]:
        return {m: statistics.fmean(v[m] for v in results.values()) for m in TREC_NAMES}

    def full() -> dict[str, float]:
        with open(qrels) as f:
            q = pytrec_eval.parse_qrel(f)
        with open(run) as f:
            r = pytrec_eval.parse_run(f)
        return mean(pytrec_eval.RelevanceEvaluator(q, names).evaluate(r))

    with open(qrels) as f:
        parsed_q = pytrec_eval.parse_qrel(f)
    with open(run) as f:
        parsed_r = pytrec_eval.parse_run(f)
    evaluator = pytrec_eval.RelevanceEvaluator(parsed_q, names)
    return full, lambda: mean(evaluator.evaluate(parsed_r))


def _ranx(qrels: Path, run: Path) -> Callable[[], dict[str, float]]:
    from ranx import Qrels, Run, evaluate

    def call() -> dict[str, float]:
        q = Qrels.from_file(str(qrels), kind="trec")
        r = Run.from_file(str(run), kind="trec")
        out = evaluate(q, r, RANX, save_results_in_run=False)
        return dict(zip(TREC_NAMES, (float(out[m]) for m in RANX), strict=True))

    return call


def _ir_measures(qrels: Path, run: Path) -> Callable[[], dict[str, float]]:
    import ir_measures

    measures = [ir_measures.parse_measure(m) for m in IR_MEASURES]

    def call() -> dict[str, float]:
        q = list(ir_measures.read_trec_qrels(str(qrels)))
        r = list(ir_measures.read_trec_run(str(run)))
        out = ir_measures.calc_aggregate(measures, q, r)
        return {t: float(out[m]) for t, m in zip(TREC_NAMES, measures, strict=True)}

    return call


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _contenders(qrels: Path, run: Path, config: dict) -> dict[str, tuple[Callable, str]]:
    tools = config["tools"]
    out: dict[str, tuple[Callable, str]] = {}
    devices = ["cpu"] + (["cuda"] if config["device"] == "cuda" and torch.cuda.is_available() else [])
    for device in devices:
        out[f"torchrank evaluate (process, {device})"] = (_torchrank_process(qrels, run, device), "torchrank")
        out[f"torchrank score_run ({device})"] = (_torchrank_inprocess(qrels, run, device), "torchrank")
    binary = find_trec_eval() if "trec_eval" in tools else None
    if binary is not None:
        out["trec_eval (C binary): read + evaluate"] = (_trec_eval_binary(binary, qrels, run), "trec_eval")
    if ("pytrec_eval" in tools and _version("pytrec-eval-terrier")) or _version("pytrec-eval"):
        full, evaluation = _pytrec_eval(qrels, run)
        out["trec_eval (pytrec_eval): read + evaluate"] = (full, "pytrec_eval")
        out["trec_eval (pytrec_eval): evaluate only"] = (evaluation, "pytrec_eval")
    if "ranx" in tools and _version("ranx"):
        out["ranx: read + evaluate"] = (_ranx(qrels, run), "ranx")
    if "ir_measures" in tools and _version("ir-measures"):
        out["ir_measures: read + evaluate"] = (_ir_measures(qrels, run), "ir_measures")
    return out


def measure(config: dict) -> list[dict]:
    """Generate the files, check every contender's means against torchrank's, then time them.

    Returns records ``{"workload": "cli", "library", "params", "median_s", "iqr_s", "note"}``.
    """
    config = {**DEFAULTS, **config}
    params = {k: config[k] for k in ("queries", "docs", "judged", "seed")}
    with tempfile.TemporaryDirectory(prefix="torchrank_bench_cli_") as folder:
        qrels, run = generate(Path(folder), config["queries"], config["docs"], config["judged"], config["seed"])
        contenders = _contenders(qrels, run, config)
        reference = contenders["torchrank score_run (cpu)"][0]()
        for name, (call, _) in contenders.items():  # guard: the same numbers, or no timing at all
            got = call()
            for m in TREC_NAMES:
                if abs(got[m] - reference[m]) > 1e-3:
                    raise SystemExit(f"{name}: {m} = {got[m]:.6f}, torchrank: {reference[m]:.6f}; not timing")
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(config["repeats"]):  # round robin: every contender sees the same machine load
            for name, (call, _) in contenders.items():
                start = time.perf_counter()
                call()
                if "cuda" in name:
                    torch.cuda.synchronize()
                times[name].append(time.perf_counter() - start)
        size = run.stat().st_size + qrels.stat().st_size
    records = []
    for name, (_, library) in contenders.items():
        t = sorted(times[name])
        q1, q3 = (statistics.quantiles(t, n=4)[0], statistics.quantiles(t, n=4)[2]) if len(t) > 1 else (t[0], t[0])
        records.append(
            {
                "workload": "cli",
                "library": library,
                "contender": name,
                "params": {**params, "measures": TREC_NAMES, "file_bytes": size},
                "median_s": statistics.median(t),
                "iqr_s": q3 - q1,
                "times_s": t,
                "note": "end to end: read qrels + run from disk, parse, evaluate 10 measures, means"
                + (f"; {_describe(find_trec_eval())}" if library == "trec_eval" else ""),
            }
        )
    return records


def _describe(binary: Path | None) -> str:
    """The trec_eval binary as a note: path, version and sha256, or that none was found."""
    if binary is None:
        return "no trec_eval binary found (python -m benchmarks.get_trec_eval fetches one)"
    digest = hashlib.sha256(binary.read_bytes()).hexdigest()
    return f"{trec_eval_version(binary)}, {binary.name} sha256 {digest[:16]}"


def _metadata() -> dict:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "versions": {n: _version(n) for n in ("torch", "numpy", "pytrec-eval-terrier", "ranx", "ir-measures")},
        "trec_eval_binary": _describe(find_trec_eval()),
    }


def _markdown(records: list[dict], meta: dict) -> str:
    base = next(r["median_s"] for r in records if r["contender"] == "torchrank evaluate (process, cpu)")
    p = records[0]["params"]
    lines = [
        "# `torchrank evaluate` against the trec_eval binary, pytrec_eval, ranx and ir_measures",
        "",
        f"{p['queries']:,} queries x {p['docs']:,} documents ({p['queries'] * p['docs']:,} run lines) + "
        f"{p['judged']} judged documents per query, {p['file_bytes'] / 2**20:.0f} MiB; 10 measures "
        f"({', '.join(p['measures'])}); times from files on disk to means. `python -m benchmarks.bench_cli`, "
        f"commit {meta['commit'][:10]}, {meta['cpu_count']} CPUs, load average {meta['load_average']}.",
        "",
        "| contender | median | IQR | vs `torchrank evaluate` |",
        "|---|---|---|---|",
    ]
    for r in records:
        lines.append(f"| {r['contender']} | {r['median_s']:.2f} s | {r['iqr_s']:.2f} s | {r['median_s'] / base:.2f}x |")
    lines += [
        "",
        "Every contender's 10 means agreed with torchrank's (to 1e-3) before timing. trec_eval binary: "
        f"{meta['trec_eval_binary']}. pytrec_eval runs trec_eval's C evaluation behind Python readers "
        "(`evaluate only`: the C evaluation alone, files already parsed).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    config = dict(SMOKE if args.smoke else DEFAULTS, device=args.device)
    if args.repeats:
        config["repeats"] = args.repeats
    records = measure(config)
    meta = _metadata()
    out = args.out or RESULTS / ("cli_cpu_smoke.json" if args.smoke else "cli_cpu.json")
    out.write_text(json.dumps({"metadata": meta, "records": records}, indent=2) + "\n")
    out.with_suffix(".md").write_text(_markdown(records, meta))
    print(out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
