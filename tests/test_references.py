"""Agreement with independent implementations: scikit-learn, ranx, torchmetrics and scipy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchrank.functional as F


def _graded(seed: int, q: int = 200, n: int = 25, levels: int = 4, coarse: bool = False):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(q, n, generator=g, dtype=torch.float64)
    if coarse:  # many tied scores
        preds = torch.round(preds * 4) / 4
    target = torch.randint(0, levels, (q, n), generator=g).to(torch.float64)
    target[0] = 0  # a query without relevant items
    return preds, target


@pytest.mark.parametrize("k", [1, 3, 10, None])
@pytest.mark.parametrize("coarse", [False, True], ids=["distinct", "ties"])
def test_ndcg_equals_sklearn(k, coarse):
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    preds, target = _graded(0, coarse=coarse)
    ours = F.ndcg(preds, target, k=k, reduction="none")
    theirs = [sklearn_metrics.ndcg_score(target[i : i + 1].numpy(), preds[i : i + 1].numpy(), k=k)
              for i in range(preds.shape[0])]
    torch.testing.assert_close(ours, torch.tensor(theirs, dtype=torch.float64))


@pytest.mark.parametrize("k", [1, 5, 20])
def test_dcg_equals_sklearn(k):
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    preds, target = _graded(1, coarse=True)
    theirs = sklearn_metrics.dcg_score(target.numpy(), preds.numpy(), k=k)
    assert F.dcg(preds, target, k=k).item() == pytest.approx(theirs)


def _ranx_scores(preds, target, metrics):
    ranx = pytest.importorskip("ranx")
    qrels = {f"q{i}": {f"d{j}": int(v) for j, v in enumerate(row) if v > 0} for i, row in enumerate(target.tolist())}
    run = {f"q{i}": {f"d{j}": float(v) for j, v in enumerate(row)} for i, row in enumerate(preds.tolist())}
    keep = [q for q, rel in qrels.items() if rel]  # ranx needs a relevant item per query
    qrels_obj = ranx.Qrels({q: qrels[q] for q in keep})
    run_obj = ranx.Run({q: run[q] for q in keep})
    ranx.evaluate(qrels_obj, run_obj, metrics, return_mean=False)
    rows = [int(q[1:]) for q in keep]
    return rows, {m: torch.tensor([run_obj.scores[m][q] for q in keep], dtype=torch.float64) for m in metrics}


def test_against_ranx():
    preds, target = _graded(2, q=100)
    binary = (target > 0).to(torch.float64)
    rows, scores = _ranx_scores(preds, target, ["f1@5", "ndcg_burges@10", "dcg_burges@10", "dcg@10", "mrr@5"])
    torch.testing.assert_close(F.f1(preds, target, k=5, reduction="none")[rows], scores["f1@5"])
    torch.testing.assert_close(
        F.ndcg(preds, target, k=10, gain="exponential", reduction="none")[rows], scores["ndcg_burges@10"]
    )
    torch.testing.assert_close(
        F.dcg(preds, target, k=10, gain="exponential", reduction="none")[rows], scores["dcg_burges@10"]
    )
    torch.testing.assert_close(F.dcg(preds, target, k=10, reduction="none")[rows], scores["dcg@10"])
    torch.testing.assert_close(F.reciprocal_rank(preds, target, k=5, reduction="none")[rows], scores["mrr@5"])
    rows, scores = _ranx_scores(preds, binary, ["rbp.95", "rbp.5"])
    torch.testing.assert_close(F.rbp(preds, binary, p=0.95, reduction="none")[rows], scores["rbp.95"])
    torch.testing.assert_close(F.rbp(preds, binary, p=0.5, reduction="none")[rows], scores["rbp.5"])


TORCHMETRICS_PAIRS = [
    ("retrieval_normalized_dcg", F.ndcg, {"k": 5}, {"top_k": 5}),
    ("retrieval_reciprocal_rank", F.reciprocal_rank, {"k": 10}, {"top_k": 10}),
    ("retrieval_hit_rate", F.hit_rate, {"k": 3}, {"top_k": 3}),
    ("retrieval_recall", F.recall, {"k": 4}, {"top_k": 4}),
    ("retrieval_precision", F.precision, {"k": 4}, {"top_k": 4}),
    ("retrieval_r_precision", F.r_precision, {}, {}),
    ("retrieval_average_precision", F.average_precision, {}, {}),  # whole list: denominators agree
]


@pytest.mark.parametrize(
    ("tm_name", "fn", "ours_kw", "tm_kw"), TORCHMETRICS_PAIRS, ids=[p[0] for p in TORCHMETRICS_PAIRS]
)
def test_against_torchmetrics_functionals(tm_name, fn, ours_kw, tm_kw):
    tm = pytest.importorskip("torchmetrics.functional.retrieval")
    preds, target = _graded(3, q=60)
    target_in = target if tm_name == "retrieval_normalized_dcg" else (target > 0).to(torch.long)
    theirs = torch.stack([getattr(tm, tm_name)(p, t, **tm_kw) for p, t in zip(preds, target_in, strict=True)])
    torch.testing.assert_close(fn(preds, target_in, reduction="none", **ours_kw), theirs.to(torch.float64))


def test_average_precision_at_k_denominator_differs_from_torchmetrics():
    """trec_eval's map_cut divides by all relevant items; torchmetrics by those in the top k (documented)."""
    tm = pytest.importorskip("torchmetrics.functional.retrieval")
    preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
    target = torch.tensor([1, 0, 0, 1])
    assert F.average_precision(preds, target, k=2).item() == pytest.approx(0.5)
    assert tm.retrieval_average_precision(preds, target, top_k=2).item() == pytest.approx(1.0)


@pytest.mark.parametrize("coarse_labels", [False, True])
def test_kendall_tau_b_equals_scipy_with_distinct_scores(coarse_labels):
    stats = pytest.importorskip("scipy.stats")
    g = torch.Generator().manual_seed(4)
    preds = torch.rand(50, 12, generator=g, dtype=torch.float64)
    if coarse_labels:
        target = torch.randint(0, 3, (50, 12), generator=g).to(torch.float64)
    else:  # distinct labels: a permutation per query
        target = torch.argsort(torch.rand(50, 12, generator=g), 1).to(torch.float64)
    theirs = [stats.kendalltau(p.numpy(), t.numpy()).statistic for p, t in zip(preds, target, strict=True)]
    theirs = torch.tensor(theirs, dtype=torch.float64)
    torch.testing.assert_close(F.kendall_tau(preds, target, reduction="none"), theirs)
    distance = F.kendall_tau(preds, target, distance=True, reduction="none")
    if not coarse_labels:  # no ties at all: distance = (1 - tau) / 2
        torch.testing.assert_close(distance, (1 - theirs) / 2)


def test_kendall_distance_counts_discordant_pairs():
    preds = torch.tensor([4.0, 3.0, 2.0, 1.0])
    target = torch.tensor([1, 3, 2, 0])  # pairs ranked wrongly: (1,3), (1,2) of 6 ordered pairs
    assert F.kendall_tau(preds, target, distance=True).item() == pytest.approx(2 / 6)
    assert np.isclose(F.kendall_tau(preds, target).item(), (4 - 2) / 6)
