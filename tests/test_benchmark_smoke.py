"""The benchmark harness runs end to end on CPU in smoke mode (configs/bench/smoke.yaml, well under a minute).

One subprocess run of ``python -m benchmarks.run --config configs/bench/smoke.yaml`` (shared by the tests of this
module) must write a results JSON with the expected records, correctness guards that ran on every compared
contender, the run's metadata, and the generated summary (markdown table and plot). Plus unit tests of the
summary's reading rules and of the harness's refusal of malformed records and configs.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import summary
from benchmarks._records import validate_records
from benchmarks.run import KINDS, load_config, resolve_sections

REPO_ROOT = Path(__file__).resolve().parents[1]
SMOKE = REPO_ROOT / "configs" / "bench" / "smoke.yaml"
FAMILIES = ("ndcg@10", "map@10", "P@10", "set of 8")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--config", str(SMOKE), "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((out / "smoke_cpu_smoke.json").read_text()), out


def _timed(payload: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in payload["records"] if r.get("kind") == kind and "skipped" not in r]


def test_smoke_metadata(smoke_run: tuple[dict[str, Any], Path]) -> None:
    payload, _ = smoke_run
    meta = payload["metadata"]
    assert payload["smoke"] is True and payload["device"] == "cpu"
    assert meta["device"] == "cpu" and meta["device_name"] and meta["threads"] == 1
    assert meta["versions"]["torch"] and meta["versions"]["torchmetrics"]
    assert meta["date"] and meta["cpu_count"] >= 1
    assert len(meta["torchrank_source_sha256"]) == 64


def test_smoke_kernels_records_and_guards(smoke_run: tuple[dict[str, Any], Path]) -> None:
    payload, _ = smoke_run
    records = _timed(payload, "kernels")
    validate_records(records, "smoke")
    for dtype in ("float32", "bfloat16"):
        for family in FAMILIES:
            workload = f"{family} 60x30 {dtype} graded"
            mine = [r for r in records if r["workload"] == workload]
            assert [r["role"] for r in mine].count("primary") == 1, workload
            libraries = {r["library"] for r in mine}
            assert "torchrank" in libraries
            if importlib.util.find_spec("pytrec_eval"):
                assert "pytrec_eval" in libraries, workload
            if importlib.util.find_spec("torchmetrics") and (family, dtype) != ("map@10", "bfloat16"):
                assert "torchmetrics" in libraries, workload
            for r in mine:  # the guard ran before and after timing, and agreed
                assert r["guard"]["checked"] == ["warm-up call", "last timed call"], (workload, r["name"])
                assert r["guard"]["max_outside"] <= r["guard"]["tolerance"]
                assert r["median_s"] > 0 and r["repeats"] >= 1
    if importlib.util.find_spec("torcheval"):
        assert any(r["library"] == "torcheval" for r in records if r["workload"].startswith("P@10"))
    # torchmetrics' AP@k is another measure: compared only tie-free (float32), skipped with the reason under ties
    skipped = [r for r in payload["records"] if "skipped" in r and r["workload"] == "map@10 60x30 bfloat16 graded"]
    if importlib.util.find_spec("torchmetrics"):
        assert skipped and "ties" in skipped[0]["skipped"]
    # ranx is left out of the smoke grid (a cold numba cache compiles for ~100 s)
    assert not any(r["library"] == "ranx" for r in records)
    assert any(r["role"] == "conversion" for r in records)


def test_smoke_metrics_records(smoke_run: tuple[dict[str, Any], Path]) -> None:
    payload, _ = smoke_run
    records = _timed(payload, "metrics")
    names = {r["name"] for r in records}
    assert {"NDCG(k=10)", "RankingMetrics(8 measures)", "RetrievalNormalizedDCG(top_k=10)",
            "MetricCollection(8 classes)", "compat.RetrievalNormalizedDCG(top_k=10)"} <= names
    for r in records:
        assert r["guard"]["max_outside"] <= r["guard"]["tolerance"]
        assert r["extra"]["state_bytes"]["after_4_updates"] > 0
    dense = next(r for r in records if r["name"] == "NDCG(k=10)")
    states = dense["extra"]["state_bytes"]
    assert states["after_10_updates"] == states["after_4_updates"]  # dense state does not grow


def test_smoke_other_kinds_when_present(smoke_run: tuple[dict[str, Any], Path]) -> None:
    payload, _ = smoke_run
    runs = {r["kind"]: r for r in payload["runs"]}
    assert {"kernels", "metrics"} <= set(runs)
    for kind in ("losses", "cli"):
        if kind in runs and "skipped" not in runs[kind]:
            assert _timed(payload, kind), kind


def test_smoke_summary_written(smoke_run: tuple[dict[str, Any], Path]) -> None:
    _, out = smoke_run
    text = (out / "SUMMARY.md").read_text()
    assert "| workload | torchrank | time | best incumbent | time | ratio |" in text
    assert "ndcg@10 60x30 float32 graded" in text and "epoch set of 8" in text
    assert (out / "summary.png").stat().st_size > 1000
    assert (out / "smoke_cpu_smoke.md").exists()


# ----------------------------------------------------------------------------------------------- units
def _rec(workload: str, library: str, name: str, median: float, role: str | None = None) -> dict[str, Any]:
    r = {"workload": workload, "library": library, "name": name, "params": {}, "median_s": median, "iqr_s": None,
         "peak_mem_mb": None}
    return r if role is None else {**r, "role": role}


def test_summary_picks_primary_and_fastest_incumbent() -> None:
    records = [_rec("w", "torchrank", "fast variant", 0.5, "variant"), _rec("w", "torchrank", "main", 1.0, "primary"),
               _rec("w", "a", "x", 4.0, "incumbent"), _rec("w", "b", "y", 2.0, "incumbent"),
               _rec("w", "b", "conv", 0.1, "conversion")]
    (c,) = summary.comparisons({"device": "cpu", "metadata": {}, "records": records})
    assert c.torchrank["name"] == "main" and c.best["name"] == "y" and c.ratio == pytest.approx(2.0)
    assert summary.fmt_ratio(0.5) == "**0.5x (slower)**"


def test_summary_reads_records_without_roles() -> None:
    # other modules' records (bench_losses, bench_cli) may carry no role
    records = [_rec("l", "torchrank", "a", 2.0), _rec("l", "torchrank", "b", 1.0), _rec("l", "allRank", "c", 0.5)]
    (c,) = summary.comparisons({"device": "cpu", "metadata": {}, "records": records})
    assert c.torchrank["name"] == "b" and c.ratio == pytest.approx(0.5)


def test_malformed_records_are_refused() -> None:
    with pytest.raises(ValueError, match="lacks"):
        validate_records([{"workload": "w", "library": "torchrank"}], "test")
    with pytest.raises(ValueError, match="median_s"):
        validate_records([_rec("w", "torchrank", "n", 0.0)], "test")


def test_smoke_overrides_merge() -> None:
    config = load_config(REPO_ROOT / "configs" / "bench" / "kernels.yaml")
    (full,) = resolve_sections(config, "cpu", 1, smoke=False)
    (tiny,) = resolve_sections(config, "cpu", 1, smoke=True)
    assert full["shapes"] != tiny["shapes"] and full["smoke"] is False and tiny["smoke"] is True
    assert tiny["timing"]["slow_threshold_s"] == full["timing"]["slow_threshold_s"]  # timing merged key by key
    assert "ranx" not in tiny["incumbents"]


def test_missing_incumbent_is_skipped_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import bench_functional

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ranx" else real(name, *a))
    available, skipped = bench_functional.library_availability(["pytrec_eval", "ranx"])
    assert available == {"pytrec_eval": importlib.util.find_spec("pytrec_eval") is not None, "ranx": False}
    assert skipped["ranx"] == "not installed"
    with pytest.raises(ValueError, match="unknown incumbent"):
        bench_functional.library_availability(["trec_eval_9000"])


def test_all_config_includes_every_grid() -> None:
    config = load_config(REPO_ROOT / "configs" / "bench" / "all.yaml")
    kinds = [s["kind"] for s in resolve_sections(config, "cpu", 1, smoke=False)]
    assert kinds == ["kernels", "metrics", "losses", "cli", "ids", "recommenders", "training_epoch", "search"]
    assert set(kinds) == set(KINDS)  # every workload kind the harness knows


def test_compare_commits_times_both_trees_cell_by_cell() -> None:
    """benchmarks/compare_commits.py on one tree against itself: a row per headline cell, each timed by both
    workers (distinct processes), and the summary line of the ratios."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.compare_commits", ".", ".", "--rounds", "1", "--seconds", "0.01"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and " ms |" in line]
    assert len(rows) == 4  # NDCG@10 and the set of 8 on two shapes
    for row in rows:
        old, new, ratio = (cell.strip() for cell in row.strip("|").split("|")[1:])
        assert float(ratio) == pytest.approx(float(new.split()[0]) / float(old.split()[0]), rel=0.02)
    assert "4 cells: geometric mean" in done.stdout


def test_search_benchmark_contenders_agree(tmp_path: Path) -> None:
    """bench_search's contenders on tiny data, in this process (its worker processes cost a torch import each): every
    top k passes the guard against F.search's, and a guard that should fail does."""
    import numpy as np

    from benchmarks import bench_search

    for name, tensor in zip(("queries", "corpus", "relevant"), bench_search.make_data(20, 3000, 16, 5, seed=0),
                            strict=True):
        np.save(tmp_path / f"{name}.npy", tensor.numpy())
    spec = {"folder": str(tmp_path), "k": 10, "threads": 1, "loop_chunk": 1000}
    found = {}
    for name in [*bench_search.SEARCH_CONTENDERS, "search_measures"]:
        if bench_search._available(name):
            call, summarise = bench_search._build(name, spec)
            found[name] = summarise(call())
    for name in set(found) - {"search", "search_measures"}:
        guard = bench_search._check_top_k(name, found[name], found["search"], 1e-4)
        assert guard["same_ids"] == 1.0
    assert set(found["search_measures"]) >= set(bench_search.MEASURES)
    shifted = {"scores": [[s + 0.01 for s in row] for row in found["search"]["scores"]], "ids": found["search"]["ids"]}
    with pytest.raises(AssertionError, match="disagrees"):
        bench_search._check_top_k("shifted", shifted, found["search"], 1e-4)


def test_search_benchmark_on_device_path_runs_on_cpu() -> None:
    """The GPU grid's in-process path (configs/bench/search_gpu.yaml), run here on CPU with tiny sizes: a floor and a
    search record, each with its ratio to the floor."""
    import torch

    from benchmarks import bench_search

    config = {**bench_search.DEFAULTS, "queries": 8, "corpus": 3000, "dim": 8, "k": 10, "repeats": 1,
              "dtype": "float16", "floor_chunk": 1000}
    records = bench_search.on_device(config, torch.device("cpu"))
    assert [r["role"] for r in records] == ["partial", "primary"]
    assert records[0]["extra"]["median_over_floor"] == 1.0 and records[1]["median_s"] > 0


def test_gpu_floor_long_lists_runs_on_cpu() -> None:
    """The GPU session's long-list part (benchmarks/gpu_floor.py), on CPU with tiny shapes and the torch backend: it
    checks the values against the numpy backend, then times NDCG@10, the sort, the top-k and the top-k with the pass
    exact ties need. Its exact-ties helper finds each row's tie group at the cut-off whole."""
    import torch

    from benchmarks import gpu_floor

    found = gpu_floor.long_lists(torch.device("cpu"), 1e10, 0.01, shapes=((30, 40), (3, 5000)), backends=("torch",))
    assert set(found) == {"30x40", "3x5000"}
    assert all(row["sort_s"] > 0 and row["topk10_exact_average_s"] > 0 for row in found.values())
    preds = torch.tensor([[5.0, 3.0, 3.0, 1.0, 3.0, 0.0]])  # the 2nd best score is shared by three items
    order, size, label_sum = gpu_floor.topk_with_boundary_group(preds, torch.tensor([[0, 1, 2, 0, 4, 1]]), 2)
    assert order[0, 0] == 0 and size.tolist() == [3] and label_sum.tolist() == [7]
