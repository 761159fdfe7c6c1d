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


def test_benchmark_smoke(tmp_path: Path) -> None:
    """One case in its subprocess, records complete; with allRank, its value guarded against torchrank's."""
    config = {"smoke": True, "losses": ["approx_ndcg"], "libraries": ["torchrank", "allrank"]}
    records = bench_losses.measure(config)
    timed = [r for r in records if "median_s" in r]
    assert {r["library"] for r in timed} >= {"torchrank"}
    for r in timed:
        assert r["median_s"] > 0 and r["peak_mem_mb"] is not None
        assert r["workload"] == "approx_ndcg B=8 N=16" and r["params"]["N"] == 16
    if importlib.util.find_spec("allrank") is not None:
        (theirs,) = [r for r in timed if r["library"] == "allrank"]
        assert theirs["guard"]["compared"] and theirs["guard"]["relative"] < 1e-4
    else:
        assert any(r.get("skipped") for r in records if r["library"] == "allrank")
