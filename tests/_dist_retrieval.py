"""Per-rank tasks for CorpusRetrieval across the 2-process gloo pool of ``test_metrics_distributed.py``.

Each task builds the whole corpus and every query from the seed, gives each rank its part (``plan``), computes the
synced metric, and asserts inside the worker that it equals one process's metric (``sync_on_compute=False``) on
all the data, and that no gathered tensor was as large as the corpus.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torchmetrics.utilities.distributed import gather_all_tensors

from torchrank.functional.backends import use_backend
from torchrank.metrics import CorpusRetrieval

MEASURES = ["ndcg@10", "recall@20", "map", "mrr@10", "P@5"]
K, DIM, CORPUS, QUERIES = 20, 8, 160, 30


def compute_error(metric: CorpusRetrieval) -> str:
    """The message of the ValueError ``metric.compute()`` raises (an AssertionError where it returns)."""
    try:
        metric.compute()
    except ValueError as err:
        return str(err)
    raise AssertionError("compute did not raise")


def data(seed: int) -> tuple[torch.Tensor, ...]:
    """Corpus ``[160, 8]`` with shuffled ids; documents 0..9 repeat documents 10..19 under other ids (ties across
    shards); queries ``[30, 8]`` with graded judgments, some absent from the corpus, -1 padding."""
    g = torch.Generator().manual_seed(seed)
    docs = torch.randn(CORPUS, DIM, generator=g)
    docs[:10] = docs[10:20]
    ids = torch.randperm(4 * CORPUS, generator=g)[:CORPUS]
    queries = torch.randn(QUERIES, DIM, generator=g)
    queries[:4] = docs[10:14]  # their best documents tie
    relevant = ids[torch.randint(0, CORPUS, (QUERIES, 5), generator=g)]
    relevant[:, 4] = 10_000 + torch.arange(QUERIES)  # judged, never added
    relevant[torch.rand(QUERIES, 5, generator=g) < 0.3] = -1
    labels = torch.randint(0, 4, (QUERIES, 5), generator=g)
    return docs, ids, queries, relevant, labels


def _counting_gather(seen: list[tuple[int, ...]]) -> Any:
    def gather(tensor: torch.Tensor, group: Any = None) -> list[torch.Tensor]:
        seen.append(tuple(tensor.shape))
        return gather_all_tensors(tensor, group)

    return gather


def task_synced_equals_one_process(seed: int, plan: dict[str, dict[int, list[tuple[int, int]]]],
                                   backend: str = "auto") -> dict[str, float]:
    """``plan["corpus"][rank]`` and ``plan["queries"][rank]``: ``(start, stop)`` row ranges this rank adds, one
    update each (a rank may add none)."""
    rank = dist.get_rank()
    docs, ids, queries, relevant, labels = data(seed)
    seen: list[tuple[int, ...]] = []
    with use_backend(backend):
        synced = CorpusRetrieval(MEASURES, k=K, keep_per_query=True, dist_sync_fn=_counting_gather(seen))
        for start, stop in plan["corpus"][rank]:
            synced.update_corpus(docs[start:stop], ids[start:stop])
        for start, stop in plan["queries"][rank]:
            synced.update_queries(queries[start:stop], relevant[start:stop], labels[start:stop])
        got = synced.compute()
        one = CorpusRetrieval(MEASURES, k=K, keep_per_query=True, sync_on_compute=False)
        one.update_corpus(docs, ids)
        one.update_queries(queries, relevant, labels)
        expected = one.compute()
    assert list(got) == MEASURES
    for name in MEASURES:
        assert torch.allclose(got[name], expected[name], atol=1e-6, rtol=0), (rank, name, got, expected)
    # queries in rank order: rank 0's updates, then rank 1's
    order = [r for rank_ in (0, 1) for start, stop in plan["queries"][rank_] for r in range(start, stop)]
    assert torch.allclose(synced.per_query_values(), one.per_query_values()[order], atol=1e-6, rtol=0)
    assert all(shape[0] < CORPUS for shape in seen if len(shape) == 2 and shape[1:] == (DIM,)), seen
    assert sum(block.shape[0] for block in synced._corpus) == sum(b - a for a, b in plan["corpus"][rank])
    return {name: value.item() for name, value in got.items()}


def task_problem_on_one_rank_raises_on_both(seed: int) -> str:
    """A NaN corpus block on rank 1 only, checked on the device path: compute raises on both ranks (no rank is
    left waiting in a collective), and after ``reset`` both compute again."""
    rank = dist.get_rank()
    docs, ids, queries, relevant, labels = data(seed)
    with use_backend("torch"):
        metric = CorpusRetrieval(MEASURES, k=K)
        metric.update_corpus(docs[rank::2], ids[rank::2])
        metric.update_queries(queries[rank::2], relevant[rank::2], labels[rank::2])
        if rank == 1:
            metric.update_corpus(torch.full((2, DIM), torch.nan), torch.tensor([90_000, 90_001]))
        message = compute_error(metric)
        assert "`embeddings` of update_corpus holds NaN or infinity in update 3" in message, message
        metric.reset()
        metric.update_corpus(docs[rank::2], ids[rank::2])
        metric.update_queries(queries[rank::2], relevant[rank::2], labels[rank::2])
        assert set(metric.compute()) == set(MEASURES)
    return message


def task_mismatched_dims_raise_on_both(seed: int) -> str:
    rank = dist.get_rank()
    docs, ids, *_ = data(seed)
    metric = CorpusRetrieval(MEASURES, k=K)
    width = DIM if rank == 0 else DIM - 1
    metric.update_corpus(docs[rank::2, :width], ids[rank::2])
    message = compute_error(metric)
    assert "share one dimension and dtype" in message, message
    return message


def task_search_failing_on_one_rank_raises_on_both(seed: int) -> str:
    """A search that raises on rank 1 only (as a float16 product that overflows to NaN would): rank 1 raises its
    error, rank 0 learns of it from the gathered scores instead of waiting in the gather."""
    import torchrank.functional as F

    rank = dist.get_rank()
    docs, ids, queries, relevant, labels = data(seed)
    metric = CorpusRetrieval(MEASURES, k=K)
    metric.update_corpus(docs[rank::2], ids[rank::2])
    metric.update_queries(queries[rank::2], relevant[rank::2], labels[rank::2])
    real = F.search

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the search failed here")

    F.search = failing if rank == 1 else real
    try:
        message = compute_error(metric)
    finally:
        F.search = real
    expected = "the search failed here" if rank == 1 else "The search of another process's corpus shard failed"
    assert expected in message, message
    return message
