"""Dense inputs past the memory budget are evaluated in chunks of queries with exactly the same result."""

from __future__ import annotations

import pytest
import torch
from conftest import ALL_MEASURES, CUTOFF_MEASURES

import torchrank.functional as F
from torchrank.functional._chunking import BYTES_PER_ITEM, query_chunks

QUERIES, ITEMS = 203, 30  # 203 is prime: the last chunk is short
BUDGET = 17 * ITEMS * BYTES_PER_ITEM  # chunks of 17 queries (one more for ideal_target's columns below)


def _data(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, 12, (QUERIES, ITEMS), generator=g).float()  # many ties
    preds[::3] = torch.randn(len(preds[::3]), ITEMS, generator=g)  # and untied rows
    target = torch.randint(0, 4, (QUERIES, ITEMS), generator=g)
    target[5] = 0  # a query with no relevant item
    mask = torch.rand(QUERIES, ITEMS, generator=g) > 0.2
    return {"preds": preds, "target": target, "mask": mask}


def test_the_budget_splits_the_queries():
    d = _data()
    with F.memory_budget(BUDGET):
        chunks = query_chunks(d["preds"], {"target": d["target"], "mask": d["mask"]})
    assert [c.stop - c.start for c in chunks] == [17] * 11 + [16]
    assert query_chunks(d["preds"], {"target": d["target"]}) is None  # the default budget holds it whole


@pytest.mark.parametrize(("ties", "reduction"), [("average", "none"), ("pessimistic", "mean"), ("first", "sum")])
@pytest.mark.parametrize(("name", "fn", "higher_is_better"), ALL_MEASURES, ids=[m[0] for m in ALL_MEASURES])
def test_chunked_equals_unchunked_exactly(name, fn, higher_is_better, ties, reduction):
    d = _data()
    kwargs = {"k": [1, 5, 30]} if (name, fn, higher_is_better) in CUTOFF_MEASURES else {}
    kwargs |= {"ties": ties, "reduction": reduction, "empty_target_action": "skip"}
    whole = fn(d["preds"], d["target"], mask=d["mask"], **kwargs)
    with F.memory_budget(BUDGET):
        chunked = fn(d["preds"], d["target"], mask=d["mask"], **kwargs)
    assert torch.equal(chunked.isnan(), whole.isnan())
    assert torch.equal(chunked.nan_to_num(), whole.nan_to_num())


def test_evaluate_in_chunks_with_batch_dims_and_ideal_target():
    d = _data(1)
    preds, target = d["preds"][:200].reshape(8, 25, ITEMS), d["target"][:200].reshape(8, 25, ITEMS)
    ideal = torch.cat([target, torch.randint(0, 4, (8, 25, 5))], -1)  # judged items missing from the lists
    names = ["ndcg@10", "map", "P@5", "recall@20", "mrr", "err@10", "rbp.8", "rprec"]
    for reduction in ("mean", "none"):
        whole = F.evaluate(preds, target, names, ideal_target=ideal, reduction=reduction)
        with F.memory_budget(BUDGET):
            chunked = F.evaluate(preds, target, names, ideal_target=ideal, reduction=reduction)
        for name in names:
            assert chunked[name].shape == whole[name].shape
            assert torch.equal(chunked[name], whole[name]), name


def test_bad_input_is_still_reported_when_chunking():
    d = _data()
    with F.memory_budget(BUDGET):
        with pytest.raises(ValueError, match="reduction"):
            F.ndcg(d["preds"], d["target"], reduction="median")
        bad = d["preds"].clone()
        bad[150, 3] = float("nan")  # in a late chunk
        with pytest.raises(ValueError, match="NaN"):
            F.ndcg(bad, d["target"])
        with pytest.raises(ValueError, match="no relevant item"):
            F.ndcg(d["preds"], d["target"], empty_target_action="error")


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_memory_budget_rejects_bad_values(value):
    with pytest.raises(ValueError, match="num_bytes"):
        with F.memory_budget(value):
            pass
