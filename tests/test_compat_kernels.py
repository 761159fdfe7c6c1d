"""The measure options that express torchmetrics' retrieval definitions (used by torchrank.compat), each against
torchmetrics 1.9's functional on the same queries (distinct scores), and against brute-force enumeration of tie
orders where torchmetrics' own value depends on its sort order: AP's ``denominator="found"``, precision's
``adaptive_k``, AUROC's ``k`` and ``max_fpr``."""

from __future__ import annotations

import itertools

import pytest
import torch
from torchmetrics.functional.retrieval import retrieval_auroc, retrieval_average_precision, retrieval_precision

import torchrank.functional as F
from torchrank.functional.backends import use_backend


def _queries(seed: int, rows: int = 12, items: int = 9, tied: bool = False):
    g = torch.Generator().manual_seed(seed)
    shape = (rows, items)
    preds = torch.randint(0, 4, shape, generator=g).float() / 3 if tied else torch.rand(shape, generator=g)
    target = torch.randint(0, 2, (rows, items), generator=g)
    target[0] = 0  # a query without relevant item
    target[1, :3] = 1  # and one with relevant items in the top
    return preds, target


def _orders(scores: list[float]):
    """Every order of the items by descending score, tied items in each of their orders (equally likely)."""
    for perm in itertools.permutations(range(len(scores))):
        if all(scores[perm[i]] >= scores[perm[i + 1]] for i in range(len(perm) - 1)):
            yield perm


def _ap_found(labels: list[int], k: int) -> float:
    hits, total = 0, 0.0
    for i, label in enumerate(labels[:k]):
        if label:
            hits += 1
            total += hits / (i + 1)
    return total / hits if hits else 0.0


@pytest.mark.parametrize("k", [None, 1, 3, 5, 20])
def test_ap_over_found_equals_torchmetrics(k):
    preds, target = _queries(0)
    ours = F.average_precision(preds, target, k=k, denominator="found", reduction="none")
    for q in range(preds.shape[0]):
        torch.testing.assert_close(ours[q], retrieval_average_precision(preds[q], target[q], top_k=k))
    # flat input, uneven queries
    indexes = torch.arange(preds.shape[0]).repeat_interleave(preds.shape[1])
    keep = torch.rand(indexes.shape, generator=torch.Generator().manual_seed(1)) < 0.7
    flat = F.average_precision(preds.reshape(-1)[keep], target.reshape(-1)[keep], k=k, indexes=indexes[keep],
                               denominator="found", reduction="none")
    for q in range(preds.shape[0]):
        mine = indexes[keep] == q
        torch.testing.assert_close(flat[q], retrieval_average_precision(preds.reshape(-1)[keep][mine],
                                                                        target.reshape(-1)[keep][mine], top_k=k))


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_ap_over_found_is_the_expectation_over_tie_orders(backend):
    """A tie group across the cut-off makes the denominator random: the value is the exact mean over orders."""
    g = torch.Generator().manual_seed(2)
    preds = torch.randint(0, 3, (40, 7), generator=g).float()
    target = torch.randint(0, 2, (40, 7), generator=g)
    ks = [1, 2, 3, 5, 7]
    with use_backend(backend):
        ours = F.average_precision(preds, target, k=ks, denominator="found", reduction="none")
    for q in range(preds.shape[0]):
        orders = list(_orders(preds[q].tolist()))
        for j, k in enumerate(ks):
            expected = sum(_ap_found([int(target[q, i]) for i in o], k) for o in orders) / len(orders)
            assert abs(ours[q, j].item() - expected) < 1e-5, (q, k)


def test_ap_denominators_differ_as_documented():
    preds, target = torch.arange(6, 0, -1.0), torch.tensor([1, 0, 0, 1, 0, 1])
    torch.testing.assert_close(F.average_precision(preds, target, k=3), torch.tensor(1 / 3))  # trec_eval map_cut_3
    torch.testing.assert_close(F.average_precision(preds, target, k=3, denominator="found"), torch.tensor(1.0))
    whole = F.average_precision(preds, target)
    torch.testing.assert_close(F.average_precision(preds, target, denominator="found"), whole)  # the same R
    with pytest.raises(ValueError, match="`denominator`"):
        F.average_precision(preds, target, denominator="retrieved")


@pytest.mark.parametrize("k", [1, 4, 9, 15])
def test_adaptive_k_precision_equals_torchmetrics(k):
    preds, target = _queries(3)
    mask = torch.arange(9).expand(12, 9) < torch.randint(1, 10, (12, 1), generator=torch.Generator().manual_seed(4))
    ours = F.precision(preds, target, k=k, mask=mask, adaptive_k=True, reduction="none")
    for q in range(12):
        theirs = retrieval_precision(preds[q][mask[q]], target[q][mask[q]], top_k=k, adaptive_k=True)
        torch.testing.assert_close(ours[q], theirs)
    # ties: P@k is linear in the hits, so the expectation is the tie-averaged hits over min(k, n)
    tied, labels = _queries(5, tied=True)
    n = torch.full((12,), 9.0)
    torch.testing.assert_close(F.precision(tied, labels, k=k, adaptive_k=True, reduction="none"),
                               F.precision(tied, labels, k=k, reduction="none") * k / n.clamp_max(k))
    with pytest.raises(ValueError, match="`adaptive_k`"):
        F.precision(preds, target, k=2, adaptive_k=1)


@pytest.mark.parametrize("k", [None, 1, 3, 6, 20])
@pytest.mark.parametrize("max_fpr", [None, 0.1, 0.35, 0.5, 1.0])
def test_auroc_top_k_and_max_fpr_equal_torchmetrics(k, max_fpr):
    preds, target = _queries(6, rows=16, items=10)
    ours = F.auroc(preds, target, k=k, max_fpr=max_fpr, empty_target_action="neg", reduction="none")
    for q in range(preds.shape[0]):  # torchmetrics: 0 where the top k lack either kind of item
        torch.testing.assert_close(ours[q], retrieval_auroc(preds[q], target[q], top_k=k, max_fpr=max_fpr))


@pytest.mark.parametrize("max_fpr", [None, 0.2, 0.5, 0.8])
def test_auroc_partial_area_under_ties_equals_torchmetrics(max_fpr):
    """Whole lists: tied scores are one straight ROC segment in both (torchmetrics' value is defined)."""
    preds, target = _queries(7, rows=30, items=8, tied=True)
    ours = F.auroc(preds, target, max_fpr=max_fpr, empty_target_action="neg", reduction="none")
    for q in range(preds.shape[0]):
        torch.testing.assert_close(ours[q], retrieval_auroc(preds[q], target[q], max_fpr=max_fpr))


def test_auroc_top_k_keeps_input_order_across_the_cut_off_and_reads_padding_and_flat_input():
    # two tied items across k = 2: the first in input order is kept
    tied = torch.tensor([0.9, 0.5, 0.5])
    torch.testing.assert_close(F.auroc(tied, torch.tensor([0, 1, 0]), k=2), torch.tensor(0.0))
    undefined = F.auroc(tied, torch.tensor([0, 0, 1]), k=2, empty_target_action="pos")  # no relevant item kept
    torch.testing.assert_close(undefined, torch.tensor(1.0))
    preds, target = _queries(8, rows=10, items=12)
    sizes = torch.randint(2, 13, (10,), generator=torch.Generator().manual_seed(9))
    mask = torch.arange(12).expand(10, 12) < sizes.unsqueeze(1)
    indexes = torch.arange(10).unsqueeze(1).expand(10, 12)[mask]
    for k, max_fpr in ((3, None), (5, 0.4), (None, 0.3)):
        dense = F.auroc(preds, target, mask=mask, k=k, max_fpr=max_fpr, empty_target_action="skip", reduction="none")
        flat = F.auroc(preds[mask], target[mask], indexes=indexes, k=k, max_fpr=max_fpr, empty_target_action="skip",
                       reduction="none")
        torch.testing.assert_close(dense, flat, equal_nan=True)
        for q in range(10):
            p, t = preds[q][mask[q]], target[q][mask[q]]
            if not torch.isnan(dense[q]):
                torch.testing.assert_close(dense[q], retrieval_auroc(p, t, top_k=k, max_fpr=max_fpr))
    for bad in ({"k": 0}, {"k": 1.5}, {"max_fpr": 0.0}, {"max_fpr": 1.5}, {"max_fpr": True}):
        with pytest.raises((TypeError, ValueError), match=next(iter(bad))):
            F.auroc(preds, target, **bad)
    several = F.auroc(preds, target, k=[2, 5], max_fpr=0.5, reduction="none")  # one column per cut-off
    for j, k in enumerate((2, 5)):
        torch.testing.assert_close(several[:, j], F.auroc(preds, target, k=k, max_fpr=0.5, reduction="none"))


def test_curve_adaptive_k():
    preds, target = _queries(10, rows=6, items=5)
    p, _, _ = F.precision_recall_curve(preds, target, 8, adaptive_k=True, reduction="none")
    for k in range(1, 9):
        torch.testing.assert_close(p[:, k - 1], F.precision(preds, target, k=k, adaptive_k=True, reduction="none"))
    torch.testing.assert_close(p[:, 7], p[:, 4])  # past the list's end: hits / n
