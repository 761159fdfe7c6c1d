"""Stateful metrics: equal to their functional over many uneven updates, constant memory, torchmetrics'
contract (collections, clone, forward, state_dict, compute_on_cpu, plot) and clean failures."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
from torchmetrics import MetricCollection

import torchrank.functional as F
import torchrank.metrics as M
from torchrank.compat import RetrievalMRR

# (class, functional, kwargs)
PAIRS = [
    (M.Precision, F.precision, {"k": [1, 5]}),
    (M.Recall, F.recall, {"k": 5}),
    (M.F1, F.f1, {"k": 5}),
    (M.HitRate, F.hit_rate, {"k": 3}),
    (M.MAP, F.average_precision, {"k": 10}),
    (M.RPrecision, F.r_precision, {}),
    (M.MAR, F.average_recall, {}),
    (M.DCG, F.dcg, {"k": 10, "gain": "exponential"}),
    (M.NDCG, F.ndcg, {"k": [5, 10], "ties": "first"}),
    (M.MRR, F.reciprocal_rank, {"k": 10}),
    (M.ERR, F.err, {"k": 10, "max_label": 3}),
    (M.RBP, F.rbp, {"p": 0.8}),
    (M.MeanRank, F.mean_rank, {}),
    (M.FirstRelevantPosition, F.first_relevant_position, {"k": 5}),
    (M.KendallTau, F.kendall_tau, {}),
    (M.KendallTauDistance, functools.partial(F.kendall_tau, distance=True), {}),
]
IDS = [f"{cls.__name__}-{i}" for i, (cls, _, _) in enumerate(PAIRS)]


def _data(seed=0, q=97, n=15):
    g = torch.Generator().manual_seed(seed)
    preds = torch.round(torch.randn(q, n, generator=g) * 3) / 3  # some ties
    target = torch.randint(0, 4, (q, n), generator=g)
    target[::7] = 0  # queries without relevant items
    mask = torch.rand(q, n, generator=g) > 0.15
    mask[:, 0] = True
    return preds, target, mask


UNEVEN = [0, 1, 4, 5, 23, 24, 60, 97]  # batches of 1, 3, 1, 18, 1, 36, 37 queries


@pytest.mark.parametrize(("cls", "fn", "kwargs"), PAIRS, ids=IDS)
@pytest.mark.parametrize("action", ["neg", "skip"])
def test_class_equals_functional_over_uneven_updates(cls, fn, kwargs, action):
    preds, target, mask = _data()
    metric = cls(empty_target_action=action, **kwargs)
    for start, stop in itertools.pairwise(UNEVEN):
        metric.update(preds[start:stop], target[start:stop], mask=mask[start:stop])
    expected = fn(preds, target, mask=mask, empty_target_action=action, **kwargs)
    torch.testing.assert_close(metric.compute(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("cls", "fn", "kwargs"), PAIRS, ids=IDS)
def test_flat_updates_with_queries_split_across_updates(cls, fn, kwargs):
    preds, target, mask = _data(seed=1)
    rows = torch.arange(preds.shape[0]).unsqueeze(1).expand_as(preds)
    shuffle = torch.randperm(int(mask.sum()), generator=torch.Generator().manual_seed(3))
    flat = [x[mask][shuffle] for x in (preds, target, rows)]
    metric = cls(ties="first", **{k: v for k, v in kwargs.items() if k != "ties"})
    for chunk in torch.arange(shuffle.numel()).split(157):
        metric.update(flat[0][chunk], flat[1][chunk], indexes=flat[2][chunk] * 3 + 11)
    # a flat query is grouped in arrival order, which "first" uses for ties: compare with the same grouping
    expected = fn(flat[0], flat[1], indexes=flat[2], ties="first", **{k: v for k, v in kwargs.items() if k != "ties"})
    torch.testing.assert_close(metric.compute(), expected, rtol=1e-5, atol=1e-6)


def test_ranking_metrics_equals_evaluate_and_sorts_once_per_update():
    preds, target, mask = _data(seed=2)
    names = ["ndcg@10", "ndcg_cut_5", "map", "P@5", "recall@100", "mrr@10", "err@20", "rbp.95"]
    metric = M.RankingMetrics(names, keep_per_query=True)
    for start, stop in itertools.pairwise(UNEVEN):
        metric.update(preds[start:stop], target[start:stop], mask=mask[start:stop])
    result = metric.compute()
    expected = F.evaluate(preds, target, names, mask=mask)
    assert list(result) == names
    for name in names:
        torch.testing.assert_close(result[name], expected[name], rtol=1e-5, atol=1e-6)
    assert metric.per_query_values().shape == (preds.shape[0], len(names))


@pytest.mark.parametrize("aggregation", ["median", "min", "max"])
def test_aggregations_over_kept_queries(aggregation):
    preds, target, mask = _data(seed=4)
    metric = M.NDCG(k=5, aggregation=aggregation, empty_target_action="skip")
    metric.update(preds[:40], target[:40], mask=mask[:40])
    metric.update(preds[40:], target[40:], mask=mask[40:])
    values = F.ndcg(preds, target, k=5, mask=mask, reduction="none", empty_target_action="skip")
    values = values[~torch.isnan(values)]
    expected = {"median": values.median(), "min": values.min(), "max": values.max()}[aggregation]
    torch.testing.assert_close(metric.compute(), expected)


def test_dense_state_memory_is_constant():
    metric = M.NDCG(k=10)
    preds, target = torch.randn(2, 6), torch.randint(0, 2, (2, 6))

    def state_bytes():
        return sum(
            sum(t.numel() * t.element_size() for t in (value if isinstance(value, list) else [value]))
            for value in metric.metric_state.values()
        )

    for _ in range(10):
        metric.update(preds, target)
    after_10 = state_bytes()
    for _ in range(10_000 - 10):
        metric.update(preds, target)
    assert state_bytes() == after_10
    assert metric.count.tolist() == [20_000.0]


def test_state_dict_round_trip_resumes_mid_epoch():
    preds, target, mask = _data(seed=5)
    full = M.RankingMetrics(["ndcg@5", "map"])
    full.update(preds, target, mask=mask)
    first = M.RankingMetrics(["ndcg@5", "map"])
    first.persistent(True)
    first.update(preds[:50], target[:50], mask=mask[:50])
    resumed = M.RankingMetrics(["ndcg@5", "map"])
    resumed.persistent(True)
    resumed.load_state_dict(first.state_dict())
    resumed.update(preds[50:], target[50:], mask=mask[50:])
    for name, value in full.compute().items():
        torch.testing.assert_close(resumed.compute()[name], value)


def test_collection_never_merges_different_metrics_whose_states_coincide():
    """torchmetrics merges metrics into a compute group when their states are equal after the first update.
    A first batch without relevant items makes every sum 0; P@1 and R@1 must still stay apart."""
    preds, target, _ = _data(seed=6)
    collection = MetricCollection({"p": M.Precision(k=1), "r": M.Recall(k=1), "p_again": M.Precision(k=1)})
    collection.update(preds[:4], torch.zeros_like(target[:4]))
    collection.update(preds[4:], target[4:])
    out = collection.compute()
    all_target = torch.cat([torch.zeros_like(target[:4]), target[4:]])
    torch.testing.assert_close(out["p"], F.precision(preds, all_target, k=1))
    torch.testing.assert_close(out["r"], F.recall(preds, all_target, k=1))
    assert sorted(map(sorted, collection.compute_groups.values())) == [["p", "p_again"], ["r"]]


def test_clone_forward_and_compute_on_cpu():
    preds, target, mask = _data(seed=7)
    metric = M.MAP(k=10, compute_on_cpu=True)
    twin = metric.clone()
    batch_value = metric(preds[:30], target[:30], mask=mask[:30])
    torch.testing.assert_close(batch_value, F.average_precision(preds[:30], target[:30], k=10, mask=mask[:30]))
    metric(preds[30:], target[30:], mask=mask[30:])
    torch.testing.assert_close(metric.compute(), F.average_precision(preds, target, k=10, mask=mask))
    assert twin.count.item() == 0
    prefixed = MetricCollection({"ndcg": M.NDCG(k=5)}).clone(prefix="val_")
    prefixed.update(preds, target)
    assert list(prefixed.compute()) == ["val_ndcg"]


def test_contract_attributes():
    assert M.NDCG.full_state_update is False and M.NDCG.is_differentiable is False
    assert M.NDCG.higher_is_better and not M.MeanRank.higher_is_better
    assert not M.FirstRelevantPosition.higher_is_better
    assert M.KendallTauDistance.higher_is_better is False
    with pytest.raises(ValueError, match="KendallTauDistance"):
        M.KendallTau(distance=True)
    assert M.KendallTau().plot_lower_bound == -1.0


def test_plot_uses_matplotlib():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    metric = M.NDCG(k=5)
    metric.update(*_data(seed=8)[:2])
    fig, ax = metric.plot()
    assert fig is not None and ax is not None
    fig, ax = M.RankingMetrics(["map", "P@5"]).plot([{"map": torch.tensor(0.5), "P@5": torch.tensor(0.2)}] * 3)
    assert ax is not None


def _snapshot(metric):
    return {name: (value.clone() if isinstance(value, torch.Tensor) else list(value))
            for name, value in metric.metric_state.items()}


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda m: m.update(torch.randn(2, 4), torch.randint(0, 2, (2, 5))), ValueError, "same shape"),
        (lambda m: m.update(torch.randn(2, 4) > 0, torch.randint(0, 2, (2, 4))), TypeError, "real scores"),
        (lambda m: m.update(torch.tensor([[0.1, float("nan")]]), torch.tensor([[1, 0]])), ValueError, "NaN"),
        (lambda m: m.update(torch.randn(2, 4), -torch.ones(2, 4)), ValueError, "labels >= 0"),
        (lambda m: m.update(torch.randn(4), torch.ones(4), indexes=torch.zeros(4, dtype=torch.long)), ValueError,
         "dense input before and flat input now"),
        (lambda m: setattr(m, "k", 3) or m.update(torch.randn(2, 4), torch.ones(2, 4)), ValueError, "`k` changed"),
    ],
)
def test_failed_update_leaves_state_unchanged(call, error, match):
    metric = M.NDCG(k=5, keep_per_query=True)
    metric.update(torch.randn(3, 4), torch.randint(0, 3, (3, 4)))
    before = _snapshot(metric)
    with pytest.raises(error, match=match):
        call(metric)
    after = _snapshot(metric)
    assert before.keys() == after.keys()
    for name in before:
        if isinstance(before[name], torch.Tensor):
            assert torch.equal(before[name], after[name]), name
        else:
            assert len(before[name]) == len(after[name]), name


def test_constructor_errors():
    with pytest.raises(ValueError, match="Unknown measure 'ndcg@ten'"):
        M.RankingMetrics(["ndcg@ten"])
    with pytest.raises(ValueError, match="names a measure twice"):
        M.RankingMetrics(["map", "map"])
    with pytest.raises(TypeError, match="sequence of names"):
        M.RankingMetrics("map")
    with pytest.raises(ValueError, match="`k` must hold positive ints"):
        M.NDCG(k=0)
    with pytest.raises(TypeError, match="takes no cut-off"):
        M.RPrecision(k=5)
    with pytest.raises(ValueError, match="`aggregation` must be one of"):
        M.NDCG(aggregation="mode")
    with pytest.raises(TypeError, match="for torchmetrics' `top_k`, use `k=`"):
        M.NDCG(k=5, top_k=5)
    with pytest.raises(ValueError, match="Unexpected keyword"):  # torchmetrics' own check of Metric's options
        M.NDCG(k=5, sync_on_computation=True)
    with pytest.raises(ValueError, match="`gain` must be one of"):
        M.NDCG(gain="quadratic")


def test_compute_before_any_update_warns_in_torchrank_words_and_gives_nan():
    """NaN and one warning that says what happened (torchmetrics' own "may lead to errors" is not repeated)."""
    import warnings

    for metric in (M.NDCG(k=3), M.RankingMetrics(["map", "P@2"])):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = metric.compute()
        assert [str(w.message).split(":")[0] for w in caught] == [
            f"{type(metric).__name__}.compute() was called before any update() since the metric was created or reset"
        ]
        assert caught[0].filename == __file__  # the warning points at the caller's line
        values = list(value.values()) if isinstance(value, dict) else [value]
        assert all(torch.isnan(v) for v in values)


def test_flat_input_with_a_mask_and_judged():
    preds, target = torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 1])
    indexes = torch.tensor([0, 0, 1, 1])
    mask = torch.tensor([True, False, True, True])
    metric = M.RBP(p=0.5, residual=True)
    metric.update(preds, target, indexes=indexes, mask=mask, judged=torch.tensor([True, True, False, True]))
    expected = F.rbp(preds[mask], target[mask], indexes=indexes[mask], p=0.5, residual=True,
                     judged=torch.tensor([True, False, True]))
    torch.testing.assert_close(metric.compute(), expected)


@pytest.mark.parametrize(("cls", "fn"), [(M.Recall, F.recall), (M.NDCG, F.ndcg), (M.MAP, F.average_precision)])
def test_flat_updates_with_an_ideal_target_in_some_of_them(cls, fn):
    """A per-item ``ideal_target`` (here: every judged label, where ``target`` zeroes low-scored items) counts as
    the functional's; an update without one stands for its items' own ``target``."""
    preds, ideal, mask = _data(seed=2)
    target = torch.where(preds > 0, ideal, torch.zeros_like(ideal))
    rows = torch.arange(preds.shape[0]).unsqueeze(1).expand_as(preds)
    flat_preds, flat_target, flat_ideal, ids = (x[mask] for x in (preds, target, ideal, rows))
    half = flat_preds.numel() // 2
    flat_ideal[half:] = flat_target[half:]  # the second update gives no ideal: its items' ideal is their target
    metric = cls(k=5)
    metric.update(flat_preds[:half], flat_target[:half], indexes=ids[:half], ideal_target=flat_ideal[:half])
    metric.update(flat_preds[half:], flat_target[half:], indexes=ids[half:])
    expected = fn(flat_preds, flat_target, indexes=ids, ideal_target=flat_ideal, k=5)
    torch.testing.assert_close(metric.compute(), expected)
    assert not torch.allclose(expected, fn(flat_preds, flat_target, indexes=ids, k=5))


def _id_lists(seed, b=30, k=12, m=6, catalogue=40):
    """Ranked ids (some rows padded, a repeat), relevant ids with graded labels (some padded, some never retrieved)."""
    g = torch.Generator().manual_seed(seed)
    ranked = torch.stack([torch.randperm(catalogue, generator=g)[:k] for _ in range(b)])
    ranked[::4, -3:] = -1
    ranked[1, 5] = ranked[1, 2]  # a repeated id counts at its first position only
    relevant = torch.stack([torch.randperm(catalogue, generator=g)[:m] for _ in range(b)])
    relevant[::3, -2:] = -1
    labels = torch.randint(1, 4, (b, m), generator=g)
    return ranked, relevant, labels


RANKED_PAIRS = [(p, i) for p, i in zip(PAIRS, IDS, strict=True) if p[0] not in (M.KendallTau, M.KendallTauDistance)]


@pytest.mark.parametrize(("cls", "fn", "kwargs"), [p for p, _ in RANKED_PAIRS], ids=[i for _, i in RANKED_PAIRS])
@pytest.mark.parametrize("graded", [False, True])
def test_id_list_updates_equal_the_functional_of_ids_to_dense(cls, fn, kwargs, graded):
    """``update(ranked_ids=..., relevant_ids=...)`` over uneven batches equals the functional on
    ``ids_to_dense``'s input, with and without scores for the ranked items."""
    ranked, relevant, labels = _id_lists(seed=4)
    labels = labels if graded else None
    scores = torch.round(torch.randn(ranked.shape, generator=torch.Generator().manual_seed(5)) * 2)  # ties
    for given in (None, scores):
        metric = cls(**kwargs)
        for start, stop in itertools.pairwise([0, 1, 13, 30]):
            metric.update(None if given is None else given[start:stop], ranked_ids=ranked[start:stop],
                          relevant_ids=relevant[start:stop],
                          relevant_labels=None if labels is None else labels[start:stop])
        expected = fn(**F.ids_to_dense(ranked, relevant, labels, scores=given), **kwargs)
        torch.testing.assert_close(metric.compute(), expected)


def test_id_list_updates_in_a_collection_with_beyond_accuracy_metrics():
    """One ``MetricCollection.update(ranked_ids=..., relevant_ids=...)`` feeds ranking and beyond-accuracy metrics."""
    ranked, relevant, _ = _id_lists(seed=6)
    collection = MetricCollection({"ndcg": M.NDCG(k=10), "recall": M.Recall(k=12),
                                   "coverage": M.Coverage(num_items=40, k=12)})
    collection.update(ranked_ids=ranked, relevant_ids=relevant)
    out, dense = collection.compute(), F.ids_to_dense(ranked, relevant)
    torch.testing.assert_close(out["ndcg"], F.ndcg(**dense, k=10))
    torch.testing.assert_close(out["recall"], F.recall(**dense, k=12))
    covered = torch.unique(ranked[ranked >= 0]).numel()
    torch.testing.assert_close(out["coverage"], torch.tensor(covered / 40))


def test_id_list_update_errors():
    ranked, relevant, _ = _id_lists(seed=7)
    with pytest.raises(TypeError, match="takes both `ranked_ids` and `relevant_ids`"):
        M.NDCG().update(ranked_ids=ranked)
    with pytest.raises(TypeError, match=r"takes no \['target'\]"):
        M.NDCG().update(target=torch.ones_like(ranked), ranked_ids=ranked, relevant_ids=relevant)
    with pytest.raises(TypeError, match=r"takes `preds` and `target`.*or `ranked_ids` and `relevant_ids`"):
        M.NDCG().update(torch.randn(2, 3))


def test_flat_query_without_relevant_items_in_one_batch_is_judged_at_compute():
    """A flat batch may hold part of a query: only compute knows whether the query has a relevant item."""
    metric = M.NDCG(empty_target_action="error")
    metric.update(torch.tensor([0.9, 0.8]), torch.tensor([0, 0]), indexes=torch.tensor([0, 0]))
    metric.update(torch.tensor([0.7]), torch.tensor([1]), indexes=torch.tensor([0]))
    torch.testing.assert_close(metric.compute(), F.ndcg(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 0, 1])))
    metric.update(torch.tensor([0.5]), torch.tensor([0]), indexes=torch.tensor([1]))
    with pytest.raises(ValueError, match="no relevant item"):
        metric.compute()


def test_inputs_a_measure_does_not_read_are_rejected():
    with pytest.raises(ValueError, match=r"NDCG does not take \['judged'\]"):
        M.NDCG(k=5).update(torch.randn(2, 4), torch.ones(2, 4), judged=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"KendallTau does not take \['ideal_target'\]"):
        M.KendallTau().update(torch.randn(2, 4), torch.ones(2, 4), ideal_target=torch.ones(2, 4))


def test_changing_k_after_construction_is_refused_even_in_place():
    ks = [1, 5]
    metric = M.NDCG(k=ks)
    ks.append(10)  # the caller's list: no effect on the metric
    metric.update(torch.randn(2, 6), torch.ones(2, 6))
    assert metric.compute().shape == (2,)
    metric.k.append(20)
    with pytest.raises(ValueError, match="`k` changed"):
        metric.update(torch.randn(2, 6), torch.ones(2, 6))


_NAN = float("nan")
_GOOD_AND_BAD = {  # a metric, two valid batches and one its update refuses
    "dense": (lambda: M.MRR(), ([[0.9, 0.1]], [[1, 0]]), ([[0.2, 0.7]], [[1, 0]]), ([[_NAN, 0.1]], [[1, 0]])),
    "flat": (lambda: M.NDCG(), ([0.9, 0.1], [1, 0], [0, 0]), ([0.2, 0.7], [1, 0], [1, 1]),
             ([_NAN, 0.1], [1, 0], [2, 2])),
    "compat": (lambda: RetrievalMRR(), ([0.9, 0.1], [1, 0], [0, 0]), ([0.2, 0.7], [1, 0], [1, 1]),
               ([_NAN, 0.1], [1, 0], [2, 2])),
    "ids": (lambda: M.Coverage(k=2, num_items=5), ([[0, 1]],), ([[3, 1]],), ([[0.5, 1.0]],)),
    "gauc": (lambda: M.GAUC(), ([[0.9, 0.1, 0.5]], [[1, 0, 0]]), ([[0.2, 0.7]], [[1, 0]]), ([[0.9, 0.1]], [[1, 0, 0]])),
}


def _call(metric, batch):
    tensors = [torch.tensor(x) for x in batch]
    if len(tensors) == 3:
        return metric(tensors[0], tensors[1], indexes=tensors[2])
    return metric(*tensors)


@pytest.mark.parametrize("case", list(_GOOD_AND_BAD))
def test_a_refused_forward_keeps_the_accumulated_state(case):
    """torchmetrics' forward resets the metric before updating it with the batch: a refused batch lost the state
    accumulated before it. Now the metric is as it was, and later batches add to it as to one that never saw it."""
    make, good, later, bad = _GOOD_AND_BAD[case]
    metric, clean = make(), make()
    for m in (metric, clean):
        _call(m, good)
    with pytest.raises(ValueError):
        _call(metric, bad)
    for m in (metric, clean):
        _call(m, later)
    torch.testing.assert_close(metric.compute(), clean.compute(), equal_nan=True)
    assert metric._update_count == clean._update_count == 2
