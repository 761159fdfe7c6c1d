"""precision_recall_curve and recall_at_fixed_precision against torchmetrics' retrieval forms (1.9) on random
queries with distinct scores (where torchmetrics' order is defined), and P@k / R@k under ties."""

from __future__ import annotations

import pytest
import torch
from torchmetrics.functional.retrieval import retrieval_precision_recall_curve
from torchmetrics.retrieval import RetrievalRecallAtFixedPrecision

import torchrank.functional as F


def _random(seed: int, rows: int = 20, items: int = 9):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(rows, items, generator=g)  # distinct
    target = torch.randint(0, 2, (rows, items), generator=g)
    target[:, 0] = 1  # every query has a relevant item (torchmetrics' empty rule lives in its class)
    return preds, target


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("max_k", [None, 4, 12])
def test_curve_per_query_equals_torchmetrics(seed: int, max_k: int | None) -> None:
    preds, target = _random(seed)
    p, r, top_k = F.precision_recall_curve(preds, target, max_k, reduction="none")
    for q in range(preds.shape[0]):
        tp, tr, tk = retrieval_precision_recall_curve(preds[q], target[q], max_k=max_k)
        torch.testing.assert_close(p[q], tp, check_dtype=False)
        torch.testing.assert_close(r[q], tr, check_dtype=False)
        assert torch.equal(top_k, tk)


def test_curve_is_precision_and_recall_at_each_k_under_ties() -> None:
    g = torch.Generator().manual_seed(4)
    preds, target = torch.randint(0, 3, (15, 8), generator=g).float(), torch.randint(0, 3, (15, 8), generator=g)
    p, r, _ = F.precision_recall_curve(preds, target, 5)
    for k in range(1, 6):
        torch.testing.assert_close(p[k - 1], F.precision(preds, target, k=k))
        torch.testing.assert_close(r[k - 1], F.recall(preds, target, k=k))


@pytest.mark.parametrize("min_precision", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_recall_at_fixed_precision_equals_torchmetrics(min_precision: float) -> None:
    preds, target = _random(7)
    metric = RetrievalRecallAtFixedPrecision(min_precision=min_precision, max_k=6)
    metric.update(preds.reshape(-1), target.reshape(-1), torch.arange(preds.shape[0]).repeat_interleave(9))
    want_recall, want_k = metric.compute()
    got_recall, got_k = F.recall_at_fixed_precision(preds, target, min_precision, 6)
    torch.testing.assert_close(got_recall, want_recall, check_dtype=False)
    assert int(got_k) == int(want_k)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="`max_k`"):
        F.precision_recall_curve(torch.rand(4), torch.ones(4), indexes=torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="`min_precision`"):
        F.recall_at_fixed_precision(torch.rand(2, 3), torch.ones(2, 3), 1.5)
