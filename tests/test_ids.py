"""Id-list input (torchrank.functional.ids_to_dense, top_k_ids, catalogue_to_dense) against dense labels built
by hand, one query at a time, from the same ids; and the metric classes fed the same dicts."""

from __future__ import annotations

import pytest
import torch

import torchrank
import torchrank.functional as F
from torchrank.functional.ids import first_occurrence
from torchrank.metrics import NDCG, RankingMetrics, Recall

# the two matchings: numpy's sort-merge (CPU, "auto"/"numpy") and the torch path (any device, no host read)
BACKENDS = ["numpy", "torch"]


def _reference(ranked: torch.Tensor, relevant: torch.Tensor, labels: torch.Tensor | None, pad: int):
    """Dense target and ideal labels with Python dicts: the first copy of a ranked id gets the id's label."""
    targets, ideals = [], []
    for b in range(ranked.shape[0]):
        judged: dict[int, int] = {}
        for m, item in enumerate(relevant[b].tolist()):
            if item != pad:
                label = 1 if labels is None else labels[b, m].item()
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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("graded", [False, True])
def test_target_and_measures_equal_hand_built_labels(seed: int, graded: bool, backend: str) -> None:
    ranked, relevant, labels = _random_ids(seed, graded=graded)
    with torchrank.use_backend(backend):
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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ids", ["small", "int32", "wide", "extreme"])
@pytest.mark.parametrize("graded", [None, "int", "large", "float"])
def test_any_id_range_dtype_and_shape(ids: str, graded: str | None, backend: str) -> None:
    """Ids of every range (numpy's int32 keys, int64 keys, and a span no key holds), rows that repeat the one
    before (equal ids across a row boundary), one-column inputs, other pad ids, and labels of every kind
    (small and large integers, packed into numpy's keys; floats)."""
    g = torch.Generator().manual_seed(len(ids))
    for b, k, m, items in ((30, 12, 9, 25), (7, 1, 1, 3), (5, 3, 20, 4), (1, 40, 40, 30)):
        ranked = torch.randint(0, items, (b, k), generator=g)
        relevant = torch.randint(0, items, (b, m), generator=g)
        ranked[1::3] = ranked[::3][: ranked[1::3].shape[0]]  # a row equal to the one before
        relevant[1::3] = relevant[::3][: relevant[1::3].shape[0]]
        pad = -1
        if ids == "int32":
            ranked, relevant, pad = ranked.int() - 5, relevant.int() - 5, 7  # negative ids, a pad among ids
        elif ids == "wide":
            ranked, relevant, pad = ranked * 2**40 - 2**41, relevant * 2**40 - 2**41, 3
        elif ids == "extreme":
            big = torch.iinfo(torch.int64)
            ranked = torch.where(ranked % 2 == 0, big.max - ranked, big.min + ranked)
            relevant = torch.where(relevant % 2 == 0, big.max - relevant, big.min + relevant)
            pad = big.min + 1
        ranked[torch.rand(b, k, generator=g) < 0.2] = pad
        relevant[torch.rand(b, m, generator=g) < 0.2] = pad
        labels = None if graded is None else torch.randint(0, 4, (b, m), generator=g)
        if graded == "large":
            labels = (labels * 1000).int()
        elif graded == "float":
            labels = labels / 2
        with torchrank.use_backend(backend):
            inputs = F.ids_to_dense(ranked, relevant, labels, pad_id=pad)
        target, ideal = _reference(ranked, relevant, labels, pad)
        assert torch.equal(inputs["target"], target.to(inputs["target"].dtype))
        assert inputs["target"].dtype == (relevant.dtype if labels is None else labels.dtype)
        got_ideal = inputs["ideal_target"].sort(1, descending=True).values
        assert torch.equal(got_ideal[:, : ideal.shape[1]], ideal.to(got_ideal.dtype))
        assert not got_ideal[:, ideal.shape[1]:].any()
        assert torch.equal(inputs["mask"], ranked != pad)


def test_relevant_items_outside_the_list_count_in_r_and_the_ideal() -> None:
    inputs = F.ids_to_dense(torch.tensor([[1, 2]]), torch.tensor([[2, 5, 6]]))
    torch.testing.assert_close(F.recall(**inputs), torch.tensor(1 / 3))
    ideal_dcg = 1 + 1 / torch.log2(torch.tensor(3.0))  # two relevant items could fill both positions
    torch.testing.assert_close(F.ndcg(**inputs, k=2), (1 / torch.log2(torch.tensor(3.0))) / ideal_dcg)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_ids_count_once(backend: str) -> None:
    with torchrank.use_backend(backend):
        inputs = F.ids_to_dense(torch.tensor([[3, 3, 4]]), torch.tensor([[3, 3, 4]]), torch.tensor([[1, 2, 1]]))
        binary = F.ids_to_dense(torch.tensor([[3, 3, 4]]), torch.tensor([[3, 3, 4]]))
    assert inputs["target"].tolist() == [[2, 0, 1]]
    assert sorted(inputs["ideal_target"][0].tolist(), reverse=True) == [2, 1, 0]
    assert binary["target"].tolist() == [[1, 0, 1]]
    assert sorted(binary["ideal_target"][0].tolist(), reverse=True) == [1, 1, 0]
    for rows, items in ((50, 6), (3000, 12)):  # a small batch (torch's sort) and a large one (numpy's, on CPU)
        ids = torch.randint(-1, items, (rows, 9), generator=torch.Generator().manual_seed(rows))
        ids[1::2] = ids[::2][: ids[1::2].shape[0]]  # rows equal to the one before
        first = [[x != -1 and x not in row[:j] for j, x in enumerate(row)] for row in ids.tolist()]
        with torchrank.use_backend(backend):
            assert first_occurrence(ids).tolist() == first
            assert first_occurrence(ids * 2**45, pad_id=-(2**45)).tolist() == first  # int64 keys


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_relevant_sets_and_other_pad_ids(backend: str) -> None:
    with torchrank.use_backend(backend):
        inputs = F.ids_to_dense(torch.tensor([[0, 1], [2, 9]]), torch.zeros(2, 0, dtype=torch.int64))
        assert not inputs["target"].any() and inputs["ideal_target"].shape == (2, 1)
        inputs = F.ids_to_dense(torch.tensor([[0, 7, 1]]), torch.tensor([[7, 1]]), pad_id=7)
        assert inputs["target"].tolist() == [[0, 0, 1]] and inputs["mask"].tolist() == [[True, False, True]]
        inputs = F.ids_to_dense(torch.zeros(0, 4, dtype=torch.int64), torch.zeros(0, 2, dtype=torch.int64))
        assert inputs["target"].shape == (0, 4) and inputs["ideal_target"].shape == (0, 2)
        inputs = F.ids_to_dense(torch.tensor([[-1, -1]]), torch.tensor([[-1, -1]]))  # padding only
        assert not inputs["target"].any() and not inputs["ideal_target"].any()


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="`ranked_ids`"):
        F.ids_to_dense(torch.rand(2, 3), torch.zeros(2, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="same number of queries"):
        F.ids_to_dense(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(3, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="`relevant_labels`"):
        F.ids_to_dense(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 1, dtype=torch.int64), torch.ones(2, 2))
    with pytest.raises(ValueError, match="`k`"):
        F.top_k_ids(torch.rand(2, 3), 4)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_pad_id_the_ids_cannot_hold_is_refused(backend: str) -> None:
    """-1 in uint8 ids would wrap onto id 255 in some comparisons and not in others: refused, whatever the backend;
    a pad_id the dtype holds pads on both."""
    ranked, relevant = torch.tensor([[255, 3, 7]], dtype=torch.uint8), torch.tensor([[255, 9]], dtype=torch.uint8)
    with torchrank.use_backend(backend):
        with pytest.raises(ValueError, match=r"`pad_id` must be an int that torch.uint8 ids can hold \(\[0, 255\]\)"):
            F.ids_to_dense(ranked, relevant)
        inputs = F.ids_to_dense(ranked, relevant, pad_id=0)
    assert inputs["target"].tolist() == [[1, 0, 0]] and inputs["ideal_target"].tolist() == [[1, 1]]


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
    with Count(), torchrank.use_backend("torch"):  # the device path (CPU numpy may read: no stream to stall)
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


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8])
def test_catalogue_matches_relevant_ids_of_any_integer_dtype(dtype: torch.dtype) -> None:
    """The top-k's item ids (int64 column numbers) are matched in the dtype of ``relevant_ids``; a dtype too narrow
    for the catalogue's ids is refused by name."""
    g = torch.Generator().manual_seed(5)
    scores = torch.rand(6, 200, generator=g)
    relevant = torch.randint(0, 200, (6, 8), generator=g)
    relevant[:, -2:] = 7 if dtype == torch.uint8 else -1  # padding (uint8 holds no -1: another pad id)
    pad = 7 if dtype == torch.uint8 else -1
    want = F.catalogue_to_dense(scores, relevant, k=20, pad_id=pad)
    got = F.catalogue_to_dense(scores, relevant.to(dtype), k=20, pad_id=pad)
    assert torch.equal(got["target"].long(), want["target"]) and torch.equal(got["mask"], want["mask"])
    with pytest.raises(ValueError, match=r"`relevant_ids` has dtype torch.uint8, which cannot hold .* \(0 to 299\)"):
        F.catalogue_to_dense(torch.rand(2, 300), torch.zeros(2, 3, dtype=torch.uint8), k=5)


def test_first_occurrence_refuses_what_is_not_a_batch_of_id_lists() -> None:
    for ids in (torch.tensor([4, 2, 4]), torch.tensor([[0.5, 1.5]]), torch.tensor([[True, False]])):
        with pytest.raises(ValueError, match="`ids` must be a \\[lists, items\\] integer tensor"):
            first_occurrence(ids)


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


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_views_and_small_integer_dtypes(backend: str) -> None:
    ranked, relevant, labels = _random_ids(11)
    wide = torch.stack([ranked, ranked], 2).reshape(ranked.shape[0], -1)  # every id twice, side by side
    view = wide[:, ::2]  # a strided view equal to ranked
    relevant_t = relevant.T.contiguous().T  # column-major storage
    with torchrank.use_backend(backend):
        got = F.ids_to_dense(view, relevant_t, labels.T.contiguous().T)
        small = F.ids_to_dense(ranked.to(torch.int16), relevant.to(torch.int16), labels.to(torch.int8))
    target, ideal = _reference(ranked, relevant, labels, -1)
    assert torch.equal(got["target"], target) and torch.equal(small["target"], target.to(torch.int8))
    for inputs in (got, small):
        sorted_ideal = inputs["ideal_target"].sort(1, descending=True).values[:, : ideal.shape[1]]
        assert torch.equal(sorted_ideal, ideal.to(sorted_ideal.dtype))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_wide_unsigned_ids(dtype: torch.dtype, backend: str) -> None:
    """uint16 to uint64 ids, 0 as padding, with binary, same-dtype and float labels, on both matchings (torch has no
    searchsorted or gather for these dtypes on CPU: the torch path matches them as int64 in the same order). The
    uint64 ids also span 2^63: half of them above it, too wide for numpy's packed keys."""
    ranked, relevant, labels = _random_ids(3)
    if dtype == torch.uint64:  # id v -> v + 2^63 for odd v (the int64 v - 2^63 has those bits); padding -> 0
        ranked_u, relevant_u = (torch.where(v % 2 == 1, v ^ -(2**63), v).view(dtype)
                                for v in (ranked + 1, relevant + 1))
    else:
        ranked_u, relevant_u = (ranked + 1).to(dtype), (relevant + 1).to(dtype)
    with torchrank.use_backend(backend):
        outputs = [(F.ids_to_dense(ranked_u, relevant_u, pad_id=0), None, dtype)]
        for label_dtype in (dtype, torch.float32):
            outputs.append((F.ids_to_dense(ranked_u, relevant_u, labels.to(label_dtype), pad_id=0), labels,
                            label_dtype))
    for inputs, judged, dtype_out in outputs:
        target, ideal = _reference(ranked, relevant, judged, -1)
        assert inputs["target"].dtype == dtype_out and torch.equal(inputs["target"].long(), target)
        sorted_ideal = inputs["ideal_target"].long().sort(1, descending=True).values[:, : ideal.shape[1]]
        assert torch.equal(sorted_ideal, ideal)
        assert torch.equal(inputs["mask"], ranked != -1)
