"""Per-query AUROC and GAUC (functional and classes) against scikit-learn's roc_auc_score per query and a
brute-force count of pairs, ties included."""

from __future__ import annotations

import pytest
import torch
from sklearn.metrics import roc_auc_score
from torch.utils._python_dispatch import TorchDispatchMode

import torchrank
import torchrank.functional as F
from torchrank.metrics import AUROC, GAUC


def _random(seed: int, rows: int = 30, items: int = 12):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, 5, (rows, items), generator=g).double() / 4  # many ties
    target = torch.randint(0, 3, (rows, items), generator=g)
    mask = torch.rand(rows, items, generator=g) < 0.85
    target[0] = 0  # no relevant item
    target[1] = 2  # no non-relevant item
    return preds, target, mask


def _reference(preds, target, mask, threshold=1):
    """Per-query (AUROC or None, number of items) with scikit-learn on each query's real items."""
    out = []
    for p, t, m in zip(preds, target, mask, strict=True):
        labels = (t[m] >= threshold).int().numpy()
        auc = roc_auc_score(labels, p[m].numpy()) if 0 < labels.sum() < labels.size else None
        out.append((auc, int(m.sum())))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_auroc_equals_sklearn_per_query(seed: int) -> None:
    preds, target, mask = _random(seed)
    ref = _reference(preds, target, mask)
    got = F.auroc(preds, target, mask=mask, reduction="none", empty_target_action="skip")
    want = torch.tensor([float("nan") if auc is None else auc for auc, _ in ref], dtype=got.dtype)
    torch.testing.assert_close(got, want, equal_nan=True)
    neg = F.auroc(preds, target, mask=mask, reduction="none")
    torch.testing.assert_close(neg, torch.nan_to_num(want, nan=0.0))
    graded = F.auroc(preds, target, mask=mask, reduction="none", relevance_threshold=2, empty_target_action="skip")
    want2 = [float("nan") if a is None else a for a, _ in _reference(preds, target, mask, threshold=2)]
    torch.testing.assert_close(graded, torch.tensor(want2, dtype=graded.dtype), equal_nan=True)


def test_auroc_counts_pairs_with_half_ties() -> None:
    preds, target = torch.tensor([0.3, 0.3, 0.7, 0.1, 0.3]), torch.tensor([1, 0, 0, 1, 0])
    pairs = [(p, n) for p in range(5) if target[p] for n in range(5) if not target[n]]
    expected = sum(1.0 if preds[p] > preds[n] else 0.5 if preds[p] == preds[n] else 0.0 for p, n in pairs)
    torch.testing.assert_close(F.auroc(preds, target), torch.tensor(expected / len(pairs)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.int64])
def test_auroc_of_narrow_or_integer_scores_equals_sklearn(dtype: torch.dtype) -> None:
    """Half-precision scores of long lists (a pair count past float16's 65,504) and integer scores past 2^24 (which
    float32 would round into ties) give scikit-learn's AUROC of the same scores, in the working dtype, float32."""
    g = torch.Generator().manual_seed(7)
    if dtype.is_floating_point:
        preds = torch.rand(3, 600, generator=g).to(dtype)
    else:  # distinct integers 2^30 + 2j: one apart in float32's rounding, 2^6
        preds = 2**30 + 2 * torch.randint(0, 50, (3, 600), generator=g).to(dtype)
    target = (torch.rand(3, 600, generator=g) < 0.5).long()
    want = torch.tensor([roc_auc_score(t.numpy(), p.double().numpy()) for p, t in zip(preds, target, strict=True)],
                        dtype=torch.float64)
    for max_fpr in (None, 0.5):
        got = F.auroc(preds, target, reduction="none", max_fpr=max_fpr)
        assert got.dtype == torch.float32
        if max_fpr is None:
            torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-6)
        else:
            part = torch.tensor([roc_auc_score(t.numpy(), p.double().numpy(), max_fpr=0.5)
                                 for p, t in zip(preds, target, strict=True)], dtype=torch.float64)
            torch.testing.assert_close(got.double(), part, rtol=0, atol=1e-6)
    weights = torch.tensor([1e6, 2e6, 3e6])  # past float16's range: weighted in the working dtype too
    assert F.gauc(preds, target, weights=weights).item() == pytest.approx((want * weights).sum() / weights.sum())


@pytest.mark.parametrize("seed", range(3))
def test_gauc_weights_by_impressions_or_given(seed: int) -> None:
    preds, target, mask = _random(seed)
    ref = _reference(preds, target, mask)
    defined = [(auc, n) for auc, n in ref if auc is not None]
    want = sum(a * n for a, n in defined) / sum(n for _, n in defined)
    assert F.gauc(preds, target, mask=mask).item() == pytest.approx(want)
    clicks = (target >= 1).sum(1).double()
    weighted = [(auc, clicks[q].item()) for q, (auc, _) in enumerate(ref) if auc is not None]
    want = sum(a * w for a, w in weighted) / sum(w for _, w in weighted)
    assert F.gauc(preds, target, mask=mask, weights=clicks).item() == pytest.approx(want)
    metric = GAUC()
    for rows in (slice(0, 11), slice(11, None)):
        metric.update(preds[rows], target[rows], mask=mask[rows], weights=clicks[rows])
    assert metric.compute().item() == pytest.approx(want, abs=1e-6)


def test_auroc_class_dense_and_flat() -> None:
    preds, target, mask = _random(9)
    want = F.auroc(preds, target, mask=mask)
    dense = AUROC()
    for rows in (slice(0, 11), slice(11, None)):
        dense.update(preds[rows], target[rows], mask=mask[rows])
    torch.testing.assert_close(dense.compute(), want.float())
    # flat items of every query, split over two updates in shuffled order
    indexes = torch.arange(preds.shape[0]).unsqueeze(1).expand_as(preds)[mask]
    order = torch.randperm(indexes.numel(), generator=torch.Generator().manual_seed(0))
    flat = AUROC()
    for part in order.tensor_split(2):
        flat.update(preds[mask][part], target[mask][part], indexes=indexes[part])
    torch.testing.assert_close(flat.compute(), want.float())


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="`empty_target_action`"):
        F.auroc(torch.rand(2, 3), torch.zeros(2, 3), empty_target_action="maybe")
    with pytest.raises(ValueError, match="`weights`"):
        F.gauc(torch.rand(2, 3), torch.zeros(2, 3), weights=torch.ones(3))


def _pairs_auc(preds: list[float], labels: list[bool]) -> float | None:
    """AUROC by counting every (relevant, non-relevant) pair, ties one half; None without both kinds."""
    pos = [p for p, y in zip(preds, labels, strict=True) if y]
    neg = [p for p, y in zip(preds, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    return sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg) / (len(pos) * len(neg))


def _flat_reference(preds, target, indexes, weights=None, threshold=1):
    """GAUC of flat items by a dict of queries: each query's weight is its number of items, or ``weights[q]``
    for the q-th distinct index in ascending order."""
    queries: dict[int, list[tuple[float, bool]]] = {}
    for p, t, i in zip(preds.tolist(), target.tolist(), indexes.tolist(), strict=True):
        queries.setdefault(i, []).append((p, t >= threshold))
    num = den = 0.0
    for q, index in enumerate(sorted(queries)):
        items = queries[index]
        auc = _pairs_auc([p for p, _ in items], [y for _, y in items])
        if auc is not None:
            w = len(items) if weights is None else float(weights[q])
            num, den = num + w * auc, den + w
    return num / den


def _flat(seed: int, n: int = 200):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, 6, (n,), generator=g).float() / 5  # ties
    target = torch.randint(0, 3, (n,), generator=g)
    indexes = torch.randint(0, 25, (n,), generator=g) * 7 - 40  # unsorted, negative, gaps
    return preds, target, indexes


@pytest.mark.parametrize("seed", range(3))
def test_gauc_on_flat_items_equals_a_dict_of_queries(seed: int) -> None:
    preds, target, indexes = _flat(seed)
    assert F.gauc(preds, target, indexes=indexes).item() == pytest.approx(_flat_reference(preds, target, indexes))
    assert F.gauc(preds, target, indexes=indexes, relevance_threshold=2).item() == pytest.approx(
        _flat_reference(preds, target, indexes, threshold=2))
    clicks = torch.rand(indexes.unique().numel(), generator=torch.Generator().manual_seed(seed))  # ascending ids
    assert F.gauc(preds, target, indexes=indexes, weights=clicks).item() == pytest.approx(
        _flat_reference(preds, target, indexes, clicks))


@pytest.mark.parametrize("seed", range(3))
def test_gauc_class_on_flat_items_spanning_updates(seed: int) -> None:
    preds, target, indexes = _flat(seed)
    order = torch.randperm(preds.numel(), generator=torch.Generator().manual_seed(seed))
    metric = GAUC()
    for part in order.tensor_split(4):  # each query's items over several updates, in shuffled order
        metric.update(preds[part], target[part], indexes=indexes[part])
    assert metric.compute().item() == pytest.approx(_flat_reference(preds, target, indexes), abs=1e-6)
    # masked items are left out; dense rows mix in as queries of their own
    mask = torch.rand(preds.numel(), generator=torch.Generator().manual_seed(seed)) < 0.7
    dense_preds, dense_target, dense_mask = _random(seed, rows=5)
    mixed = GAUC()
    mixed.update(preds, target, indexes=indexes, mask=mask)
    mixed.update(dense_preds, dense_target, mask=dense_mask)
    rows = torch.arange(5).unsqueeze(1).expand_as(dense_preds)[dense_mask] + 10_000  # the rows as flat queries
    want = _flat_reference(torch.cat([preds[mask], dense_preds[dense_mask].float()]),
                           torch.cat([target[mask], dense_target[dense_mask]]), torch.cat([indexes[mask], rows]))
    assert mixed.compute().item() == pytest.approx(want, abs=1e-6)
    mixed.reset()
    mixed.update(preds, target, indexes=indexes)
    assert mixed.compute().item() == pytest.approx(_flat_reference(preds, target, indexes), abs=1e-6)


def test_gauc_class_flat_input_errors() -> None:
    preds, target, indexes = _flat(0, n=10)
    with pytest.raises(ValueError, match="`weights`"):
        GAUC().update(preds, target, indexes=indexes, weights=torch.ones(3))
    with pytest.raises(ValueError, match="`target`"):
        GAUC().update(preds, target[:5], indexes=indexes)
    with pytest.raises(ValueError, match="`indexes`"):
        GAUC().update(preds, target, indexes=indexes.float())


class _HostReads(TorchDispatchMode):
    """Records the aten calls that read a tensor's values on the host (a GPU synchronisation off CPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._overloadpacket.__name__ in ("_local_scalar_dense", "nonzero", "masked_select", "is_nonzero"):
            self.reads.append(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_auroc_and_gauc_from_the_ranking_of_each_backend_equal_sklearn(backend: str) -> None:
    """AUROC and GAUC come from the ranking step every measure shares: each backend's ranking (tied, padded rows;
    ties across the cut-off k kept in input order) gives scikit-learn's values and torchmetrics' top k; the torch
    backend reads nothing on the host."""
    preds, target, mask = _random(5)
    want = [float("nan") if auc is None else auc for auc, _ in _reference(preds, target, mask)]
    with torchrank.use_backend(backend):
        got = F.auroc(preds, target, mask=mask, k=[3, 12], max_fpr=None, empty_target_action="skip", reduction="none")
        torch.testing.assert_close(got[:, 1], torch.tensor(want, dtype=got.dtype), equal_nan=True)
        for q in range(preds.shape[0]):
            kept = torch.arange(12)[mask[q]][torch.sort(preds[q][mask[q]], descending=True, stable=True).indices[:3]]
            labels = (target[q, kept] >= 1).int().numpy()
            ref = roc_auc_score(labels, preds[q, kept].numpy()) if 0 < labels.sum() < 3 else float("nan")
            torch.testing.assert_close(got[q, 0].item(), ref, equal_nan=True)
        defined = [(auc, n) for auc, n in _reference(preds, target, mask) if auc is not None]
        assert F.gauc(preds, target, mask=mask).item() == pytest.approx(
            sum(a * n for a, n in defined) / sum(n for _, n in defined))
        if backend == "torch":
            with _HostReads() as mode:
                F.auroc(preds, target, mask=mask, k=[3, 12], max_fpr=0.5, reduction="none", validate_args=False)
            assert mode.reads == []


@pytest.mark.parametrize(("decimals", "route"), [(None, "index keys, head items"), (2, "top-k"), (1, "sort")])
def test_auroc_at_k_of_long_lists_on_each_numpy_route_equals_sklearn(decimals, route):
    """AUROC@10 of 800-item lists on the numpy backend's routes that rank a head only, or set tied rows apart:
    torchmetrics' top k (ties across the cut-off in input order), then scikit-learn on those items."""
    from torchrank.functional._pipeline import format_on_backend
    from torchrank.functional._ranked import rank

    g = torch.Generator().manual_seed(0)
    if decimals is None:  # float32 scores the keys pack, full of ties
        preds = torch.randint(0, 30, (12, 800), generator=g).float() / 8
    else:  # float64 scores the keys cannot pack: a few ties (2 decimals) or many (1)
        preds = torch.round(torch.randn(12, 800, generator=g, dtype=torch.float64) * 10**decimals) / 10**decimals
    target = torch.randint(0, 3, (12, 800), generator=g)
    assert rank(format_on_backend(preds, target), ties="first", depth=10).route == route
    got = F.auroc(preds, target, k=10, reduction="none", empty_target_action="skip")
    for q in range(12):
        kept = torch.sort(preds[q], descending=True, stable=True).indices[:10]
        labels = (target[q, kept] >= 1).int().numpy()
        ref = roc_auc_score(labels, preds[q, kept].numpy()) if 0 < labels.sum() < 10 else float("nan")
        torch.testing.assert_close(got[q].item(), ref, equal_nan=True)
