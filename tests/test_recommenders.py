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
