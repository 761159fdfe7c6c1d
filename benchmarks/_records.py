"""Benchmark records, run metadata and results files.

Every workload returns a list of records, one per (workload, contender)::

    {"workload": "ndcg@10 10000x100 float32 graded",   # records with the same workload are compared
     "library": "torchrank", "name": "F.ndcg(k=10)",   # who, and which call
     "params": {...},                                  # the workload's parameters
     "median_s": 0.05, "iqr_s": 0.002,                 # seconds per call
     "peak_mem_mb": None,                              # CUDA: peak extra memory of one call; None on CPU
     # optional, added by the harness's own workloads:
     "role": "primary" | "variant" | "incumbent" | "conversion",
     "kind": "kernels", "group": "ndcg@k 10000x100", "q1_s", "q3_s", "repeats", "method", "scaled",
     "guard": {...}, "description": "...", "extra": {...}}

``benchmarks.summary`` reads them: torchrank's time is its ``primary`` record (without roles: its fastest record),
the best incumbent is the fastest ``incumbent`` record (without roles: any other library's record).
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

import torchrank

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
REQUIRED = ("workload", "library", "name", "params", "median_s", "iqr_s", "peak_mem_mb")
# primary: torchrank's headline call; variant: another torchrank call; incumbent: another library doing the same task;
# conversion: building another library's input from tensors; partial: part of an incumbent's task (not compared)
ROLES = ("primary", "variant", "incumbent", "conversion", "partial")
# distributions whose versions every results file records (None when not installed)
DISTRIBUTIONS = {
    "torch": "torch",
    "torchmetrics": "torchmetrics",
    "torcheval": "torcheval",
    "pytrec_eval": "pytrec-eval-terrier",
    "ranx": "ranx",
    "numba": "numba",
    "numpy": "numpy",
    "allrank": "allRank",
    "ir_measures": "ir-measures",
    "lightning": "lightning",
    "faiss": "faiss-cpu",
    "sentence_transformers": "sentence-transformers",
}


def record(
    workload: str, library: str, name: str, params: dict[str, Any], timing: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    """A record from a workload's identity and a timing dict of :func:`benchmarks._timing.measure_contenders`."""
    out: dict[str, Any] = {"workload": workload, "library": library, "name": name, "params": params}
    out.update(timing)
    out.setdefault("peak_mem_mb", None)
    out.update(fields)
    return out


def normalize(records: list[dict[str, Any]], kind: str, roles: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Bring a module's records to this format in place: the ``kind``; ``name`` from ``contender`` (the key
    ``bench_cli`` uses); ``peak_mem_mb`` None when not measured; and, for records without a role, the role that
    the config's ``roles`` mapping (record name -> role) gives them."""
    for r in records:
        r.setdefault("kind", kind)
        r.setdefault("params", {})
        if "name" not in r and "contender" in r:
            r["name"] = r["contender"]
        if "skipped" not in r:
            r.setdefault("peak_mem_mb", None)
        if r.get("role") is None and roles and r.get("name") in roles:
            r["role"] = roles[r["name"]]
    return records


def validate_records(records: list[dict[str, Any]], source: str) -> None:
    """Refuse records a summary could not read: missing keys, a non-positive time, an unknown role."""
    for i, r in enumerate(records):
        missing = [key for key in REQUIRED if key not in r]
        if missing:
            raise ValueError(f"{source}: record {i} ({r.get('workload')!r}, {r.get('name')!r}) lacks {missing}")
        median = r["median_s"]
        if not isinstance(median, (int, float)) or not median > 0:
            raise ValueError(f"{source}: record {i} ({r['workload']!r}, {r['name']!r}): median_s={median!r}")
        if r.get("role") is not None and r["role"] not in ROLES:
            raise ValueError(f"{source}: record {i}: role {r['role']!r} not in {ROLES}")


# ----------------------------------------------------------------------------------------------- metadata
def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.rstrip("\n") if done.returncode == 0 else None  # porcelain lines start with a space


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return platform.processor() or None


def source_digest() -> str:
    """SHA-256 over torchrank's ``*.py`` files (path and content): ties the figures to the exact code measured,
    uncommitted changes included."""
    digest = hashlib.sha256()
    package = Path(torchrank.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def device_name(device: torch.device) -> str:
    """``torch.cuda.get_device_name`` on CUDA; the CPU model otherwise."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return _cpu_model() or "cpu"


def _scheduling() -> dict[str, Any]:
    """The process's niceness and, on Linux, its autogroup's (what decides its CPU share on a shared machine)."""
    out: dict[str, Any] = {"nice": os.nice(0) if hasattr(os, "nice") else None}
    try:
        out["autogroup"] = Path("/proc/self/autogroup").read_text().strip()
    except OSError:
        out["autogroup"] = None
    return out


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def metadata(device: torch.device, threads: int) -> dict[str, Any]:
    """Commit, versions, threads, device and machine: what a reader needs to reproduce or discount a figure."""
    status = _git("status", "--porcelain", "--", "torchrank")
    meta: dict[str, Any] = {
        "git_commit": _git("rev-parse", "HEAD"),
        "torchrank_dirty": None if status is None else bool(status),
        "torchrank_modified_files": [line[3:] for line in status.splitlines()] if status else [],
        "torchrank_source_sha256": source_digest(),
        "torchrank": torchrank.__version__,
        "python": platform.python_version(),
        "versions": {name: _version(dist) for name, dist in DISTRIBUTIONS.items()},
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "torch_num_threads": torch.get_num_threads(),
        "scheduling": _scheduling(),
        "device": device.type,
        "device_name": device_name(device),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        meta["cuda"] = {"version": torch.version.cuda, "memory_gb": round(props.total_memory / 1e9, 1),
                        "capability": f"{props.major}.{props.minor}", "multiprocessors": props.multi_processor_count}
    return meta


# ----------------------------------------------------------------------------------------------- files
def results_path(out_dir: Path, config_name: str, device: torch.device, smoke: bool) -> Path:
    """``<out>/<config>_<device>.json``; smoke runs get a ``_smoke`` suffix so they never replace real figures."""
    return out_dir / f"{config_name}_{device.type}{'_smoke' if smoke else ''}.json"


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=_jsonable) + "\n")


def _jsonable(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.tolist()
    if isinstance(x, (Path, torch.device, torch.dtype)):
        return str(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
