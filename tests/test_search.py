"""``torchrank.functional.search`` and ``merge_top_k`` against brute force: the full ``[Q, C]`` score matrix in
float64, ordered by two stable sorts (id ascending, then score descending).

The embeddings are small integers (and, for cosine, vectors whose normalised entries are exact in binary), so every
score is exact in every dtype and equal scores are equal bits: ties are many and the reference's order among them
is the documented one. Chunk sizes put chunk boundaries through tie groups, and the larger ones switch on the
group-maxima candidates (chunks of at least ``8 (k + 1)`` columns).
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as tnf
from _memory import peak_cpu_allocation

import torchrank.functional as F


def brute_force(queries: torch.Tensor, corpus: torch.Tensor, k: int, similarity: str = "dot",
                ids: torch.Tensor | None = None, dtype: torch.dtype = torch.float64
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Top ``k`` (at most the corpus size) of the full score matrix, by score then id, in float64 rounded to
    ``dtype`` (the Euclidean distance's square root is inexact)."""
    q, c = queries.double(), corpus.double()
    if similarity == "cosine":
        q, c = tnf.normalize(q, dim=1), tnf.normalize(c, dim=1)
    scores = (-torch.cdist(q, c) if similarity == "euclidean" else q @ c.T).to(dtype).double()
    ids = torch.arange(len(corpus)) if ids is None else ids.long()
    by_id = ids.argsort(stable=True)
    scores, ids = scores[:, by_id], ids[by_id]
    order = scores.argsort(dim=1, descending=True, stable=True)[:, :k]
    return scores.gather(1, order), ids[order]


def integer_data(num_queries: int, num_rows: int, dim: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-2, 3, (num_queries, dim), generator=g).float(),
            torch.randint(-2, 3, (num_rows, dim), generator=g).float())


def assert_matches(got: tuple[torch.Tensor, torch.Tensor], want: tuple[torch.Tensor, torch.Tensor], k: int) -> None:
    scores, ids = got
    want_scores, want_ids = want
    n = want_ids.shape[1]
    assert scores.shape == ids.shape == (want_ids.shape[0], k) and ids.dtype == torch.int64
    assert torch.equal(ids[:, :n], want_ids)
    torch.testing.assert_close(scores[:, :n].double(), want_scores, rtol=1e-6, atol=1e-6)
    assert (ids[:, n:] == -1).all() and (scores[:, n:] == float("-inf")).all()


@pytest.mark.parametrize("similarity", ["dot", "euclidean"])
@pytest.mark.parametrize("chunk_size", [1, 2, 7, 24, 50, 130, None])
def test_ties_across_chunks_match_brute_force(similarity: str, chunk_size: int | None) -> None:
    queries, corpus = integer_data(9, 400)
    shuffled = torch.randperm(400, generator=torch.Generator().manual_seed(1)) * 5 + 3
    for k in (1, 3, 10):
        for ids in (None, shuffled):
            got = F.search(queries, corpus, k, similarity=similarity, corpus_ids=ids, chunk_size=chunk_size)
            assert_matches(got, brute_force(queries, corpus, k, similarity, ids), k)


def test_cosine_ties_match_brute_force() -> None:
    # unit basis vectors and (+-1, +-1, +-1, +-1) scaled: normalised exactly (entries 0, +-1, +-0.5), many ties
    g = torch.Generator().manual_seed(2)
    signs = torch.randint(0, 2, (300, 4), generator=g).float() * 2 - 1
    basis = tnf.one_hot(torch.randint(0, 4, (300,), generator=g), 4).float() * signs
    dense = torch.randint(0, 2, (300, 1), generator=g).bool()
    corpus = torch.where(dense, signs, basis) * torch.randint(1, 4, (300, 1), generator=g)
    queries = corpus[:12] * 2
    for chunk_size in (5, 64, None):
        got = F.search(queries, corpus, 7, similarity="cosine", chunk_size=chunk_size)
        assert_matches(got, brute_force(queries, corpus, 7, "cosine"), 7)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_dtypes(dtype: torch.dtype) -> None:
    queries, corpus = integer_data(6, 300, dim=5, seed=3)
    for similarity in ("dot", "euclidean"):
        for chunk_size in (13, None):
            got = F.search(queries.to(dtype), corpus.to(dtype), 9, similarity=similarity, chunk_size=chunk_size)
            assert got[0].dtype == dtype
            assert_matches(got, brute_force(queries, corpus, 9, similarity, dtype=dtype), 9)


def test_random_floats_match_the_full_matrix() -> None:
    g = torch.Generator().manual_seed(4)
    queries, corpus = torch.randn(20, 16, generator=g), torch.randn(5000, 16, generator=g)
    for similarity in ("dot", "cosine", "euclidean"):
        scores, ids = F.search(queries, corpus, 25, similarity=similarity, chunk_size=1200)
        want_scores, want_ids = brute_force(queries, corpus, 25, similarity)
        assert torch.equal(ids, want_ids)
        torch.testing.assert_close(scores.double(), want_scores, rtol=1e-4, atol=1e-4)


def test_k_beyond_the_corpus_is_padded() -> None:
    queries, corpus = integer_data(4, 5)
    for chunk_size in (2, None):
        assert_matches(F.search(queries, corpus, 8, chunk_size=chunk_size), brute_force(queries, corpus, 8), 8)
    scores, ids = F.search(queries, corpus[:1], 3)  # a corpus of one row
    assert torch.equal(ids[:, 0], torch.zeros(4, dtype=torch.int64)) and (ids[:, 1:] == -1).all()
    torch.testing.assert_close(scores[:, 0], queries @ corpus[0])
    scores, ids = F.search(queries, corpus[:0], 2)  # an empty shard: padding only
    assert (ids == -1).all() and (scores == float("-inf")).all() and ids.shape == (4, 2)


def test_embeddings_that_require_grad() -> None:
    queries, corpus = integer_data(3, 40)
    got = F.search(queries.requires_grad_(), corpus, 4, chunk_size=16)
    assert not got[0].requires_grad
    assert_matches(got, brute_force(queries.detach(), corpus, 4), 4)


def test_no_queries() -> None:
    scores, ids = F.search(torch.empty(0, 3), torch.randn(10, 3), 4)
    assert scores.shape == ids.shape == (0, 4) and ids.dtype == torch.int64


def test_progress_reports_every_chunk() -> None:
    queries, corpus = integer_data(3, 25)
    calls: list[tuple[int, int]] = []
    F.search(queries, corpus, 2, chunk_size=10, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(10, 25), (20, 25), (25, 25)]


def test_query_blocks_under_a_small_budget() -> None:
    """A budget too small for even min(1,024, C, k + 1) corpus rows per chunk: the queries go in blocks."""
    queries, corpus = integer_data(40, 2500, seed=9)
    calls: list[tuple[int, int]] = []
    with F.memory_budget(1600):
        got = F.search(queries, corpus, 5, progress=lambda done, total: calls.append((done, total)))
    assert_matches(got, brute_force(queries, corpus, 5), 5)
    assert calls[-1][0] == calls[-1][1] and calls[-1][1] % 2500 == 0 and calls[-1][1] > 2500


def test_merge_of_shards_equals_the_whole_search() -> None:
    queries, corpus = integer_data(8, 200, seed=5)
    ids = torch.randperm(200, generator=torch.Generator().manual_seed(6))
    k = 12
    bounds = [0, 3, 3, 90, 200]  # uneven shards, one empty
    shards = [F.search(queries, corpus[a:b], k, corpus_ids=ids[a:b]) for a, b in itertools.pairwise(bounds)]
    merged = F.merge_top_k([s for s, _ in shards], [i for _, i in shards], k)
    assert_matches(merged, brute_force(queries, corpus, k, ids=ids), k)
    # fewer than k in total: padded
    small = F.merge_top_k([shards[1][0][:, :2]], [shards[1][1][:, :2]], 5)
    assert (small[1][:, 2:] == -1).all() and small[1].shape == (8, 5)


def test_memory_stays_within_the_budget() -> None:
    """256 queries over 500,000 x 32 inside memory_budget(64 MiB): the allocations the search makes beyond its
    inputs (counted op by op by the torch profiler, deterministic) peak well under 100 MiB; the full score matrix
    alone would be 488 MiB."""
    g = torch.Generator().manual_seed(7)
    queries, corpus = torch.randn(256, 32, generator=g), torch.randn(500_000, 32, generator=g)
    with F.memory_budget(64 * 2**20):
        peak = peak_cpu_allocation(lambda: F.search(queries, corpus, 100))
    assert 0 < peak < 100 * 2**20


def test_nan_is_refused() -> None:
    queries, corpus = integer_data(3, 50)
    corpus[17, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        F.search(queries, corpus, 5)
    queries[1, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        F.search(queries, corpus[:10], 5, chunk_size=4)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"queries": torch.zeros(2, 4)}, "same embedding dimension"),
    ({"queries": torch.zeros(2, 3, dtype=torch.float64)}, "same dtype"),
    ({"queries": torch.zeros(2, 3, dtype=torch.int64)}, "`queries` must be a 2-D float"),
    ({"corpus": torch.zeros(5)}, "`corpus` must be a 2-D float"),
    ({"k": 0}, "`k` must be a positive int"),
    ({"k": 2.0}, "`k` must be a positive int"),
    ({"corpus_ids": torch.arange(5.0)}, "`corpus_ids` must be a \\[5\\] integer"),
    ({"corpus_ids": torch.arange(4)}, "`corpus_ids` must be a \\[5\\] integer"),
    ({"similarity": "l2"}, "`similarity` must be one of"),
    ({"chunk_size": 0}, "`chunk_size` must be a positive int"),
    ({"progress": 3}, "`progress` must be a callable"),
])
def test_bad_arguments(kwargs: dict, match: str) -> None:
    arguments = {"queries": torch.zeros(2, 3), "corpus": torch.zeros(5, 3), "k": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        F.search(**arguments)


def test_merge_bad_arguments() -> None:
    with pytest.raises(ValueError, match="`ids` must hold integer"):
        F.merge_top_k([torch.zeros(2, 3)], [torch.zeros(2, 3)], 2)
    with pytest.raises(ValueError, match="equal length"):
        F.merge_top_k([torch.zeros(2, 3)], [], 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    queries, corpus = integer_data(9, 3000, dim=4, seed=8)
    for dtype in (torch.float32, torch.float16):
        got = F.search(queries.cuda().to(dtype), corpus.cuda().to(dtype), 20, chunk_size=1000)
        assert_matches((got[0].cpu(), got[1].cpu()), brute_force(queries, corpus, 20), 20)
