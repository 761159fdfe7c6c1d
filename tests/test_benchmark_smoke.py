"""benchmarks/bench_functional.py runs end to end on a tiny workload and writes its ratios."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RATIO_FIELDS = [
    "torchmetrics_class_over_torchrank_ndcg10",
    "pytrec_eval_over_torchrank_ndcg10",
    "ranx_over_torchrank_ndcg10",
    "torchrank_7_over_torchrank_ndcg10",
]
LIBRARIES = {
    "torchmetrics": "torchmetrics_class_over_torchrank_ndcg10",
    "pytrec_eval": "pytrec_eval_over_torchrank_ndcg10",
    "ranx": "ranx_over_torchrank_ndcg10",
}

def _run(out: Path, *extra: str, timeout: float = 600) -> dict:  # a cold numba cache (ranx) compiles for a minute
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_functional", "--smoke", "--out", str(out), *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert out.with_suffix(".md").exists()
    return json.loads(out.read_text())


def _check_ratio_fields(result: dict) -> None:
    assert result["smoke"] is True
    assert result["metadata"]["device"] == "cpu"
    assert result["metadata"]["threads"] >= 1
    for workload in result["workloads"].values():
        for name in RATIO_FIELDS:
            assert name in workload["ratios"], name
        for target in workload["targets"]:
            assert target["holds"] in (True, False, None)


def test_smoke_run_writes_ratios(tmp_path: Path) -> None:
    result = _run(tmp_path / "x.json")
    _check_ratio_fields(result)
    (workload,) = result["workloads"].values()
    for library, ratio in LIBRARIES.items():
        installed = importlib.util.find_spec(library) is not None
        value = workload["ratios"][ratio]["ratio"]
        if installed:
            assert isinstance(value, float) and value > 0, (ratio, value)
        else:  # a missing package is skipped with a note, not a failure
            assert value is None and library in result["skipped"]
    ndcg = workload["contenders"]["torchrank.ndcg@10 ties=average"]
    assert ndcg["median_s"] > 0 and ndcg["repeats"] >= 1
    assert "torchrank.ndcg@10 ties=average" in workload["agreement"]


def test_smoke_run_without_comparison_libraries(tmp_path: Path) -> None:
    # the path taken when ranx / pytrec_eval / torchmetrics are not installed
    without = ["--without", "torchmetrics", "--without", "pytrec_eval", "--without", "ranx"]
    result = _run(tmp_path / "y.json", *without, timeout=30)
    _check_ratio_fields(result)
    assert set(result["skipped"]) == set(LIBRARIES)
    (workload,) = result["workloads"].values()
    for ratio in LIBRARIES.values():
        assert workload["ratios"][ratio]["ratio"] is None
        assert "not run" in workload["ratios"][ratio]["note"]
    assert workload["ratios"]["torchrank_7_over_torchrank_ndcg10"]["ratio"] > 0


def test_metrics_epoch_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "metrics.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_metrics", "--smoke", "--no-distributed", "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(out.read_text())
    assert set(report["timings"]) >= {"torchrank NDCG(k=10)", "torchmetrics RetrievalNormalizedDCG"}
    assert all(r["value"] > 0 for r in report["ratios"].values())
    assert report["agreement"] < 1e-4
