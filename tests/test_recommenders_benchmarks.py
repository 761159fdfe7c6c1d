"""The id-list and beyond-accuracy benchmarks (benchmarks/bench_ids.py, bench_recommenders.py) run end to end on
tiny sizes: their correctness guards pass and their records are complete (the figures live in benchmarks/results)."""

from __future__ import annotations

import pytest
import torch

from benchmarks import bench_ids, bench_recommenders
from benchmarks._records import validate_records

TINY_TIMING = {"min_run_time": 0.01, "rounds": 1}


def test_ids_benchmark_records() -> None:
    records = bench_ids.measure({
        "queries": 40, "k": 8, "max_relevant": [5], "items": 100, "labels": ["binary", "graded"],
        "catalogue_queries": 4, "catalogue_items": 300, "catalogue_k": 8, "timing": TINY_TIMING,
    })
    validate_records(records, "bench_ids")
    ids_records = [r for r in records if r["workload"].startswith("ids")]
    per_cell = 5 if bench_ids._compiled_matching() is not None else 4  # the compiled contender where numba imports
    assert len(ids_records) == 2 * per_cell and {r["role"] for r in ids_records} == {"primary", "variant"}
    assert all(r["guard"]["max_abs_diff"] <= 1e-6 for r in ids_records if r.get("guard"))
    catalogue = [r for r in records if r["workload"].startswith("catalogue")]
    assert len(catalogue) == 2 and catalogue[0]["extra"]["values"]["recall@8"] >= 0


@pytest.mark.parametrize("graded", [False, True])
def test_compiled_matching_contender_is_ids_to_dense(graded: bool) -> None:
    """The compiled contender times the same matching: repeated ids (ranked and relevant), padding anywhere and
    relevant ids outside the list give ids_to_dense's target and the same ideal labels (in another order)."""
    pytest.importorskip("numba")
    import torchrank.functional as F
    from benchmarks._compiled_matching import compiled_ids_to_dense

    g = torch.Generator().manual_seed(3)
    for _ in range(50):
        ranked, relevant = torch.randint(-1, 12, (6, 9), generator=g), torch.randint(-1, 12, (6, 7), generator=g)
        labels = torch.randint(0, 4, (6, 7), generator=g) if graded else None
        want, got = F.ids_to_dense(ranked, relevant, labels), compiled_ids_to_dense(ranked, relevant, labels)
        assert torch.equal(got["target"], want["target"]) and torch.equal(got["mask"], want["mask"])
        assert torch.equal(got["ideal_target"].sort(1).values, want["ideal_target"].sort(1).values)


def test_catalogue_workload_on_a_device_in_process() -> None:
    """The GPU form of the catalogue workload (scores made on the device, timed in this process) runs on CPU too:
    its records are complete and its values match the subprocess form's (the same seed and data)."""
    config = {**bench_ids.DEFAULTS, "catalogue_queries": 4, "catalogue_items": 300, "catalogue_k": 8}
    records = bench_ids._catalogue_on_device(config, torch.device("cpu"))
    validate_records(records, "bench_ids")
    assert [r["role"] for r in records] == ["primary", "variant"]
    measures = records[0]["extra"]
    assert measures["peak_extra_allocated_mb"] is None  # CUDA's allocator statistics only
    subprocess_values = bench_ids._catalogue(config)[0]["extra"]["values"]
    assert measures["values"] == pytest.approx(subprocess_values)


def test_beyond_accuracy_benchmark_records() -> None:
    records = bench_recommenders.measure({"updates": 4, "lists": 6, "k": 5, "items": 50, "dim": 4,
                                          "timing": {"slow_repeats": 1}})
    validate_records(records, "bench_recommenders")
    assert {r["params"]["class"] for r in records} == set(bench_recommenders.DEFAULTS["classes"])
    assert {r["library"] for r in records} == {"torchrank", "numpy"}


@pytest.mark.parametrize("lists", [[[0, 1, 2], [2, 3, 4]], [[4, 3, 2], [1, 0, 4]]])
def test_numpy_references_are_the_documented_formulas(lists: list[list[int]]) -> None:
    import numpy as np

    x = np.array(lists)
    assert bench_recommenders.np_coverage(x, 10) == len({i for row in lists for i in row}) / 10
    weights = np.bincount(x.ravel(), minlength=10) / np.sqrt(3)
    overlap = len(set(lists[0]) & set(lists[1])) / 3  # cosine of two binary vectors of 3 items
    assert bench_recommenders.np_personalization(x, 10) == pytest.approx(1 - overlap)
    assert ((weights**2).sum() - 2) / 2 == pytest.approx(overlap)
