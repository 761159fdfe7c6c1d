"""Beyond-accuracy metrics (torchrank.metrics.recommenders) against plain-Python references on random lists
split over several updates; bad input named; no host read in update."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from torchrank.metrics import (
    AveragePopularity,
    Coverage,
    ExposureEntropy,
    GiniIndex,
    IntraListDiversity,
    LongTailShare,
    Novelty,
    Personalization,
)

NUM_ITEMS, K = 30, 5


def _random_lists(seed: int, rows: int = 60, width: int = 8) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, NUM_ITEMS, (rows, width), generator=g)
    ids[torch.rand(rows, width, generator=g) < 0.15] = -1
    ids[0] = -1  # a list with nothing in it
    return ids


def _python_lists(ids: torch.Tensor, k: int = K) -> list[list[int]]:
    """Each list's top-k ids without padding, a repeated id kept at its first position only."""
    out = []
    for row in ids[:, :k].tolist():
        kept: list[int] = []
        for item in row:
            if item != -1 and item not in kept:
                kept.append(item)
        out.append(kept)
    return out


def _feed(metric, ids: torch.Tensor):
    for part in ids.tensor_split(3):  # several updates
        metric.update(part)
    return metric.compute().item()


def _exposure(lists: list[list[int]]) -> list[int]:
    counts = [0] * NUM_ITEMS
    for kept in lists:
        for item in kept:
            counts[item] += 1
    return counts


@pytest.mark.parametrize("seed", range(3))
def test_exposure_measures(seed: int) -> None:
    ids = _random_lists(seed)
    counts = _exposure(_python_lists(ids))
    total = sum(counts)
    assert _feed(Coverage(k=K, num_items=NUM_ITEMS), ids) == pytest.approx(sum(c > 0 for c in counts) / NUM_ITEMS)
    # Gini as the mean absolute difference over all pairs / (2 * mean): an independent form of the index
    mad = sum(abs(a - b) for a in counts for b in counts) / NUM_ITEMS**2
    assert _feed(GiniIndex(k=K, num_items=NUM_ITEMS), ids) == pytest.approx(mad / (2 * total / NUM_ITEMS), abs=1e-6)
    # RecBole's get_gini: the exposed items' counts ascending at the top ranks n - m + 1 .. n of the catalogue
    exposed = sorted(c for c in counts if c)
    ranks = range(NUM_ITEMS - len(exposed) + 1, NUM_ITEMS + 1)
    recbole = sum((2 * j - NUM_ITEMS - 1) * c for j, c in zip(ranks, exposed, strict=True)) / total / NUM_ITEMS
    assert _feed(GiniIndex(k=K, num_items=NUM_ITEMS), ids) == pytest.approx(recbole, abs=1e-6)
    entropy = -sum(c / total * math.log(c / total) for c in counts if c)
    assert _feed(ExposureEntropy(k=K, num_items=NUM_ITEMS), ids) == pytest.approx(entropy, abs=1e-6)
    assert _feed(ExposureEntropy(k=K, num_items=NUM_ITEMS, base=2), ids) == pytest.approx(entropy / math.log(2),
                                                                                           abs=1e-6)


def _mean_over_lists(lists: list[list[int]], value) -> float:
    per_list = [sum(value(i) for i in kept) / len(kept) for kept in lists if kept]
    return sum(per_list) / len(per_list)


@pytest.mark.parametrize("seed", range(3))
def test_popularity_measures(seed: int) -> None:
    ids = _random_lists(seed)
    lists = _python_lists(ids)
    g = torch.Generator().manual_seed(100 + seed)
    share = (torch.rand(NUM_ITEMS, generator=g) * 0.99 + 0.01).to(torch.float64)
    novelty = _mean_over_lists(lists, lambda i: -math.log2(share[i].item()))
    assert _feed(Novelty(k=K, item_popularity=share), ids) == pytest.approx(novelty, abs=1e-5)
    counts = torch.randint(0, 50, (NUM_ITEMS,), generator=g)
    average = _mean_over_lists(lists, lambda i: counts[i].item())
    assert _feed(AveragePopularity(k=K, item_popularity=counts), ids) == pytest.approx(average, abs=1e-4)
    # the tail: the floor(0.8 * n) least popular items, ties by id
    order = sorted(range(NUM_ITEMS), key=lambda i: (counts[i].item(), i))
    tail = set(order[: math.floor(0.8 * NUM_ITEMS)])
    expected = _mean_over_lists(lists, lambda i: float(i in tail))
    assert _feed(LongTailShare(k=K, item_popularity=counts), ids) == pytest.approx(expected, abs=1e-6)
    mask = torch.tensor([i in tail for i in range(NUM_ITEMS)])
    assert _feed(LongTailShare(k=K, long_tail=mask), ids) == pytest.approx(expected, abs=1e-6)


def _cosine(a: list[float], b: list[float]) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb) if na and nb else 0.0


@pytest.mark.parametrize("seed", range(3))
def test_intra_list_diversity(seed: int) -> None:
    ids = _random_lists(seed)
    embeddings = torch.randn(NUM_ITEMS, 6, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    rows = embeddings.tolist()
    per_list = [
        sum(1 - _cosine(rows[a], rows[b]) for a, b in itertools.combinations(kept, 2)) / math.comb(len(kept), 2)
        for kept in _python_lists(ids) if len(kept) >= 2
    ]
    got = _feed(IntraListDiversity(k=K, item_embeddings=embeddings), ids)
    assert got == pytest.approx(sum(per_list) / len(per_list), abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_personalization_equals_the_pairwise_mean(seed: int) -> None:
    ids = _random_lists(seed)
    vectors = []
    for kept in _python_lists(ids):
        if kept:
            vectors.append([float(i in kept) for i in range(NUM_ITEMS)])
    pairs = list(itertools.combinations(vectors, 2))
    expected = 1 - sum(_cosine(a, b) for a, b in pairs) / len(pairs)  # recmetrics' form: O(U^2) pairs
    assert _feed(Personalization(k=K, num_items=NUM_ITEMS), ids) == pytest.approx(expected, abs=1e-6)


def test_out_of_range_ids_raise_at_compute_and_add_nothing() -> None:
    metric = Coverage(k=2, num_items=3)
    metric.update(torch.tensor([[0, 7], [1, -1]]))
    with pytest.raises(ValueError, match=r"1 ids outside \[0, num_items=3\)"):
        metric.compute()
    assert metric.exposure.tolist() == [1.0, 1.0, 0.0]


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(ValueError, match="`num_items`"):
        Coverage(k=2, num_items=0)
    with pytest.raises(ValueError, match="`k`"):
        GiniIndex(k=0, num_items=3)
    with pytest.raises(ValueError, match="`item_popularity`"):
        Novelty(k=2, item_popularity=torch.tensor([0.5, 0.0]))
    with pytest.raises(ValueError, match="`ranked_ids`"):
        Coverage(k=2, num_items=3).update(torch.rand(2, 2))
    with pytest.raises(ValueError, match="exactly one"):
        LongTailShare(k=2)


def test_update_reads_no_host_value() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        reads = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.__name__.startswith(("_local_scalar_dense", "nonzero", "masked_select", "is_nonzero")):
                Count.reads += 1
            return func(*args, **(kwargs or {}))

    g = torch.Generator().manual_seed(0)
    made = [Coverage(k=K, num_items=NUM_ITEMS), GiniIndex(k=K, num_items=NUM_ITEMS),
            Novelty(k=K, item_popularity=torch.full((NUM_ITEMS,), 0.5)),
            LongTailShare(k=K, item_popularity=torch.rand(NUM_ITEMS, generator=g)),
            IntraListDiversity(k=K, item_embeddings=torch.randn(NUM_ITEMS, 4, generator=g)),
            Personalization(k=K, num_items=NUM_ITEMS)]
    ids = _random_lists(1)
    with Count():
        for metric in made:
            metric.update(ids)
    assert Count.reads == 0


def _all_eight(num_items: int = NUM_ITEMS, k: int | None = K, pad_id: int = -1) -> dict:
    g = torch.Generator().manual_seed(7)
    popularity = torch.rand(num_items, generator=g, dtype=torch.float64) * 0.9 + 0.1
    return {
        "coverage": Coverage(k=k, num_items=num_items, pad_id=pad_id),
        "gini": GiniIndex(k=k, num_items=num_items, pad_id=pad_id),
        "entropy": ExposureEntropy(k=k, num_items=num_items, pad_id=pad_id),
        "novelty": Novelty(k=k, item_popularity=popularity, pad_id=pad_id),
        "popularity": AveragePopularity(k=k, item_popularity=popularity, pad_id=pad_id),
        "tail": LongTailShare(k=k, item_popularity=popularity, pad_id=pad_id),
        "ild": IntraListDiversity(k=k, item_embeddings=torch.randn(num_items, 4, generator=g), pad_id=pad_id),
        "personalization": Personalization(k=k, num_items=num_items, pad_id=pad_id),
    }


INTEGER_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
                  torch.uint64]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_every_integer_id_dtype_gives_the_int64_states(dtype: torch.dtype) -> None:
    """Narrow ids are widened (index ops take int64; the slot id + 1 of int8's 127 overflowed int8), and
    ``pad_id`` is matched by value: the largest value for unsigned ids (2**64 - 1 wraps in int64)."""
    info = torch.iinfo(dtype)
    pad = -1 if info.min < 0 else info.max
    ids = _random_lists(3)
    # out-of-range ids at the top of the dtype (pad aside): counted once per list, as int64 ids would be
    top = info.max if info.min < 0 else info.max - 1
    ids[1, :2] = NUM_ITEMS + 1
    rows = [[pad if i == -1 else top if i == NUM_ITEMS + 1 else i for i in row] for row in ids.tolist()]
    narrow = torch.tensor(rows, dtype=dtype)
    wide = ids.clone()
    wide[1, :2] = min(top, 2**62)  # uint64's top is past int64: another id outside the catalogue
    for (name, metric), reference in zip(_all_eight(pad_id=pad).items(), _all_eight().values(), strict=True):
        for part, wide_part in zip(narrow[2:].tensor_split(3), wide[2:].tensor_split(3), strict=True):
            metric.update(part)
            reference.update(wide_part)
        assert metric.compute().item() == pytest.approx(reference.compute().item(), nan_ok=True), name
        metric.update(narrow[:2])
        reference.update(wide[:2])
        for state, value in reference.metric_state.items():
            assert torch.equal(metric.metric_state[state], value), (name, state)
        with pytest.raises(ValueError, match="1 ids outside"):
            metric.compute()


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint64], ids=str)
def test_a_pad_id_the_dtype_cannot_hold_pads_nothing(dtype: torch.dtype) -> None:
    """The default -1 is no unsigned id: the largest one (-1 wrapped into the dtype) is an id outside the
    catalogue, not padding."""
    for metric in _all_eight(num_items=3, k=3).values():
        metric.update(torch.tensor([[0, torch.iinfo(dtype).max, 0], [1, 2, 0]], dtype=dtype))
        with pytest.raises(ValueError, match="1 ids outside"):
            metric.compute()


def test_int8_ids_at_the_top_of_their_range() -> None:
    metric = Coverage(k=None, num_items=127)
    metric.update(torch.tensor([[126, 127, 127, -128]], dtype=torch.int8))  # 127 + 1 overflowed int8
    assert metric.exposure[126].item() == 1.0 and metric.exposure.sum().item() == 1.0
    with pytest.raises(ValueError, match="2 ids outside"):
        metric.compute()


@pytest.mark.parametrize("shape", [(0, 6), (4, 0), (0, 0)])
@pytest.mark.parametrize("k", [K, None])
def test_an_empty_batch_adds_nothing(shape: tuple[int, int], k: int | None) -> None:
    ids = _random_lists(4)
    for name, metric in _all_eight(k=k).items():
        fresh = {state: value.clone() for state, value in metric.metric_state.items()}
        metric.update(torch.zeros(shape, dtype=torch.long))
        for state, value in fresh.items():
            assert torch.equal(metric.metric_state[state], value), (name, state)
        metric.update(ids)
        alone = _all_eight(k=k)[name]
        alone.update(ids)
        assert metric.compute().item() == pytest.approx(alone.compute().item()), name


def test_personalization_is_nan_with_fewer_than_two_lists() -> None:
    """One list left sum w^2 - 1, a rounding residue, over U (U - 1) = 0: +-inf, not NaN."""
    assert math.isnan(Personalization(k=3, num_items=20).compute().item())
    for ids in ([[17, 6, 5], [-1, -1, -1]], [[17, 6, -1]]):
        metric = Personalization(k=3, num_items=20)
        metric.update(torch.tensor(ids))
        assert math.isnan(metric.compute().item()), ids
    assert math.isnan(Personalization(k=2, num_items=20)(torch.tensor([[17, 6]])).item())  # forward's batch value
    metric, other = Personalization(k=3, num_items=20), Personalization(k=3, num_items=20)
    assert math.isnan(metric(torch.tensor([[17, 6, 5]])).item())
    assert math.isnan(other(torch.tensor([[17, 6, 4]])).item())
    metric.merge_state(other)  # a list from each: one pair, similarity 2/3
    assert metric.compute().item() == pytest.approx(1 / 3)


def test_exposure_entropy_of_no_exposure_is_nan_and_of_one_item_plus_zero() -> None:
    metric = ExposureEntropy(k=2, num_items=3)
    assert math.isnan(metric.compute().item())
    metric.update(torch.tensor([[-1, -1]]))
    assert math.isnan(metric.compute().item())
    for base in (math.e, 2, 0.5):
        metric = ExposureEntropy(k=2, num_items=3, base=base)
        metric.update(torch.tensor([[1, -1], [1, 1]]))
        value = metric.compute().item()
        assert value == 0.0 and math.copysign(1.0, value) == 1.0, base


def test_long_tail_size_is_floor_of_the_decimal_ratio() -> None:
    """floor(tail_ratio * n) of the ratio as written: the float product 0.58 * 100 is 57.99999999999999."""
    for percent in range(101):
        metric = LongTailShare(k=1, item_popularity=torch.arange(100.0), tail_ratio=percent / 100)
        assert int(metric.tail.sum()) == percent, percent
    for ratio, size in ((0.58, 58), (0.29, 29)):
        metric = LongTailShare(k=1, item_popularity=torch.arange(100.0), tail_ratio=ratio)
        for item, expected in ((size - 1, 1.0), (size, 0.0)):
            metric.reset()
            metric.update(torch.tensor([[item]]))
            assert metric.compute().item() == expected, (ratio, item)
    with pytest.raises(ValueError, match="`tail_ratio`"):
        LongTailShare(k=1, item_popularity=torch.arange(3.0), tail_ratio="0.5")


@pytest.mark.parametrize("tiny", [1e-13, 1e-300, 5e-324])
def test_intra_list_diversity_makes_only_an_exact_zero_special(tiny: float) -> None:
    """A nonzero vector however short or long is a direction (F.normalize's eps left [1e-13, 0] 0.9 from
    [1, 0]); only the zero vector is 1 from everything, as documented."""
    def distance(embeddings: list[list[float]], dtype: torch.dtype = torch.float64) -> float:
        metric = IntraListDiversity(k=2, item_embeddings=torch.tensor(embeddings, dtype=dtype))
        metric.update(torch.tensor([[0, 1]]))
        return metric.compute().item()

    assert distance([[tiny, 0.0], [1.0, 0.0]]) == pytest.approx(0.0, abs=1e-12)
    assert distance([[0.0, tiny], [1.0, 0.0]]) == pytest.approx(1.0, abs=1e-12)
    assert distance([[-tiny, tiny], [1.0, -1.0]]) == pytest.approx(2.0, abs=1e-12)
    assert distance([[1e300, 1e300], [1.0, 1.0]]) == pytest.approx(0.0, abs=1e-12)
    assert distance([[1e-30, 0.0], [1.0, 0.0]], torch.float32) == pytest.approx(0.0, abs=1e-12)
    assert distance([[0.0, 0.0], [1.0, 0.0]]) == 1.0


def test_bad_ids_and_pad_id_are_refused() -> None:
    with pytest.raises(ValueError, match="`pad_id`"):
        Coverage(k=2, num_items=3, pad_id=None)
    with pytest.raises(ValueError, match="`ranked_ids`"):
        Coverage(k=2, num_items=3).update(torch.zeros(2, 2, dtype=torch.complex64))
