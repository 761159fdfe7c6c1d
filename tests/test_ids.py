"""Id-list input (torchrank.functional.ids_to_dense, top_k_ids, catalogue_to_dense) against dense labels built
by hand, one query at a time, from the same ids; and the metric classes fed the same dicts."""

from __future__ import annotations

import pytest
import torch

import torchrank.functional as F
from torchrank.functional.ids import first_occurrence
from torchrank.metrics import NDCG, RankingMetrics, Recall


def _reference(ranked: torch.Tensor, relevant: torch.Tensor, labels: torch.Tensor | None, pad: int):
    """Dense target and ideal labels with Python dicts: the first copy of a ranked id gets the id's label."""
    targets, ideals = [], []
    for b in range(ranked.shape[0]):
        judged: dict[int, int] = {}
        for m, item in enumerate(relevant[b].tolist()):
            if item != pad:
                label = 1 if labels is None else int(labels[b, m])
                judged[item] = max(judged.get(item, 0), label)
        seen, row = set(), []
        for item in ranked[b].tolist():
            row.append(judged.get(item, 0) if item != pad and item not in seen else 0)
            seen.add(item)
        targets.append(row)
        ideals.append(sorted(judged.values(), reverse=True))
    width = max(1, max(len(i) for i in ideals))
    ideal = torch.tensor([i + [0] * (width - len(i)) for i in ideals])
    return torch.tensor(targets), ideal


def _random_ids(seed: int, b: int = 40, k: int = 12, m: int = 9, items: int = 30, graded: bool = True):
    g = torch.Generator().manual_seed(seed)
    ranked = torch.randint(0, items, (b, k), generator=g)  # small catalogue: repeated ids happen
    relevant = torch.randint(0, items, (b, m), generator=g)
    ranked[torch.rand(b, k, generator=g) < 0.15] = -1
    relevant[torch.rand(b, m, generator=g) < 0.3] = -1
    relevant[0] = -1  # a query without relevant items
    labels = torch.randint(0, 4, (b, m), generator=g) if graded else None
    return ranked, relevant, labels


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("graded", [False, True])
def test_target_and_measures_equal_hand_built_labels(seed: int, graded: bool) -> None:
    ranked, relevant, labels = _random_ids(seed, graded=graded)
    inputs = F.ids_to_dense(ranked, relevant, labels)
    target, ideal = _reference(ranked, relevant, labels, -1)
    assert torch.equal(inputs["target"], target)
    assert torch.equal(inputs["mask"], ranked != -1)
    got_ideal = inputs["ideal_target"].sort(1, descending=True).values
    assert torch.equal(got_ideal[:, : ideal.shape[1]], ideal)
    assert not got_ideal[:, ideal.shape[1]:].any()
    # the measures read R and the ideal from the judgments, not from the retrieved list
    preds = torch.arange(ranked.shape[1], 0, -1.0).expand(ranked.shape)
    dense = dict(preds=preds, target=target, mask=ranked != -1, ideal_target=ideal)
    for measure, k in ((F.ndcg, 5), (F.recall, 10), (F.average_precision, None), (F.precision, 3)):
        torch.testing.assert_close(measure(**inputs, k=k), measure(**dense, k=k))


def test_relevant_items_outside_the_list_count_in_r_and_the_ideal() -> None:
    inputs = F.ids_to_dense(torch.tensor([[1, 2]]), torch.tensor([[2, 5, 6]]))
    torch.testing.assert_close(F.recall(**inputs), torch.tensor(1 / 3))
    ideal_dcg = 1 + 1 / torch.log2(torch.tensor(3.0))  # two relevant items could fill both positions
    torch.testing.assert_close(F.ndcg(**inputs, k=2), (1 / torch.log2(torch.tensor(3.0))) / ideal_dcg)


def test_repeated_ids_count_once() -> None:
    inputs = F.ids_to_dense(torch.tensor([[3, 3, 4]]), torch.tensor([[3, 3, 4]]), torch.tensor([[1, 2, 1]]))
    assert inputs["target"].tolist() == [[2, 0, 1]]
    assert sorted(inputs["ideal_target"][0].tolist(), reverse=True) == [2, 1, 0]
    ids = torch.randint(-1, 6, (50, 9), generator=torch.Generator().manual_seed(1))
    first = [[x != -1 and x not in row[:j] for j, x in enumerate(row)] for row in ids.tolist()]
    assert first_occurrence(ids).tolist() == first


def test_empty_relevant_sets_and_other_pad_ids() -> None:
    inputs = F.ids_to_dense(torch.tensor([[0, 1], [2, 9]]), torch.zeros(2, 0, dtype=torch.int64))
    assert not inputs["target"].any() and inputs["ideal_target"].shape == (2, 1)
    inputs = F.ids_to_dense(torch.tensor([[0, 7, 1]]), torch.tensor([[7, 1]]), pad_id=7)
    assert inputs["target"].tolist() == [[0, 0, 1]] and inputs["mask"].tolist() == [[True, False, True]]


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="`ranked_ids`"):
        F.ids_to_dense(torch.rand(2, 3), torch.zeros(2, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="same number of queries"):
        F.ids_to_dense(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(3, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="`relevant_labels`"):
        F.ids_to_dense(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 1, dtype=torch.int64), torch.ones(2, 2))
    with pytest.raises(ValueError, match="`k`"):
        F.top_k_ids(torch.rand(2, 3), 4)


def test_no_host_read() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        reads = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.__name__
            if name.startswith(("_local_scalar_dense", "nonzero", "masked_select", "is_nonzero")):
                Count.reads += 1
            return func(*args, **(kwargs or {}))

    ranked, relevant, labels = _random_ids(3)
    with Count():
        F.ids_to_dense(ranked, relevant, labels)
        F.top_k_ids(torch.rand(8, 50), 5, max_bytes=1000)
    assert Count.reads == 0


@pytest.mark.parametrize("max_bytes", [None, 2000])
def test_catalogue_top_k_in_chunks(max_bytes: int | None) -> None:
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(37, 200, generator=g)
    values, ids = F.top_k_ids(scores, 10, max_bytes=max_bytes)
    expected = scores.topk(10, dim=1)
    assert torch.equal(values, expected.values) and torch.equal(ids, expected.indices)
    relevant = torch.randint(0, 200, (37, 6), generator=g)
    inputs = F.catalogue_to_dense(scores, relevant, 10)
    target = torch.zeros(37, 200, dtype=torch.int64).scatter_(1, relevant, 1)  # the dense catalogue's labels
    torch.testing.assert_close(F.ndcg(**inputs, k=10), F.ndcg(scores, target, k=10))
    torch.testing.assert_close(F.recall(**inputs, k=10), F.recall(scores, target, k=10))


def test_metric_classes_take_the_same_dict() -> None:
    ranked, relevant, labels = _random_ids(7)
    dense_target, ideal = _reference(ranked, relevant, labels, -1)
    preds = torch.arange(ranked.shape[1], 0, -1.0).expand(ranked.shape)
    for make in (lambda: NDCG(k=5), lambda: Recall(k=10), lambda: RankingMetrics(["map", "P@5", "recall@10"])):
        by_ids, dense = make(), make()
        for half in (slice(0, 20), slice(20, None)):
            by_ids.update(**F.ids_to_dense(ranked[half], relevant[half], labels[half]))
            dense.update(preds[half], dense_target[half], mask=ranked[half] != -1, ideal_target=ideal[half])
        got, want = by_ids.compute(), dense.compute()
        if isinstance(got, dict):
            for name in got:
                torch.testing.assert_close(got[name], want[name])
        else:
            torch.testing.assert_close(got, want)
