"""torchrank.losses against allRank 1.4.3 itself on random padded batches (skipped where allRank is not installed:
``pip install --no-deps allRank==1.4.3``), and the losses benchmark's smoke run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import torchrank.losses as L

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `pytest` (not `python -m pytest`) leaves the repository root off the path
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import bench_losses  # noqa: E402

needs_allrank = pytest.mark.skipif(importlib.util.find_spec("allrank") is None, reason="allRank not installed")


@pytest.fixture(scope="module")
def allrank():
    return bench_losses.import_allrank()


@needs_allrank
def test_allrank_stand_in_modules_do_not_outlive_its_import(allrank) -> None:
    # Lightning imports gcsfs when it finds one: an empty stand-in left behind broke its checkpointing
    for name in ("gcsfs", "torchvision"):
        if name in sys.modules:  # only the real package, which has a file
            assert getattr(sys.modules[name], "__file__", None), f"stand-in {name} left in sys.modules"


def padded_batch(seed: int, b: int = 5, n: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """allRank's layout: padding at the end of each list, label -1; every list has a positive label."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(b, n, generator=g)
    labels = torch.randint(0, 5, (b, n), generator=g).float()
    lengths = torch.randint(2, n + 1, (b,), generator=g)
    labels[torch.arange(n) >= lengths.unsqueeze(1)] = -1
    labels[:, 0] = 3
    return scores, labels


@needs_allrank
@pytest.mark.parametrize("seed", [0, 1])
def test_ndcg_losses_match_allrank_on_padded_batches(allrank, seed: int) -> None:
    scores, labels = padded_batch(seed)
    mask = labels >= 0
    for temperature in (1.0, 0.3):
        for k in (None, 4):
            ours = L.neural_ndcg(scores, labels, mask, temperature=temperature, k=k, sinkhorn_iterations=50)
            theirs = allrank.neuralNDCG(scores, labels, temperature=temperature, k=k)
            assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)
            # allRank's transposed variant runs the same row-final Sinkhorn: its value is the untransposed one at
            # any iteration count. torchrank's ends on a column normalisation: the same only once Sinkhorn converged
            theirs_t = allrank.neuralNDCG_transposed(scores, labels, temperature=temperature, k=k)
            assert ours.item() == pytest.approx(theirs_t.item(), abs=1e-5)
            ours_t = L.neural_ndcg(
                scores, labels, mask, temperature=temperature, k=k, sinkhorn_iterations=50, transposed=True
            )
            assert ours_t.item() == pytest.approx(theirs_t.item(), abs=1e-3)
        ours = L.approx_ndcg(scores, labels, mask, temperature=temperature)
        assert ours.item() == pytest.approx(
            allrank.approxNDCGLoss(scores, labels, alpha=1 / temperature).item(), abs=1e-5
        )


@needs_allrank
@pytest.mark.parametrize("seed", [0, 1])
def test_pairwise_and_listwise_losses_match_allrank_on_padded_batches(allrank, seed: int) -> None:
    scores, labels = padded_batch(seed)
    mask = labels >= 0
    schemes = {
        "ndcg_loss2": "ndcgLoss2_scheme",
        "ndcg_loss2pp": "ndcgLoss2PP_scheme",
        "lambdarank": "lambdaRank_scheme",
    }
    for ours_name, scheme in schemes.items():
        for k in (None, 5):
            ours = L.lambda_loss(scores, labels, mask, weighting=ours_name, k=k, sigma=1.5, reduction="sum")
            theirs = allrank.lambdaLoss(scores, labels, weighing_scheme=scheme, k=k, sigma=1.5)
            assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)
    assert L.listnet(scores, labels, mask).item() == pytest.approx(allrank.listNet(scores, labels).item(), rel=1e-5)
    for i in range(scores.shape[0]):  # allRank's rankNet averages the batch's pairs: compare list by list
        ours = L.ranknet(scores[i : i + 1], labels[i : i + 1], mask[i : i + 1])
        assert ours.item() == pytest.approx(allrank.rankNet(scores[i : i + 1], labels[i : i + 1]).item(), rel=1e-5)
    distinct = torch.argsort(torch.rand(scores.shape, generator=torch.Generator().manual_seed(seed)), 1).float()
    distinct[~mask] = -1  # no tied labels: allRank's random tie order cannot matter
    ours = L.listmle(scores, distinct, mask, ties="first")
    assert ours.item() == pytest.approx(allrank.listMLE(scores, distinct).item(), rel=1e-5)


def test_benchmark_smoke() -> None:
    """One case in its own subprocess, through measure(); records complete."""
    records = bench_losses.measure({"smoke": True, "losses": ["approx_ndcg"], "libraries": ["torchrank"]})
    timed = [r for r in records if "median_s" in r]
    assert [r["library"] for r in timed] == ["torchrank"]
    (ours,) = timed
    assert ours["median_s"] > 0 and ours["peak_mem_mb"] is not None and ours["role"] == "primary"
    assert ours["workload"] == "approx_ndcg B=8 N=16" and ours["params"]["N"] == 16
    assert next(r["name"] for r in records if r["workload"] == "targets").startswith("approx_ndcg at B=8, N=16")


@needs_allrank
@pytest.mark.parametrize("loss", ["neural_ndcg", "approx_ndcg", "lambda_loss", "listnet", "ranknet"])
def test_benchmark_guard_accepts_allrank_and_refuses_a_mismatch(loss: str) -> None:
    (call, _), *_ = bench_losses.CALLS[loss]["allrank"]
    case = {
        "library": "allrank",
        "call": call,
        "n": 16,
        "batch_size": 8,
        "num_labels": 5,
        "seed": 0,
        "threads": 1,
        "device": "cpu",
        "timing": {"repeats": 1, "min_run_time": 0.0},
    }
    result = {**bench_losses.run_case(case), "rounds": 1}
    scores, labels = bench_losses.make_inputs(8, 16, 5, 0, "cpu")
    reference = bench_losses.comparable_torchrank_value(loss, scores, labels)
    args = ("w", "allrank", call, "incumbent", {"loss": loss, "N": 16}, result, loss)
    assert bench_losses._record(*args, reference, 1e-4)["guard"]["relative"] < 1e-4
    with pytest.raises(RuntimeError, match="relative difference"):
        bench_losses._record(*args, reference * 1.01, 1e-4)
