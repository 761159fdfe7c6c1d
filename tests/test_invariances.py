"""Properties every measure must keep: padding, permutation, layout, reductions, devices and dtypes."""

from __future__ import annotations

import inspect

import pytest
import torch
from conftest import ALL_MEASURES, CUTOFF_MEASURES

import torchrank
import torchrank.functional as F

IDS = [m[0] for m in ALL_MEASURES]
KS = [1, 3, 10]


def _kwargs(name, fn):
    return {"k": KS} if any(name == m[0] for m in CUTOFF_MEASURES) else {}


def _data(seed=0, q=40, n=12, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randn(q, n, generator=g, dtype=dtype)
    target = torch.randint(0, 4, (q, n), generator=g).to(dtype)
    target[0] = 0  # a query with no relevant item
    target[1] = 1  # labels without order
    return preds, target


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
def test_appended_padding_changes_nothing(name, fn, _, ties):
    preds, target = _data()
    kw = _kwargs(name, fn) | {"ties": ties, "reduction": "none"}
    plain = fn(preds, target, **kw)
    g = torch.Generator().manual_seed(1)
    pad_preds = torch.cat([preds, 1e6 * torch.randn(preds.shape[0], 5, generator=g, dtype=preds.dtype)], 1)
    pad_target = torch.cat([target, torch.randint(0, 4, (target.shape[0], 5), generator=g).to(target.dtype)], 1)
    mask = torch.cat([torch.ones_like(preds, dtype=torch.bool), torch.zeros(preds.shape[0], 5, dtype=torch.bool)], 1)
    torch.testing.assert_close(fn(pad_preds, pad_target, mask=mask, **kw), plain)


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_mask_without_padding_changes_nothing(name, fn, _, backend):
    """An all-True mask (the numpy backend reads it as none; the torch backend applies it) gives the values of no
    mask, for dense and flat input."""
    preds, target = _data()
    kw = _kwargs(name, fn) | {"reduction": "none"}
    everything = torch.ones_like(preds, dtype=torch.bool)
    indexes = torch.arange(preds.shape[0]).unsqueeze(1).expand_as(preds).reshape(-1)
    with torchrank.use_backend(backend):
        plain = fn(preds, target, **kw)
        torch.testing.assert_close(fn(preds, target, mask=everything, **kw), plain)
        flat = fn(preds.reshape(-1), target.reshape(-1), indexes=indexes, mask=everything.reshape(-1), **kw)
        torch.testing.assert_close(flat, plain)


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
def test_permuting_items_with_distinct_scores_changes_nothing(name, fn, _, ties):
    preds, target = _data()
    kw = _kwargs(name, fn) | {"ties": ties, "reduction": "none"}
    perm = torch.randperm(preds.shape[1], generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(fn(preds[:, perm], target[:, perm], **kw), fn(preds, target, **kw))


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
def test_layouts_agree(name, fn, _):
    """Leading batch dims, 1-D single queries and flat input with indexes give the same per-query values."""
    preds, target = _data(q=6)
    kw = _kwargs(name, fn)
    per_query = fn(preds, target, reduction="none", **kw)
    batched = fn(preds.reshape(2, 3, -1), target.reshape(2, 3, -1), reduction="none", **kw)
    torch.testing.assert_close(batched.reshape(per_query.shape), per_query)
    torch.testing.assert_close(fn(preds[2], target[2], reduction="none", **kw), per_query[2])
    rows = torch.arange(6).repeat_interleave(preds.shape[1])
    flat = fn(preds.flatten(), target.flatten(), indexes=rows, reduction="none", **kw)
    torch.testing.assert_close(flat, per_query)


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
@pytest.mark.parametrize("ties", ["average", "first"])
@pytest.mark.parametrize("layout", ["grouped-equal", "grouped-ragged", "shuffled-masked"])
def test_flat_input_equals_its_dense_rows(name, fn, _, ties, layout):
    """Flat ``(preds, target, indexes)`` gives exactly the values of the dense rows it groups into, whether its
    queries come grouped and equally long (the rows are then unpadded views of the input), grouped with ragged
    lengths, or shuffled with items masked out."""
    from torchrank.functional._pipeline import format_on_backend as format_inputs

    preds, target = _data(q=30, n=40, dtype=torch.float32)  # float32: the CPU key sorts
    lengths = torch.full((30,), 40) if layout == "grouped-equal" else torch.randint(1, 41, (30,))
    lengths[:2] = 40  # the widest row sets the dense width
    dense_mask = torch.arange(40) < lengths.unsqueeze(1)
    kw = _kwargs(name, fn) | {"reduction": "none", "ties": ties}
    expected = fn(preds, target, mask=dense_mask, **kw)
    ids = torch.arange(30).unsqueeze(1).expand(-1, 40)[dense_mask] * 7 - 3  # ascending, not 0..Q-1
    flat_preds, flat_target, flat_mask = preds[dense_mask], target[dense_mask], None
    if layout == "shuffled-masked":  # extra items, masked out, and every item shuffled
        ids, flat_preds, flat_target = torch.cat([ids, ids[:50]]), torch.cat([flat_preds, flat_preds[:50] + 9]), \
            torch.cat([flat_target, flat_target[:50] + 1])
        flat_mask = torch.arange(len(ids)) < len(ids) - 50
        perm = torch.randperm(len(ids), generator=torch.Generator().manual_seed(5))
        ids, flat_preds, flat_target, flat_mask = ids[perm], flat_preds[perm], flat_target[perm], flat_mask[perm]
    got = fn(flat_preds, flat_target, indexes=ids, mask=flat_mask, **kw)
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    grouped = format_inputs(flat_preds, flat_target, indexes=ids, mask=flat_mask)
    assert grouped.padded == (layout != "grouped-equal")
    if layout == "grouped-equal":  # no copy of the scores
        assert grouped.preds.data_ptr() == flat_preds.data_ptr()


IDEAL_MEASURES = [m for m in ALL_MEASURES if "ideal_target" in inspect.signature(m[1]).parameters]


@pytest.mark.parametrize(("name", "fn", "_"), IDEAL_MEASURES, ids=[m[0] for m in IDEAL_MEASURES])
def test_flat_ideal_target_equals_its_dense_rows(name, fn, _):
    """With ``indexes``, ``ideal_target`` holds one label per item, grouped as ``target``: shuffled flat input
    with a per-item ideal (some relevant items zeroed in ``target``, as a score filter would) gives the values of
    the dense rows and their dense ideal."""
    preds, ideal = _data(q=20, n=15, dtype=torch.float32)
    target = torch.where(preds > 0.5, ideal, torch.zeros_like(ideal))  # labels kept for the ranked items only
    lengths = torch.randint(1, 16, (20,), generator=torch.Generator().manual_seed(3))
    lengths[0] = 15
    dense_mask = torch.arange(15) < lengths.unsqueeze(1)
    kw = _kwargs(name, fn) | {"reduction": "none"}
    expected = fn(preds, target, mask=dense_mask, ideal_target=torch.where(dense_mask, ideal, 0), **kw)
    ids = torch.arange(20).unsqueeze(1).expand(-1, 15)[dense_mask]
    perm = torch.randperm(len(ids), generator=torch.Generator().manual_seed(4))
    got = fn(preds[dense_mask][perm], target[dense_mask][perm], indexes=ids[perm],
             ideal_target=ideal[dense_mask][perm], **kw)
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    if name in ("recall", "ndcg"):  # the ideal is read: dropping it changes the values
        plain = fn(preds[dense_mask][perm], target[dense_mask][perm], indexes=ids[perm], **kw)
        assert not torch.equal(plain, got)


@pytest.mark.parametrize(("name", "fn", "_"), CUTOFF_MEASURES, ids=[m[0] for m in CUTOFF_MEASURES])
def test_sequence_of_k_equals_single_calls(name, fn, _):
    preds, target = _data()
    together = fn(preds, target, k=KS, reduction="none")
    for j, k in enumerate(KS):
        torch.testing.assert_close(together[:, j], fn(preds, target, k=k, reduction="none"))


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
def test_reductions_and_empty_target_actions(name, fn, _):
    preds, target = _data()
    kw = _kwargs(name, fn)
    values = fn(preds, target, reduction="none", empty_target_action="skip", **kw)
    assert torch.isnan(values[0]).all() and not torch.isnan(values[2:]).any()
    torch.testing.assert_close(fn(preds, target, empty_target_action="skip", **kw), values.nanmean(0))
    torch.testing.assert_close(fn(preds, target, reduction="sum", empty_target_action="skip", **kw), values.nansum(0))
    assert (fn(preds, target, reduction="none", empty_target_action="pos", **kw)[0] == 1).all()
    assert (fn(preds, target, reduction="none", **kw)[0] == 0).all()
    with pytest.raises(ValueError, match="no relevant item"):
        fn(preds, target, empty_target_action="error", **kw)


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
def test_fully_padded_rows_and_validate_args_off(name, fn, _):
    preds, target = _data(q=4)
    mask = torch.ones_like(preds, dtype=torch.bool)
    mask[3] = False  # a query whose list is empty (a qrels query missing from the run)
    kw = _kwargs(name, fn) | {"reduction": "none"}
    values = fn(preds, target, mask=mask, **kw)
    assert torch.isfinite(values).all()
    torch.testing.assert_close(fn(preds, target, mask=mask, validate_args=False, **kw), values)


def test_empty_lists_score_zero_for_higher_is_better_measures():
    preds = torch.zeros(2, 3)
    target = torch.tensor([[1, 0, 0], [1, 1, 0]])
    mask = torch.tensor([[False] * 3, [True] * 3])
    ideal = target.clone()
    for fn in (F.precision, F.recall, F.average_precision, F.ndcg, F.reciprocal_rank, F.err, F.rbp):
        assert fn(preds, target, mask=mask, ideal_target=ideal, reduction="none")[0] == 0


def test_real_items_scored_minus_inf_rank_before_padding():
    preds = torch.tensor([[-float("inf"), 0.5, 7.0]])
    target = torch.tensor([[1, 0, 5]])
    mask = torch.tensor([[True, True, False]])
    for ties in ("average", "first", "optimistic", "pessimistic"):
        assert F.reciprocal_rank(preds, target, mask=mask, ties=ties).item() == 0.5
        assert F.precision(preds, target, mask=mask, k=2, ties=ties).item() == 0.5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int64])
def test_score_dtypes(dtype):
    preds = torch.tensor([[4, 3, 2, 1], [1, 2, 3, 4]]).to(dtype)
    target = torch.tensor([[1, 0, 1, 0], [1, 0, 0, 0]])
    out = F.evaluate(preds, target, ["ndcg@3", "map", "mrr"], reduction="none")
    assert out["mrr"].dtype == torch.float32
    torch.testing.assert_close(out["mrr"], torch.tensor([1.0, 0.25]))


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
@pytest.mark.parametrize("ties", ["average", "first", "optimistic"])
@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
def test_scores_that_require_grad_rank_as_their_values(name, fn, _, ties, padded):
    """A model's scores (or soft labels) still holding their graph, as in a validation step, are ranked by their
    values, on every path of the ranking (float32 takes the CPU key sorts, float64 the argsort)."""
    for dtype in (torch.float32, torch.float64):
        preds, target = _data(dtype=dtype)
        mask = torch.arange(12) < torch.randint(1, 13, (preds.shape[0], 1)) if padded else None
        kw = _kwargs(name, fn) | {"reduction": "none", "ties": ties, "mask": mask}
        expected = fn(preds, target, **kw)
        grad_preds, grad_target = preds.clone().requires_grad_(), target.clone().requires_grad_()
        torch.testing.assert_close(fn(grad_preds, grad_target, **kw), expected, equal_nan=True)


def test_bool_and_float_targets_agree():
    preds, target = _data()
    binary = target > 0
    torch.testing.assert_close(F.average_precision(preds, binary), F.average_precision(preds, binary.to(torch.float64)))


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
@pytest.mark.parametrize("label_dtype", [torch.int64, torch.int32, torch.uint8, torch.float16, torch.bool])
def test_label_dtypes_and_row_blocks_agree(name, fn, _, label_dtype, monkeypatch):
    """Unpadded labels of large CPU batches (here: past 50 items) stay in the caller's dtype until read: the ranked
    labels are converted after the gather, the ideal labels by blocks of rows (here of 4 rows); every dtype gives
    the float64 labels' values."""
    from conftest import patch_engine

    from torchrank.functional import _inputs

    preds, target = _data()
    target = target > 0 if label_dtype == torch.bool else target
    kw = _kwargs(name, fn) | {"reduction": "none"}
    expected = fn(preds, target.to(torch.float64), **kw)
    monkeypatch.setattr(_inputs, "LARGE_BATCH_ITEMS", 50)
    patch_engine(monkeypatch, "LARGE_BATCH_ITEMS", 50)  # the numpy backend's value ranges read it too
    patch_engine(monkeypatch, "_ROW_BLOCK_ITEMS", 50)
    torch.testing.assert_close(fn(preds, target.to(label_dtype), **kw), expected)
    if name == "ndcg":  # a callable gain maps the labels before their order is read
        square = {"gain": lambda labels: labels**2, "reduction": "none"}
        torch.testing.assert_close(
            fn(preds, target.to(label_dtype), **square), fn(preds, target.to(torch.float64), **square)
        )


def test_evaluate_equals_single_functions():
    preds, target = _data()
    out = F.evaluate(preds, target, ["ndcg@5", "ndcg_cut_10", "map", "P_5", "recall@10", "mrr", "rbp.95", "err@3"],
                     reduction="none")
    torch.testing.assert_close(out["ndcg@5"], F.ndcg(preds, target, k=5, reduction="none"))
    torch.testing.assert_close(out["ndcg_cut_10"], F.ndcg(preds, target, k=10, reduction="none"))
    torch.testing.assert_close(out["map"], F.average_precision(preds, target, reduction="none"))
    torch.testing.assert_close(out["P_5"], F.precision(preds, target, k=5, reduction="none"))
    torch.testing.assert_close(out["recall@10"], F.recall(preds, target, k=10, reduction="none"))
    torch.testing.assert_close(out["mrr"], F.reciprocal_rank(preds, target, reduction="none"))
    torch.testing.assert_close(out["rbp.95"], F.rbp(preds, target, p=0.95, reduction="none"))
    torch.testing.assert_close(out["err@3"], F.err(preds, target, k=3, reduction="none"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
@pytest.mark.parametrize("ties", ["average", "first"])
def test_cpu_and_cuda_agree(name, fn, _, ties):
    preds, target = _data(q=300, n=50)
    preds = torch.round(preds * 2) / 2  # ties
    kw = _kwargs(name, fn) | {"ties": ties, "reduction": "none"}
    cpu = fn(preds, target, **kw)
    cuda = fn(preds.cuda(), target.cuda(), **kw)
    assert cuda.device.type == "cuda"
    torch.testing.assert_close(cuda.cpu(), cpu)


@pytest.mark.parametrize(("name", "fn", "_"), CUTOFF_MEASURES, ids=[m[0] for m in CUTOFF_MEASURES])
@pytest.mark.parametrize("ties", ["average", "first"])
@pytest.mark.parametrize("tied", [False, True], ids=["distinct", "tied"])
def test_unpadded_cutoffs_equal_padded_rows(name, fn, _, ties, tied):
    """Small cut-offs of unpadded rows and of the same rows behind a padded item (padding keys on CPU) take
    different routes: both must agree, ties at the cut-off included. (An all-True mask would not do: the numpy
    backend drops it, and the two calls would take one route.)"""
    preds, target = _data(q=60, n=30, dtype=torch.float32)  # float32: the CPU key sorts
    if tied:
        preds = torch.round(preds * 2) / 2  # tie groups straddle the cut-offs
    kw = {"k": [1, 3, 5], "ties": ties, "reduction": "none"}
    mask = torch.ones(60, 31, dtype=torch.bool)
    mask[:, 0] = False  # a padded item first, scored as the best and labelled 3 (the top label): it never counts
    padded = fn(torch.cat([preds.amax(1, keepdim=True), preds], 1), torch.cat([torch.full_like(preds[:, :1], 3),
                target], 1), mask=mask, **kw)
    torch.testing.assert_close(fn(preds, target, **kw), padded)


@pytest.mark.parametrize(("name", "fn", "_"), ALL_MEASURES, ids=IDS)
@pytest.mark.parametrize("ties", ["average", "first", "optimistic"])
def test_flat_rows_with_minus_inf_scores_equal_masked_dense_rows(name, fn, _, ties):
    """Rows built from flat input rank with one sort (padding already last); real items scored -inf must
    still rank above the padding, as with a user mask (the two-sort path)."""
    preds = torch.tensor([[0.5, -float("inf"), -float("inf"), 0.0], [-float("inf"), 2.0, 0.0, 0.0]])
    target = torch.tensor([[0, 1, 2, 0], [3, 0, 0, 0]])
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    rows = torch.arange(2).unsqueeze(1).expand_as(mask)[mask]
    kw = _kwargs(name, fn) | {"ties": ties, "reduction": "none"}
    flat = fn(preds[mask], target[mask], indexes=rows, **kw)
    torch.testing.assert_close(flat, fn(preds, target, mask=mask, **kw))
