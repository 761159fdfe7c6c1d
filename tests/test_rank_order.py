"""Lists given in rank order: scores that repeat one strictly descending row (``ids_to_dense``'s list positions, a
stride-0 broadcast) give every measure the values of the same scores materialised (a contiguous copy), on the numpy
and torch backends, under every tie rule, with padding at the end of a row or in its middle, separate ideal labels,
judged masks, cut-offs past the list, each ``empty_target_action``; and rows that only look ordered (ties, rising
scores) as well. The triton backend's fused kernel reads the broadcast scores as they are (in Triton's CPU
interpreter here)."""

from __future__ import annotations

import inspect

import pytest
import torch
from conftest import TEST_OPTIONS

import torchrank
import torchrank.functional as F
from torchrank.functional import backends

BACKENDS = ["numpy", "torch"]
TIES = ["average", "first", "optimistic", "pessimistic"]
PADDING = ["none", "end", "middle"]
K = 12
# every declared family with a public function (the refused ones included: they must refuse, or not, alike)
FAMILIES = [name for name, spec in F.MEASURES.items() if spec.function is not None]


def _function(name: str):
    spec = F.MEASURES[name]
    options = {**spec.function_params, **TEST_OPTIONS.get(name, {})}
    return spec.function, options


def _id_lists(seed: int, padding: str, b: int = 40, m: int = 8, items: int = 30):
    """Random id lists from a small catalogue (repeated ids happen), graded labels 0-3, -1 padding."""
    g = torch.Generator().manual_seed(seed)
    ranked = torch.randint(0, items, (b, K), generator=g)
    if padding == "end":  # each list cut at a random length of at least one item
        length = torch.randint(1, K + 1, (b, 1), generator=g)
        ranked = torch.where(torch.arange(K) < length, ranked, -1)
    elif padding == "middle":
        ranked[:, 1:][torch.rand(b, K - 1, generator=g) < 0.25] = -1  # the first item stays real
    relevant = torch.randint(0, items, (b, m), generator=g)
    relevant[torch.rand(b, m, generator=g) < 0.3] = -1
    relevant[0] = -1  # a query without relevant items
    labels = torch.randint(0, 4, (b, m), generator=g)
    judged = torch.rand(b, K, generator=g) < 0.7
    return ranked, relevant, labels, judged


def _both(fn, inputs: dict, **kwargs):
    """``fn`` on ``inputs`` as given and with the scores materialised: each value, or the error each raises."""
    out = []
    for preds in (inputs["preds"], inputs["preds"].contiguous()):
        try:
            out.append(fn(**{**inputs, "preds": preds}, **kwargs))
        except ValueError as error:
            out.append(str(error))
    return out


def _assert_same(got, want) -> None:
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
    else:
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("padding", PADDING)
@pytest.mark.parametrize("name", FAMILIES)
def test_every_measure_equals_the_sorted_scores(name: str, padding: str, backend: str) -> None:
    fn, options = _function(name)
    accepts = inspect.signature(fn).parameters
    ranked, relevant, labels, judged = _id_lists(len(name) + len(padding), padding)
    with torchrank.use_backend(backend):
        inputs = F.ids_to_dense(ranked, relevant, labels)
        assert inputs["preds"].stride(0) == 0  # the layout under test
        if "ideal_target" not in accepts:
            del inputs["ideal_target"]
        if "judged" in accepts:
            inputs["judged"] = judged
        cutoffs = [{"k": [1, 3, K, K + 5]}, {"k": None}, {"k": 2}] if "k" in accepts else [{}]
        actions = ["neg", "pos", "skip"] if "empty_target_action" in accepts else [None]
        for ties in TIES:
            for cut in cutoffs:
                for action in actions:
                    kwargs = {**options, **cut, "ties": ties, "reduction": "none"}
                    if action is not None:
                        kwargs["empty_target_action"] = action
                    _assert_same(*_both(fn, inputs, **kwargs))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("padding", PADDING)
def test_evaluate_and_reductions(padding: str, backend: str) -> None:
    ranked, relevant, labels, _ = _id_lists(7, padding, b=300)
    names = ["ndcg@5", "ndcg_exp@20", "map", "map@3", "mrr@4", "P@2", "recall@30", "err@5", "rprec", "success@1"]
    with torchrank.use_backend(backend):
        for graded in (labels, None):
            inputs = F.ids_to_dense(ranked, relevant, graded)
            for ties in TIES:
                got, want = _both(F.evaluate, inputs, measures=names, ties=ties)
                for measure in names:
                    _assert_same(got[measure], want[measure])
                for reduction in ("mean", "sum"):
                    _assert_same(*_both(F.ndcg, inputs, k=10, ties=ties, reduction=reduction))


@pytest.mark.parametrize("backend", BACKENDS)
def test_large_batch(backend: str) -> None:
    """A batch past the size where CPU labels stay in the caller's dtype and are read by blocks of rows."""
    g = torch.Generator().manual_seed(3)
    target = torch.randint(0, 3, (20_000, 60), generator=g)
    preds = torch.linspace(1, 0, 60).expand(target.shape)
    mask = torch.arange(60) < torch.randint(1, 61, (20_000, 1), generator=g)
    with torchrank.use_backend(backend):
        for kwargs in ({}, {"mask": mask}):
            for k in (10, None):
                _assert_same(*_both(F.ndcg, {"preds": preds, "target": target, **kwargs}, k=k, reduction="none"))
                _assert_same(*_both(F.average_precision, {"preds": preds, "target": target, **kwargs}, k=k))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "row",
    [
        [5.0, 4.0, 4.0, 3.0, 2.0, 1.0],  # a tie: ties decide the order
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],  # rising: the reverse order
        [3.0, float("inf"), 2.0, -float("inf"), 1.0, 0.0],  # infinite scores, out of order
        [float("inf"), 5.0, 4.0, 3.0, 2.0, -float("inf")],  # infinite scores in order
        [6, 5, 4, 3, 2, 1],  # integer scores
    ],
)
def test_rows_that_only_look_ordered(row: list, backend: str) -> None:
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, 3, (25, 6), generator=g)
    mask = torch.rand(25, 6, generator=g) < 0.8
    preds = torch.tensor(row).expand(target.shape)
    with torchrank.use_backend(backend):
        for name in ("ndcg", "map", "mrr", "precision", "err", "frp", "rprec"):
            fn, options = _function(name)
            for ties in TIES:
                for extra in ({}, {"mask": mask}):
                    _assert_same(*_both(fn, {"preds": preds, "target": target, **extra}, ties=ties,
                                        reduction="none", **options))


@pytest.mark.parametrize("backend", BACKENDS)
def test_leading_dimensions_and_flat_input(backend: str) -> None:
    """Scores broadcast over leading dimensions; and flat input of the same lists (its own layout, grouped into rows)
    gives the values of the lists in rank order."""
    ranked, relevant, labels, _ = _id_lists(11, "end")
    with torchrank.use_backend(backend):
        inputs = F.ids_to_dense(ranked, relevant, labels)
        stacked = {name: t.reshape(4, 10, *t.shape[1:]) for name, t in inputs.items()}
        stacked["preds"] = inputs["preds"][0].expand(4, 10, K)
        for ties in TIES:
            _assert_same(*_both(F.ndcg, stacked, k=5, ties=ties, reduction="none"))
        mask = inputs["mask"]
        rows = torch.arange(mask.shape[0]).unsqueeze(1).expand_as(mask)
        for fn in (F.ndcg, F.average_precision, F.reciprocal_rank):
            flat = fn(inputs["preds"][mask], inputs["target"][mask], indexes=rows[mask], k=5, reduction="none")
            given = fn(inputs["preds"], inputs["target"], mask=mask, k=5, reduction="none")
            _assert_same(flat, given)


@pytest.mark.skipif(not backends.triton_available(), reason="triton does not import here")
def test_triton_backend_reads_the_broadcast_scores() -> None:
    if not backends.triton_interprets():
        pytest.skip("TRITON_INTERPRET=1 was not set before the kernels were defined")
    ranked, relevant, labels, _ = _id_lists(5, "end", b=6)
    inputs = F.ids_to_dense(ranked, relevant, labels)
    names = ["ndcg@3", "ndcg_exp@5", "map", "mrr@4", "P@2", "recall@5", "err@4", "success@1"]
    with torchrank.use_backend("numpy"):
        want = F.evaluate(measures=names, **{**inputs, "preds": inputs["preds"].contiguous()}, reduction="none")
    with torchrank.use_backend("triton"):
        got = F.evaluate(measures=names, **inputs, reduction="none")
    for name in names:
        torch.testing.assert_close(got[name], want[name])
