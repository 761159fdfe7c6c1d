"""Inputs beyond scores and labels: bpref's judged count (num_judged) and an ideal_target consistent with target.

bpref needs every judged non-relevant item of a query, retrieved or not: with an ideal_target (the list does not hold
every judged item) it takes num_judged or refuses, from F.bpref, F.evaluate and RankingMetrics, and equals
pytrec_eval (trec_eval's C code) on generated qrels with judged non-relevant documents the run never retrieves. The
value checks refuse a count below R and an ideal_target holding fewer labels than target, on every backend: at once
on numpy, on the device for the others (read once by a functional, kept by a metric's update and raised at compute).
"""

from __future__ import annotations

import random

import pytest
import torch
from test_backends import counting

import torchrank
import torchrank.functional as F
from torchrank.functional import backends
from torchrank.functional.measures import RankedLists
from torchrank.io import trec_to_dense
from torchrank.metrics import NDCG, RankingMetrics, Recall

pytrec_eval = pytest.importorskip("pytrec_eval")

TRITON = pytest.mark.skipif(not backends.triton_available(), reason="triton does not import here")
BACKENDS = ["numpy", "torch", pytest.param("triton", marks=TRITON)]
MISSING = r"`ideal_target` must hold the labels of every judged item"
BELOW_R = r"`num_judged` must count every judged item of its query: its R relevant ones, retrieved or not, and"


def _runnable(backend: str) -> None:
    if backend == "triton" and not torch.cuda.is_available() and not backends.triton_interprets():
        pytest.skip("no CUDA device and no Triton interpreter")


def _collection(seed: int, queries: int = 30) -> tuple[dict, dict]:
    """Qrels of 5 to 40 documents (labels -1 to 2; mostly judged non-relevant) and a run retrieving a few of them
    among unjudged ones: most judged non-relevant documents are never retrieved."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(queries):
        docs = [f"d{i:03d}" for i in range(100)]
        qrels[f"q{q}"] = {d: rng.choice([-1, 0, 0, 0, 0, 1, 1, 2]) for d in rng.sample(docs, rng.randint(5, 40))}
        run[f"q{q}"] = {d: rng.random() for d in rng.sample(docs, rng.randint(1, 30))}
    return qrels, run


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("level", [1, 2])
def test_bpref_with_num_judged_equals_pytrec_eval(backend, level):
    qrels, run = _collection(level)
    batch = trec_to_dense(qrels, run)
    assert bool((batch.num_judged > (batch.judged & batch.mask).sum(1)).any())  # judged documents not retrieved
    inputs = {"mask": batch.mask, "ideal_target": batch.ideal_target, "judged": batch.judged, "ties": "first",
              "relevance_threshold": level}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}, relevance_level=level).evaluate(run)
    expected = torch.tensor([ref[q]["bpref"] for q in batch.qids], dtype=torch.float64)
    with torchrank.use_backend(backend):
        function = F.bpref(batch.preds, batch.target, num_judged=batch.num_judged, reduction="none", **inputs)
        evaluated = F.evaluate(batch.preds, batch.target, ["bpref", "map"], num_judged=batch.num_judged,
                               reduction="none", **inputs)["bpref"]  # fmt: skip
        metric = RankingMetrics(["bpref", "map"], ties="first", relevance_threshold=level, keep_per_query=True)
        for rows in (slice(0, 11), slice(11, None)):  # two updates
            metric.update(batch.preds[rows], batch.target[rows], mask=batch.mask[rows], judged=batch.judged[rows],
                          ideal_target=batch.ideal_target[rows], num_judged=batch.num_judged[rows])  # fmt: skip
        kept = metric.per_query_values()[:, 0]
        mean = metric.compute()["bpref"]
    for got in (function, evaluated, kept):
        torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-6)
    assert mean.item() == pytest.approx(expected.mean().item(), abs=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_infap_with_the_pool_from_evaluate_and_the_metrics_equals_pytrec_eval(backend):
    """evaluate and the metric classes take infAP's pooled_unjudged (qrels label -1) as the function does, in any
    column order (here shuffled: the scores are distinct, so ties='first' is trec_eval's order)."""
    qrels, run = _collection(3)
    batch = trec_to_dense(qrels, run)
    assert bool(batch.pooled_unjudged.any())
    shuffle = torch.randperm(batch.preds.shape[1], generator=torch.Generator().manual_seed(0))
    preds, target, mask, judged, pooled = (x[:, shuffle] for x in (batch.preds, batch.target, batch.mask,
                                                                    batch.judged, batch.pooled_unjudged))
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"infAP"}).evaluate(run)
    expected = torch.tensor([ref[q]["infAP"] for q in batch.qids], dtype=torch.float64)
    inputs = {"mask": mask, "judged": judged, "ideal_target": batch.ideal_target, "ties": "first"}
    with torchrank.use_backend(backend):
        evaluated = F.evaluate(preds, target, ["infap", "bpref"], pooled_unjudged=pooled, num_judged=batch.num_judged,
                               reduction="none", **inputs)  # fmt: skip
        metric = RankingMetrics(["infap"], ties="first", keep_per_query=True)
        metric.update(preds, target, mask=mask, judged=judged, ideal_target=batch.ideal_target, pooled_unjudged=pooled)
        without = F.evaluate(preds, target, ["infap"], reduction="none", **inputs)["infap"]
    torch.testing.assert_close(evaluated["infap"].double(), expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(metric.per_query_values()[:, 0], expected, rtol=0, atol=1e-6)
    assert not torch.allclose(without.double(), expected, atol=1e-6)  # the pool matters in these qrels
    with pytest.raises(ValueError, match="`pooled_unjudged` takes dense or id-list updates"):
        RankingMetrics(["infap"]).update(preds[0], target[0], indexes=torch.zeros_like(target[0]),
                                         pooled_unjudged=pooled[0])  # fmt: skip


def test_the_issue_example_and_the_list_alone():
    """Relevant a, judged non-relevant n1 retrieved, relevant b, n2 and n3 judged but never retrieved: NR = 3,
    bpref = (1 + (1 - 1 / min(3, 2))) / 2 = 0.75 (pytrec_eval's); read from the list alone NR = 1 gave 0.5."""
    qrels = {"q": {"a": 1, "n1": 0, "b": 1, "n2": 0, "n3": 0}}
    run = {"q": {"a": 3.0, "n1": 2.0, "b": 1.0}}
    assert pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}).evaluate(run)["q"]["bpref"] == 0.75
    preds, target = torch.tensor([3.0, 2.0, 1.0]), torch.tensor([1, 0, 1])
    ideal = torch.tensor([1, 1, 0, 0, 0])
    assert F.bpref(preds, target, ideal_target=ideal, num_judged=torch.tensor(5)).item() == 0.75
    assert F.evaluate(preds, target, ["bpref"], ideal_target=ideal, num_judged=torch.tensor([5]))["bpref"] == 0.75
    # without ideal_target the list is every judged item, for R as for NR: the three documents judged, NR = 1
    assert F.bpref(preds, target).item() == F.evaluate(preds, target, ["bpref"])["bpref"].item() == 0.5


def test_bpref_without_num_judged_refuses_an_ideal_target():
    preds, target, ideal = torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[1, 0, 1]]), torch.tensor([[1, 1, 0, 0]])
    for call in (
        lambda: F.bpref(preds, target, ideal_target=ideal),
        lambda: F.evaluate(preds, target, ["ndcg", "bpref"], ideal_target=ideal),
        lambda: RankingMetrics(["bpref"]).update(preds, target, ideal_target=ideal),
    ):
        with pytest.raises(ValueError, match=r"bpref needs `num_judged`"):
            call()
    # measures that do not read it ignore num_judged; a class whose functional has no such input refuses it
    assert F.evaluate(preds, target, ["ndcg"], ideal_target=ideal, num_judged=torch.tensor([4]))["ndcg"] > 0
    with pytest.raises(ValueError, match=r"does not take \['num_judged'\]"):
        NDCG().update(preds, target, num_judged=torch.tensor([4]))
    with pytest.raises(ValueError, match="`num_judged` takes dense or id-list updates"):
        RankingMetrics(["bpref"]).update(preds[0], target[0], indexes=torch.zeros(3, dtype=torch.long),
                                         num_judged=torch.tensor([3]))  # fmt: skip


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_judged_count_below_r_is_refused(backend):
    preds, target, ideal = torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[1, 0, 1]]), torch.tensor([[1, 1, 1, 0]])
    with torchrank.use_backend(backend):
        # R = 3 and one judged non-relevant item listed: 4 at least (a negative count is below any)
        for count in (2, 3, -1):
            with pytest.raises(ValueError, match=BELOW_R):
                F.bpref(preds, target, ideal_target=ideal, num_judged=torch.tensor([count]))
            with pytest.raises(ValueError, match=BELOW_R):
                F.evaluate(preds, target, ["bpref"], ideal_target=ideal, num_judged=torch.tensor([count]))
            lists = RankedLists(preds, target, ideal_target=ideal, ties="first")  # trec_eval-named kernels' route
            with pytest.raises(ValueError, match=BELOW_R):
                lists.per_query(F.MEASURES["bpref"].kernel, (None,), num_judged=torch.tensor([count]))
        # what went through unchecked: NR = 1 - 3 = -2, a term 1 - min(1, 3) / max(min(-2, 3), 1) = 0
        assert F.bpref(preds, target, ideal_target=ideal, num_judged=torch.tensor([1]), validate_args=False) == 1 / 3
        # NR = 1: (1 + (1 - 1 / 1)) / 3; NR = 3: (1 + (1 - 1 / 3)) / 3
        assert F.bpref(preds, target, ideal_target=ideal, num_judged=torch.tensor([4])).item() == pytest.approx(1 / 3)
        assert F.bpref(preds, target, ideal_target=ideal, num_judged=torch.tensor([6])).item() == pytest.approx(5 / 9)
        # without `judged` every listed item is judged; with it, an unjudged item does not count: NR = 0, (1 + 1) / 3
        judged = torch.tensor([[True, False, True]])
        got = F.bpref(preds, target, ideal_target=ideal, judged=judged, num_judged=torch.tensor([3]))
        assert got.item() == pytest.approx(2 / 3)
        metric = RankingMetrics(["bpref"])
        metric.update(preds, target, ideal_target=ideal, num_judged=torch.tensor([4]))
        with pytest.raises(ValueError, match=BELOW_R + r".* in update 2" if backend == "torch" else BELOW_R):
            metric.update(preds, target, ideal_target=ideal, num_judged=torch.tensor([2]))
            metric.compute()  # the device backends raise here, for the batch they left out
        if backend == "torch":  # the first batch alone was counted
            assert metric.count[0] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_ideal_target_missing_labels_of_target_is_refused(backend):
    """Fewer relevant items in ideal_target than in target gave recall 2.0 and NDCG 2.0; a graded label missing
    (two 2s listed, one judged) NDCG above 1. Padding (mask False) holds no label."""
    _runnable(backend)
    preds = torch.tensor([[0.9, 0.4, 0.7, 0.1]])
    target = torch.tensor([[1, 0, 1, 0]])
    graded = torch.tensor([[2, 0, 2, 0]])
    with torchrank.use_backend(backend):
        cases = [(target, torch.tensor([[1, 0, 0]])), (graded, torch.tensor([[2, 1, 1, 1]]))]
        cases += [(labels * 3, ideal * 3) for labels, ideal in cases]  # larger grades (numpy: by sorts, not counts)
        cases += [(graded + 0.5, torch.tensor([[2.5, 1.5, 1.5, 0.5]]))]  # float labels
        for labels, ideal in cases:
            with pytest.raises(ValueError, match=MISSING):
                F.recall(preds, labels, ideal_target=ideal)
            for measures in (["ndcg@3"], ["ndcg", "recall", "map"], ["ndcg", "judged"]):  # fused kernel, and not
                with pytest.raises(ValueError, match=MISSING):
                    F.evaluate(preds, labels, measures, ideal_target=ideal)
            assert F.ndcg(preds, labels, k=2, ideal_target=ideal, validate_args=False) > 1  # what went unchecked
            metric = NDCG(k=3)  # a dense update: the device backends raise at compute
            with pytest.raises(ValueError, match=MISSING):
                metric.update(preds, labels, ideal_target=ideal)
                metric.compute()
            with pytest.raises(ValueError, match=MISSING):  # flat input: the grouped rows are checked
                Recall().update(preds[0], labels[0], indexes=torch.tensor([0, 1, 0, 1]),
                                ideal_target=torch.tensor([1, 0, 0, 0]) * labels[0].clamp(max=1))  # fmt: skip
        # a consistent ideal passes: the listed labels and more, the padding's labels ignored, M < N
        mask = torch.tensor([[True, True, True, False]])
        padded = torch.tensor([[1, 0, 1, 5]])
        assert F.recall(preds, padded, mask=mask, ideal_target=torch.tensor([[1, 1, 1]])).item() == pytest.approx(2 / 3)
        got = F.evaluate(preds, graded, ["ndcg", "recall"], ideal_target=torch.tensor([[2, 2, 1, 0, 0, 0]]))
        assert 0 < got["ndcg"].item() < 1 and got["recall"].item() == pytest.approx(2 / 3)


def test_the_new_checks_read_nothing_in_a_device_update(monkeypatch):
    g = torch.Generator().manual_seed(0)
    preds, target = torch.rand(6, 10, generator=g), torch.randint(0, 3, (6, 10), generator=g)
    ideal = torch.cat([target, torch.randint(0, 3, (6, 5), generator=g)], 1)
    num_judged = (ideal >= 0).sum(1)
    metric = RankingMetrics(["bpref", "ndcg@5", "recall@5"], ties="first")
    with torchrank.use_backend("torch"):
        metric.update(preds, target, ideal_target=ideal, num_judged=num_judged)
        with counting(monkeypatch) as mode:
            metric.update(preds, target, ideal_target=ideal, num_judged=num_judged)
        assert mode.reads == []
        got = metric.compute()
    expected = F.evaluate(preds, target, ["bpref", "ndcg@5", "recall@5"], ideal_target=ideal, num_judged=num_judged,
                          ties="first")  # fmt: skip
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value)


def test_per_query_inputs_in_chunks_and_flat_input():
    """Past the memory budget, per-query inputs (bpref's counts, one per query; infAP's pool, one flag per item) are
    cut into the same chunks of queries as the rows: the values equal one call's; flat input takes one count per
    query, in ascending id order."""
    g = torch.Generator().manual_seed(1)
    preds, target = torch.rand(50, 40, generator=g), torch.randint(0, 2, (50, 40), generator=g)
    ideal = torch.cat([target, torch.randint(0, 2, (50, 10), generator=g)], 1)
    counts = 50 + torch.randint(0, 30, (50,), generator=g)  # different per query: a misaligned chunk changes bpref
    pool = torch.rand(50, 40, generator=g) < 0.3
    inputs = {"ideal_target": ideal, "num_judged": counts, "pooled_unjudged": pool, "ties": "first",
              "reduction": "none"}
    measures = ["bpref", "infAP", "ndcg"]
    whole = F.evaluate(preds, target, measures, **inputs)
    with F.memory_budget(2**15):  # chunks of a few queries: a count given to the wrong query of its chunk shows
        chunked = F.evaluate(preds, target, measures, **inputs)
        single = F.bpref(preds, target, ideal_target=ideal, num_judged=counts, ties="first", reduction="none")
    for name in measures:
        assert torch.equal(whole[name], chunked[name]), name
    assert torch.equal(single, whole["bpref"])
    assert whole["bpref"].unique().numel() > 10  # the counts matter
    # query 0: (1 + (1 - 1 / min(3, 2))) / 2; query 1: NR = 2, its relevant item below one: 1 - 1 / min(2, 1) = 0
    preds, target = torch.tensor([0.5, 0.9, 0.4, 0.8, 0.7]), torch.tensor([0, 1, 1, 0, 1])
    indexes = torch.tensor([1, 0, 1, 0, 0])
    got = F.bpref(preds, target, indexes=indexes, ideal_target=target, num_judged=torch.tensor([5, 3]),
                  reduction="none")  # fmt: skip
    torch.testing.assert_close(got, torch.tensor([0.75, 0.0]))
    with pytest.raises(ValueError, match=BELOW_R):  # query 1: R = 1 and one judged non-relevant item listed
        F.bpref(preds, target, indexes=indexes, ideal_target=target, num_judged=torch.tensor([5, 1]))
