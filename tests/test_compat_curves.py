"""torchrank.compat's RetrievalPrecisionRecallCurve and RetrievalRecallAtFixedPrecision against torchmetrics 1.9's
classes on random data (uneven queries over several updates, an empty query, every empty_target_action,
ignore_index, max_k, adaptive_k, every aggregation, a callable included), their tie rule, errors and plots."""

from __future__ import annotations

import itertools

import matplotlib
import pytest
import torch
import torchmetrics.retrieval as TM

import torchrank.compat as C
import torchrank.functional as F

matplotlib.use("Agg")

EMPTY_QUERY = 4


def _data(seed: int = 0, ignore: bool = False):
    """~300 items of 25 queries of 1 to 24 items, shuffled, distinct scores; query 4 has no relevant item."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 25, (25,), generator=g)
    indexes = torch.repeat_interleave(torch.arange(25) * 2, sizes)
    n = indexes.numel()
    indexes = indexes[torch.randperm(n, generator=g)]
    preds = torch.randperm(n, generator=g).float() / n - 0.2
    target = (torch.rand(n, generator=g) < 0.35).long()
    target[indexes == EMPTY_QUERY] = 0
    if ignore:
        target[torch.rand(n, generator=g) < 0.1] = -1
    return preds, target, indexes


def _batches(preds, target, indexes):
    bounds = [0, 41, 150, 151, preds.numel()]
    for lo, hi in itertools.pairwise(bounds):
        yield preds[lo:hi], target[lo:hi], indexes[lo:hi]


def _both(ours, theirs, data):
    for p, t, i in _batches(*data):
        ours.update(p, t, indexes=i)
        theirs.update(p, t, indexes=i)
    return ours.compute(), theirs.compute()


def _close(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def _square_mean(values, dim=None):
    return (values**2).mean() if dim is None else (values**2).mean(dim=dim)


AGGREGATIONS = ["mean", "median", "min", "max", _square_mean]


@pytest.mark.parametrize("max_k", [None, 1, 3, 10, 40])
@pytest.mark.parametrize("adaptive_k", [False, True])
def test_curve_equals_torchmetrics(max_k, adaptive_k):
    data, ignored = _data(), _data(1, ignore=True)
    for action, aggregation in itertools.product(["neg", "pos", "skip"], AGGREGATIONS):
        args = {"max_k": max_k, "adaptive_k": adaptive_k, "empty_target_action": action, "aggregation": aggregation}
        _close(*_both(C.RetrievalPrecisionRecallCurve(**args), TM.RetrievalPrecisionRecallCurve(**args), data))
    args = {"max_k": max_k, "adaptive_k": adaptive_k, "ignore_index": -1, "empty_target_action": "skip"}
    _close(*_both(C.RetrievalPrecisionRecallCurve(**args), TM.RetrievalPrecisionRecallCurve(**args), ignored))


@pytest.mark.parametrize("min_precision", [0.0, 0.2, 0.4, 0.6, 1.0])
def test_recall_at_fixed_precision_equals_torchmetrics(min_precision):
    for max_k, adaptive_k, action in itertools.product([None, 2, 8], [False, True], ["neg", "pos", "skip"]):
        args = {"max_k": max_k, "adaptive_k": adaptive_k, "empty_target_action": action}
        _close(*_both(C.RetrievalRecallAtFixedPrecision(min_precision, **args),
                      TM.RetrievalRecallAtFixedPrecision(min_precision, **args), _data(2)))
    args = {"max_k": 5, "aggregation": "median", "ignore_index": -1}
    _close(*_both(C.RetrievalRecallAtFixedPrecision(min_precision, **args),
                  TM.RetrievalRecallAtFixedPrecision(min_precision, **args), _data(3, ignore=True)))


def test_every_query_skipped_and_forward():
    batch = (torch.tensor([0.5, 0.4, 0.3]), torch.tensor([0, 0, 0]), torch.tensor([0, 0, 1]))
    ours = C.RetrievalPrecisionRecallCurve(max_k=2, empty_target_action="skip")
    theirs = TM.RetrievalPrecisionRecallCurve(max_k=2, empty_target_action="skip")
    _close(ours(*batch[:2], indexes=batch[2]), theirs(*batch[:2], indexes=batch[2]))
    _close(ours.compute(), theirs.compute())
    preds, target, indexes = _data(4)
    ours, theirs = C.RetrievalRecallAtFixedPrecision(0.3), TM.RetrievalRecallAtFixedPrecision(0.3)
    for p, t, i in _batches(preds, target, indexes):  # forward: the batch's value, and the state accumulates
        _close(ours(p, t, indexes=i), theirs(p, t, indexes=i))
    _close(ours.compute(), theirs.compute())


def test_error_action():
    data = _data(5)
    for cls in ("RetrievalPrecisionRecallCurve", "RetrievalRecallAtFixedPrecision"):
        for metric in (getattr(C, cls)(empty_target_action="error"), getattr(TM, cls)(empty_target_action="error")):
            for p, t, i in _batches(*data):
                metric.update(p, t, indexes=i)
            with pytest.raises(ValueError, match="query with no positive target"):
                metric.compute()


def test_ties_are_the_expectation_over_orders():
    """torchmetrics' curve under ties takes its sort's order; compat's is P@k and R@k with ties averaged exactly."""
    g = torch.Generator().manual_seed(6)
    preds = torch.randint(0, 4, (200,), generator=g).float()
    target = torch.randint(0, 2, (200,), generator=g)
    indexes = torch.randint(0, 15, (200,), generator=g)
    metric = C.RetrievalPrecisionRecallCurve(max_k=6, empty_target_action="skip")
    metric.update(preds, target, indexes)
    precision, recall, top_k = metric.compute()
    for k in range(1, 7):
        torch.testing.assert_close(precision[k - 1], F.precision(preds, target, k=k, indexes=indexes,
                                                                 empty_target_action="skip"))
        torch.testing.assert_close(recall[k - 1], F.recall(preds, target, k=k, indexes=indexes,
                                                           empty_target_action="skip"))
    assert torch.equal(top_k, torch.arange(1, 7))
    first = C.RetrievalPrecisionRecallCurve(max_k=2, ties="first")  # input order among ties
    first.update(torch.tensor([0.5, 0.5]), torch.tensor([1, 0]), torch.tensor([0, 0]))
    torch.testing.assert_close(first.compute()[0], torch.tensor([1.0, 0.5]))


def test_arguments_checked_as_torchmetrics():
    for cls in (C.RetrievalPrecisionRecallCurve, TM.RetrievalPrecisionRecallCurve):
        for bad, match in (({"max_k": 0}, "`max_k`"), ({"max_k": 2.0}, "`max_k`"), ({"adaptive_k": 1}, "`adaptive_k`"),
                           ({"empty_target_action": "x"}, "`empty_target_action`"), ({"ignore_index": 0.5}, "ignore"),
                           ({"aggregation": "sum"}, "`aggregation`")):
            with pytest.raises(ValueError, match=match):
                cls(**bad)
    for cls in (C.RetrievalRecallAtFixedPrecision, TM.RetrievalRecallAtFixedPrecision):
        for bad in (1, 1.5, -0.1):
            with pytest.raises(ValueError, match="`min_precision`"):
                cls(min_precision=bad)
    with pytest.raises(ValueError, match="`ties`"):
        C.RetrievalPrecisionRecallCurve(ties="random")
    metric = C.RetrievalPrecisionRecallCurve()
    with pytest.raises(ValueError, match="binary"):
        metric.update(torch.tensor([0.5, 0.4]), torch.tensor([2, 0]), torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="`indexes` must be a tensor of long integers"):
        metric.update(torch.tensor([0.5, 0.4]), torch.tensor([1, 0]), torch.tensor([True, True]))
    with pytest.raises(ValueError, match="before any update"):
        metric.compute()


def test_plots():
    metric = C.RetrievalPrecisionRecallCurve(max_k=5)
    preds, target, indexes = _data(7)
    metric.update(preds, target, indexes)
    fig, ax = metric.plot()
    assert ax.get_xlabel() == "Recall" and ax.get_ylabel() == "Precision"
    line = ax.get_lines()[0]
    precision, recall, _ = metric.compute()
    assert line.get_xdata().tolist() == pytest.approx(recall.tolist())
    assert line.get_ydata().tolist() == pytest.approx(precision.tolist())
    at = C.RetrievalRecallAtFixedPrecision(0.3)
    values = [at(p, t, indexes=i)[0] for p, t, i in _batches(preds, target, indexes)]
    fig, ax = at.plot(values)
    assert fig is not None
    matplotlib.pyplot.close("all")


def _rank_states(metric):
    """A rank's tensors as its sync gathers them: each list state as one tensor (an empty one of its dtype when the
    rank saw no data), in state order."""
    empty = {"preds": torch.float32, "target": torch.float32, "indexes": torch.int64}
    return [torch.cat(getattr(metric, name)) if getattr(metric, name) else torch.zeros(0, dtype=empty[name])
            for name in metric._reductions]


@pytest.mark.parametrize("cls", ["RetrievalPrecisionRecallCurve", "RetrievalRecallAtFixedPrecision"])
def test_sync_over_ranks_equals_one_process(cls):
    """Two ranks, one of them with no data, and a query split across them: the synced value is one process's on all
    the data (a gather stand-in pairs each state with the other rank's)."""
    preds, target, indexes = _data(8)
    half = preds.numel() // 2
    make = lambda: getattr(C, cls)(max_k=6, sync_on_compute=False)  # noqa: E731
    whole, first, busy, idle, other = (make() for _ in range(5))
    whole.update(preds, target, indexes)
    for metric in (first, busy):
        metric.update(preds[:half], target[:half], indexes[:half])
    other.update(preds[half:], target[half:], indexes[half:])
    for metric, peer, expected in ((busy, other, whole.compute()), (idle, busy, first.compute())):
        gathered = iter(_rank_states(peer))
        metric.sync(dist_sync_fn=lambda tensor, group=None, it=gathered: [tensor, next(it)],
                    distributed_available=lambda: True)
        _close(metric.compute(), expected)


def test_scriptable_as_torchmetrics_metrics_are():
    for cls in (C.RetrievalPrecisionRecallCurve, C.RetrievalRecallAtFixedPrecision):
        torch.jit.script(cls())
