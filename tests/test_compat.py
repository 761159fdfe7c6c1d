"""torchrank.compat against torchmetrics.retrieval: equal values where the semantics match (random data, uneven
queries and updates, every empty_target_action, ignore_index, every aggregation, a callable included), and each
documented difference shown as documented. The curve classes are in tests/test_compat_curves.py."""

from __future__ import annotations

import inspect
import itertools

import pytest
import torch
import torchmetrics.retrieval as TM
from torchmetrics import MetricCollection

import torchrank.compat as C
import torchrank.functional as F
import torchrank.metrics as M

TOP_KS = [None, 1, 3, 10, 100]
ACTIONS = ["neg", "pos", "skip"]
AGGREGATIONS = ["mean", "median", "min", "max"]

# (compat class, torchmetrics class, torchrank class, graded labels, argument sets whose semantics match)
CASES = [
    (C.RetrievalNormalizedDCG, TM.RetrievalNormalizedDCG, M.NDCG, True, [{"top_k": k} for k in TOP_KS]),
    (C.RetrievalMAP, TM.RetrievalMAP, M.MAP, False, [{"top_k": k} for k in TOP_KS]),
    (C.RetrievalMRR, TM.RetrievalMRR, M.MRR, False, [{"top_k": k} for k in TOP_KS]),
    (C.RetrievalPrecision, TM.RetrievalPrecision, M.Precision, False,
     [{"top_k": k, "adaptive_k": a} for k in TOP_KS for a in (False, True)]),
    (C.RetrievalRecall, TM.RetrievalRecall, M.Recall, False, [{"top_k": k} for k in TOP_KS]),
    (C.RetrievalHitRate, TM.RetrievalHitRate, M.HitRate, False, [{"top_k": k} for k in TOP_KS]),
    (C.RetrievalRPrecision, TM.RetrievalRPrecision, M.RPrecision, False, [{}]),
    (C.RetrievalFallOut, TM.RetrievalFallOut, M.Recall, False, [{"top_k": k} for k in TOP_KS]),
    (C.RetrievalAUROC, TM.RetrievalAUROC, M.AUROC, False,
     [{"top_k": k, "max_fpr": f} for k in TOP_KS for f in (None, 0.25, 0.6)]),
]
IDS = [case[0].__name__ for case in CASES]

EMPTY_QUERY, NONPOSITIVE_QUERY, ALL_RELEVANT_QUERY = 5, 8, 11  # query ids with a special role


def _custom_aggregation(values, dim=None):
    """torchmetrics' own test suite's callable aggregation."""
    return (values**2).mean() if dim is None else (values**2).mean(dim=dim)


def _data(graded: bool, ignore: bool, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """~600 items of 40 queries (1 to 29 items, ids 5, 8, ..., 122), shuffled; distinct scores, ~15% of them <= 0.

    Query 5 has no relevant item, query 8 has relevant items scored <= 0 only, query 11 only relevant items.
    With ``ignore``, ~8% of the labels are -1 (the ``ignore_index``).
    """
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 30, (40,), generator=g)
    sizes[:4] = torch.tensor([6, 7, 5, 9])
    indexes = torch.repeat_interleave(torch.arange(40) * 3 + 5, sizes)
    n = indexes.numel()
    indexes = indexes[torch.randperm(n, generator=g)]
    preds = torch.randperm(n, generator=g).float() / n - 0.15
    target = torch.randint(0, 4, (n,), generator=g) if graded else (torch.rand(n, generator=g) < 0.3).long()
    target[indexes == EMPTY_QUERY] = 0
    special = indexes == NONPOSITIVE_QUERY
    preds[special] = -0.5 - torch.arange(int(special.sum())) / 1000.0
    target[special] = torch.tensor([1, 0, 1, 0, 0, 1, 0][: int(special.sum())])
    target[indexes == ALL_RELEVANT_QUERY] = 1
    if ignore:
        target[torch.rand(n, generator=g) < 0.08] = -1
    return preds, target, indexes


def _batches(preds, target, indexes):
    """Uneven updates; queries span several of them."""
    bounds = [0, 37, 250, 251, 400, preds.numel()]
    for lo, hi in itertools.pairwise(bounds):
        yield preds[lo:hi], target[lo:hi], indexes[lo:hi]


def _both(compat_cls, tm_cls, batches, **kwargs):
    ours, theirs = compat_cls(**kwargs), tm_cls(**kwargs)
    for p, t, i in batches:
        ours.update(p, t, indexes=i)
        theirs.update(p, t, indexes=i)
    return ours, theirs


def _close(ours, theirs):
    torch.testing.assert_close(ours.to(torch.float64), theirs.to(torch.float64), atol=1e-6, rtol=0)


@pytest.mark.parametrize(("compat_cls", "tm_cls", "base", "graded", "argsets"), CASES, ids=IDS)
def test_matches_torchmetrics(compat_cls, tm_cls, base, graded, argsets):
    assert issubclass(compat_cls, base)
    batches = list(_batches(*_data(graded, ignore=False)))
    ignored = list(_batches(*_data(graded, ignore=True)))
    configs = [(batches, dict(args, empty_target_action=action)) for args in argsets for action in ACTIONS]
    configs += [(batches, dict(argsets[len(argsets) // 2], empty_target_action=action, aggregation=aggregation))
                for action in ACTIONS for aggregation in AGGREGATIONS[1:]]
    configs += [(ignored, dict(args, empty_target_action="skip", ignore_index=-1)) for args in argsets]
    configs += [(ignored, dict(argsets[-1], empty_target_action="pos", ignore_index=-1, aggregation="median"))]
    configs += [(batches, dict(args, empty_target_action=action, aggregation=_custom_aggregation))
                for args in argsets[:: max(1, len(argsets) // 3)] for action in ACTIONS]
    for data, kw in configs:
        ours, theirs = _both(compat_cls, tm_cls, data, **kw)
        _close(ours.compute(), theirs.compute())


@pytest.mark.parametrize(("compat_cls", "tm_cls", "base", "graded", "argsets"), CASES, ids=IDS)
def test_error_action_matches_torchmetrics(compat_cls, tm_cls, base, graded, argsets):
    preds, target, indexes = _data(graded, ignore=False)
    # the data holds an empty query (no relevant item; for fall-out: no non-relevant item): both raise at compute
    ours, theirs = _both(compat_cls, tm_cls, _batches(preds, target, indexes), empty_target_action="error")
    with pytest.raises(ValueError, match="query with no"):
        theirs.compute()
    with pytest.raises(ValueError, match="query with no"):
        ours.compute()
    # without such queries: equal values, although queries are split so a batch can lack their relevant items
    relevant = (target > 0).long()
    per_query = torch.zeros(indexes.max() + 1).index_add_(0, indexes, relevant.float())
    size = torch.zeros(indexes.max() + 1).index_add_(0, indexes, torch.ones(indexes.numel()))
    keep = ((per_query > 0) & (per_query < size))[indexes]
    for args in argsets:
        ours, theirs = _both(compat_cls, tm_cls, _batches(preds[keep], target[keep], indexes[keep]),
                             empty_target_action="error", **args)
        _close(ours.compute(), theirs.compute())


def test_error_action_waits_for_compute():
    """A query whose first batch has no relevant item is not an error: torchmetrics decides at compute."""
    batches = [(torch.tensor([0.5, 0.4]), torch.tensor([0, 0]), torch.tensor([0, 0])),
               (torch.tensor([0.3]), torch.tensor([1]), torch.tensor([0]))]
    ours, theirs = _both(C.RetrievalNormalizedDCG, TM.RetrievalNormalizedDCG, batches, empty_target_action="error")
    _close(ours.compute(), theirs.compute())


def test_compute_before_update_raises_like_torchmetrics():
    with pytest.warns(UserWarning, match="before the ``update``"), pytest.raises(ValueError):
        TM.RetrievalMRR().compute()
    with pytest.warns(UserWarning, match="before the ``update``"), pytest.raises(ValueError, match="before any update"):
        C.RetrievalMRR().compute()


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_all_queries_skipped_gives_zero(aggregation):
    batches = [(torch.tensor([0.5, 0.4, 0.3]), torch.tensor([0, 0, 0]), torch.tensor([0, 0, 1]))]
    ours, theirs = _both(C.RetrievalMRR, TM.RetrievalMRR, batches, empty_target_action="skip", aggregation=aggregation)
    assert theirs.compute() == 0
    assert ours.compute() == 0


@pytest.mark.parametrize("top_k", [1, 3, 10])
def test_map_at_k_is_torchmetrics_and_trec_eval_is_torchrank_metrics_map(top_k):
    """compat's AP@k divides by the relevant items found in the top k, as torchmetrics; torchrank.metrics.MAP(k) by all
    relevant items (trec_eval's map_cut), and with denominator="found" it is compat's value without the score
    filter."""
    preds, target, indexes = _data(graded=False, ignore=False)
    ours, theirs = _both(C.RetrievalMAP, TM.RetrievalMAP, _batches(preds, target, indexes), top_k=top_k)
    trec, found = M.MAP(k=top_k), M.MAP(k=top_k, denominator="found")
    for p, t, i in _batches(preds, target, indexes):
        trec.update(p, torch.where(p > 0, t, 0), indexes=i)  # torchmetrics' score filter, then trec_eval's AP@k
        found.update(p, torch.where(p > 0, t, 0), indexes=i, ideal_target=t)  # R and the empty rule before it
    _close(ours.compute(), theirs.compute())
    _close(found.compute(), theirs.compute())
    assert trec.compute() < ours.compute() - 0.01


def test_map_documented_example():
    preds, target = torch.tensor([0.6, 0.5, 0.4, 0.3, 0.2, 0.1]), torch.tensor([1, 0, 0, 1, 0, 1])
    indexes = torch.zeros(6, dtype=torch.long)
    ours, theirs = _both(C.RetrievalMAP, TM.RetrievalMAP, [(preds, target, indexes)], top_k=3)
    _close(ours.compute(), torch.tensor(1.0))
    _close(theirs.compute(), torch.tensor(1.0))
    trec = M.MAP(k=3)
    trec.update(preds, target, indexes=indexes)
    _close(trec.compute(), torch.tensor(1 / 3))
    whole = C.RetrievalMAP()
    whole.update(preds, target, indexes)
    _close(whole.compute(), torch.tensor((1 + 2 / 4 + 3 / 6) / 3))


def test_map_ties_across_the_cut_off_are_the_expectation_over_orders():
    """torchmetrics' AP@k under ties depends on its sort's order; compat's is the mean over the tie orders."""
    preds = torch.tensor([0.9, 0.5, 0.5, 0.5, 0.1])
    target = torch.tensor([0, 1, 0, 1, 1])
    metric = C.RetrievalMAP(top_k=2)
    metric.update(preds, target, torch.zeros(5, dtype=torch.long))
    # positions 2..4 hold the tied items in 3 orders of labels (1,0,1), (0,1,1), (1,1,0), equally likely: at k = 2
    # the found items are 1 (value 1/2) with probability 2/3, none (value 0) with 1/3
    _close(metric.compute(), torch.tensor(2 / 3 * 0.5))
    first = C.RetrievalMAP(top_k=2, ties="first")
    first.update(preds, target, torch.zeros(5, dtype=torch.long))
    _close(first.compute(), torch.tensor(0.5))


def test_nonpositive_scores_as_torchmetrics():
    """The documented example: scores <= 0 zero the labels in AP, RR, P, R (not in hit rate, R-prec, NDCG)."""
    preds, target, indexes = torch.tensor([-0.1, -0.5, -0.9]), torch.tensor([1, 0, 1]), torch.zeros(3, dtype=torch.long)
    filtered = [(C.RetrievalMAP, TM.RetrievalMAP, {}), (C.RetrievalMRR, TM.RetrievalMRR, {}),
                (C.RetrievalPrecision, TM.RetrievalPrecision, {"top_k": 2}),
                (C.RetrievalRecall, TM.RetrievalRecall, {"top_k": 2})]
    for compat_cls, tm_cls, kw in filtered:
        for action in ("neg", "pos", "skip"):  # the query is not empty: its value is 0 whatever the action
            ours, theirs = _both(compat_cls, tm_cls, [(preds, target, indexes)], empty_target_action=action, **kw)
            assert theirs.compute() == 0
            assert ours.compute() == 0
    unfiltered = [(C.RetrievalHitRate, TM.RetrievalHitRate, {"top_k": 2}),
                  (C.RetrievalRPrecision, TM.RetrievalRPrecision, {}),
                  (C.RetrievalNormalizedDCG, TM.RetrievalNormalizedDCG, {})]
    for compat_cls, tm_cls, kw in unfiltered:
        ours, theirs = _both(compat_cls, tm_cls, [(preds, target, indexes)], **kw)
        assert theirs.compute() > 0
        _close(ours.compute(), theirs.compute())
    # torchrank's own classes do not filter
    native = M.MAP()
    native.update(preds, target, indexes=indexes)
    _close(native.compute(), torch.tensor(5 / 6))


def test_ties_ndcg_matches_torchmetrics():
    g = torch.Generator().manual_seed(3)
    n = 500
    preds = torch.randint(0, 6, (n,), generator=g).float() / 5  # heavy ties
    target = torch.randint(0, 4, (n,), generator=g)
    indexes = torch.randint(0, 30, (n,), generator=g)
    for top_k in (None, 1, 3, 10):
        ours, theirs = _both(C.RetrievalNormalizedDCG, TM.RetrievalNormalizedDCG, _batches(preds, target, indexes),
                             top_k=top_k)
        _close(ours.compute(), theirs.compute())


def test_ties_documented_example():
    """Two tied items, the first relevant: torchmetrics gives RR 1.0 or 0.5 by its sort's order, compat 0.75."""
    preds, target, indexes = torch.tensor([0.5, 0.5]), torch.tensor([1, 0]), torch.tensor([0, 0])
    ours, theirs = _both(C.RetrievalMRR, TM.RetrievalMRR, [(preds, target, indexes)])
    assert theirs.compute().item() in (0.5, 1.0)
    _close(ours.compute(), torch.tensor(0.75))
    for ties, value in (("optimistic", 1.0), ("pessimistic", 0.5), ("first", 1.0)):
        metric = C.RetrievalMRR(ties=ties)
        metric.update(preds, target, indexes)
        _close(metric.compute(), torch.tensor(value))


def test_float64_scores_rank_as_float32():
    """torchmetrics casts scores to float32, so scores equal in float32 tie; compat does the same."""
    preds = torch.tensor([0.3, 0.3 + 1e-12, 0.1], dtype=torch.float64)
    ours, theirs = _both(C.RetrievalNormalizedDCG, TM.RetrievalNormalizedDCG,
                         [(preds, torch.tensor([0, 2, 1]), torch.tensor([0, 0, 0]))])
    _close(ours.compute(), theirs.compute())
    target = torch.tensor([0, 2, 1])
    _close(ours.compute(), F.ndcg(preds.float(), target))  # the pair tied
    assert abs(ours.compute() - F.ndcg(preds, target)) > 0.01  # in float64 it is no tie


def test_multidimensional_input_is_flattened():
    preds, target, indexes = _data(graded=True, ignore=False)
    n = preds.numel() // 4 * 4
    batch = (preds[:n].reshape(4, -1), target[:n].reshape(4, -1), indexes[:n].reshape(4, -1))
    ours, theirs = _both(C.RetrievalNormalizedDCG, TM.RetrievalNormalizedDCG, [batch], top_k=5)
    _close(ours.compute(), theirs.compute())


def test_forward_gives_the_batch_value():
    preds, target, indexes = _data(graded=False, ignore=False)
    ours, theirs = C.RetrievalRecall(top_k=3), TM.RetrievalRecall(top_k=3)
    for p, t, i in _batches(preds, target, indexes):
        _close(ours(p, t, indexes=i), theirs(p, t, indexes=i))
    _close(ours.compute(), theirs.compute())


def test_compute_groups_keep_ignore_index_apart():
    """Equal states after a first batch must not merge metrics that store different items later."""
    first = (torch.tensor([0.9, 0.8]), torch.tensor([1, 1]), torch.tensor([0, 0]))
    second = (torch.tensor([0.7, 0.6, 0.5]), torch.tensor([0, 1, 0]), torch.tensor([1, 1, 1]))
    collection = MetricCollection({"all": C.RetrievalMRR(), "no_zero": C.RetrievalMRR(ignore_index=0)})
    for batch in (first, second):
        collection.update(*batch)
    values = collection.compute()
    assert len(collection.compute_groups) == 2
    _close(values["no_zero"], torch.tensor(1.0))  # a merged group would give 0.75 (torchmetrics' collection does)
    for name, kw in (("all", {}), ("no_zero", {"ignore_index": 0})):
        reference = TM.RetrievalMRR(**kw)
        for batch in (first, second):
            reference.update(*batch)
        _close(values[name], reference.compute())


def test_same_names_signatures_and_direction():
    for compat_cls, tm_cls, *_ in CASES:
        assert compat_cls.__name__ == tm_cls.__name__
        ours = [p for p in inspect.signature(compat_cls).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
        theirs = [p for p in inspect.signature(tm_cls).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
        assert [(p.name, p.default) for p in ours] == [(p.name, p.default) for p in theirs]
        assert compat_cls.higher_is_better == tm_cls.higher_is_better
    assert set(C.__all__) - {"CompatWarning"} == set(TM.__all__)


def test_constructors_bind_arguments_as_torchmetrics_does():
    """One constructor serves every class: positional arguments land where torchmetrics' do, and an argument a class
    does not take is refused as torchmetrics refuses it."""
    for compat_cls, tm_cls, *_ in CASES:
        names = [p.name for p in inspect.signature(tm_cls).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
        values = {"empty_target_action": "skip", "ignore_index": -3, "top_k": 4, "adaptive_k": True, "max_fpr": 0.5}
        values["aggregation"] = "max"
        ours = compat_cls(*[values[n] for n in names])
        theirs = tm_cls(*[values[n] for n in names])
        kept = [n for n in names if hasattr(theirs, n)]  # torchmetrics' MAP keeps no top_k
        assert len(kept) >= 3
        assert {n: getattr(ours, n) for n in kept} == {n: getattr(theirs, n) for n in kept}
    for compat_cls, tm_cls, option in ((C.RetrievalRPrecision, TM.RetrievalRPrecision, "top_k"),
                                       (C.RetrievalMAP, TM.RetrievalMAP, "adaptive_k")):
        with pytest.raises(ValueError, match=option):
            tm_cls(**{option: 2})
        with pytest.raises(ValueError, match=option):
            compat_cls(**{option: 2})
    with pytest.raises(TypeError, match="positional"):
        C.RetrievalMRR("neg", None, None, "mean", "extra")


def test_docstrings_document_each_constructor_argument_in_order():
    for compat_cls, *_ in CASES:
        args = compat_cls.__doc__.split("    Args:\n")[1].split("\n\n")[0]
        documented = [line.split(":")[0].strip() for line in args.splitlines() if not line.startswith(" " * 12)]
        assert documented == list(inspect.signature(compat_cls).parameters), compat_cls.__name__


def test_every_torchmetrics_retrieval_class_has_a_drop_in():
    assert not C.NOT_PROVIDED
    for name in TM.__all__:
        assert getattr(C, name).__name__ == name
    with pytest.raises(AttributeError):
        C.RetrievalNothing  # noqa: B018


def test_bool_indexes_or_scores_raise_value_error_as_torchmetrics():
    preds, target, indexes = torch.tensor([0.5, 0.4]), torch.tensor([1, 0]), torch.tensor([0, 0])
    for compat_cls, tm_cls, *_ in CASES:
        for bad, message in (((preds, target, indexes.bool()), "`indexes` must be a tensor of long integers"),
                             ((preds.bool(), target, indexes), "`preds` must be a tensor of floats")):
            with pytest.raises(ValueError, match=message):
                tm_cls()(*bad[:2], indexes=bad[2])
            with pytest.raises(ValueError, match=message):
                compat_cls()(*bad[:2], indexes=bad[2])
    metric = C.RetrievalMRR()  # more lenient than torchmetrics: integer ids of any dtype, integer scores
    metric.update(torch.tensor([3, 1]), target, indexes.to(torch.int32))
    _close(metric.compute(), torch.tensor(1.0))


def test_unsupported_or_invalid_arguments_raise():
    with pytest.raises(ValueError, match="`aggregation`"):
        C.RetrievalMRR(aggregation="sum")
    with pytest.raises(ValueError, match="`empty_target_action`"):
        C.RetrievalMRR(empty_target_action="zero")
    with pytest.raises(ValueError, match="`ignore_index`"):
        C.RetrievalMRR(ignore_index=0.5)
    for top_k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="`top_k`"):
            C.RetrievalMAP(top_k=top_k)
    with pytest.raises(ValueError, match="`adaptive_k`"):
        C.RetrievalPrecision(top_k=2, adaptive_k=1)
    for option in ({"k": 3}, {"gain": "exponential"}, {"relevance_threshold": 2}, {"keep_per_query": True}):
        with pytest.raises(TypeError, match=f"not `{next(iter(option))}`"):
            C.RetrievalNormalizedDCG(**option)
    with pytest.raises(ValueError, match="`ties`"):
        C.RetrievalMRR(ties="random")
    metric = C.RetrievalMRR()
    with pytest.raises(ValueError, match="`indexes` cannot be None"):
        metric.update(torch.tensor([0.5]), torch.tensor([1]), None)
    with pytest.raises(ValueError, match="same shape"):
        metric.update(torch.tensor([0.5, 0.4]), torch.tensor([1]), torch.tensor([0]))
    with pytest.raises(ValueError, match="non-empty"):
        C.RetrievalMRR(ignore_index=1).update(torch.tensor([0.5]), torch.tensor([1]), torch.tensor([0]))


def test_label_checks():
    indexes = torch.tensor([0, 0])
    with pytest.raises(ValueError, match="binary"):
        C.RetrievalMAP().update(torch.tensor([0.5, 0.4]), torch.tensor([2, 0]), indexes)
    # torchmetrics accepts fractional labels in its binary metrics (and weighs them); compat refuses them
    TM.RetrievalMRR().update(torch.tensor([0.5, 0.4]), torch.tensor([0.5, 0.0]), indexes)
    with pytest.raises(ValueError, match="fraction"):
        C.RetrievalMRR().update(torch.tensor([0.5, 0.4]), torch.tensor([0.5, 0.0]), indexes)
    # torchmetrics' NDCG accepts negative labels; torchrank refuses them
    TM.RetrievalNormalizedDCG().update(torch.tensor([0.5, 0.4]), torch.tensor([-1, 2]), indexes)
    with pytest.raises(ValueError, match=">= 0"):
        C.RetrievalNormalizedDCG().update(torch.tensor([0.5, 0.4]), torch.tensor([-1, 2]), indexes)
    # bool labels are fine
    ours, theirs = _both(C.RetrievalFallOut, TM.RetrievalFallOut,
                         [(torch.tensor([0.5, 0.4, 0.3]), torch.tensor([True, False, False]), torch.tensor([0, 0, 0]))],
                         top_k=2)
    _close(ours.compute(), theirs.compute())
