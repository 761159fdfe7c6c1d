"""Exact top-k search of a corpus by embeddings, in chunks of the corpus: never a ``[queries, corpus]`` matrix.

:func:`search` scores the queries against one chunk of corpus rows at a time (one matrix product), keeps each
chunk's top ``k`` and merges it into a running top ``k``; :func:`merge_top_k` is that merge, for the top ``k``
of several corpus shards (one per process) searched apart. Both order the results by score, highest first, and
equal scores by id, lowest first, so the result depends neither on how the corpus is chunked or sharded nor on
the order of its rows.

Ties at a chunk's ``k``-th score: ``topk`` keeps an arbitrary subset of the items tied there, so each chunk is
searched for ``k + 1`` items; where the ``(k + 1)``-th equals the ``k``-th, the tied items of those rows are
chosen again by id (:func:`_lowest_ids_at_threshold`), which reads the chunk's scores once more. That check is
one host read per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as tnf
from torch import Tensor

from torchrank.functional._chunking import _budget
from torchrank.functional._inputs import is_integer_tensor

SIMILARITIES = ("dot", "cosine", "euclidean")
PAD_ID = -1
# Working memory per score of a chunk, in bytes beyond the score itself: the (k + 1) selection's copy of a row
# (per thread) and, for "euclidean", the norms' sum the product accumulates into; the round figure leaves headroom.
_EXTRA_BYTES_PER_SCORE = 4
# Without a memory budget: score blocks of this many bytes. Large enough that the matrix product runs at full
# speed and the per-chunk merge is a small share of the work; small enough to stay far below any device's memory.
_DEFAULT_BLOCK_BYTES = 2**27
# The fewest corpus rows per chunk when the queries are split into blocks to honour the budget.
_MIN_CHUNK_ROWS = 1024
_INT64_MAX = torch.iinfo(torch.int64).max


def search(
    queries: Tensor,
    corpus: Tensor,
    k: int,
    *,
    similarity: str = "dot",
    corpus_ids: Tensor | None = None,
    chunk_size: int | None = None,
    progress: Callable[[int, int], object] | None = None,
) -> tuple[Tensor, Tensor]:
    """The ``k`` corpus items most similar to each query: ``(scores [Q, k], ids [Q, k])``, best first.

    Exact: every query is scored against every corpus row, by matrix products over chunks of ``chunk_size``
    corpus rows, each chunk's top ``k`` merged into a running top ``k``. The ``[Q, C]`` score matrix never
    exists: the extra memory is about ``Q x (k + chunk_size)`` scores.

    Args:
        queries: ``[Q, D]`` float embeddings (float32, float16, bfloat16 or float64).
        corpus: ``[C, D]`` float embeddings, same dtype and device as ``queries``.
        k: How many items to return per query (>= 1). With fewer than ``k`` corpus rows, every row is
            returned and the rest of each row is padding: score ``-inf``, id ``-1``.
        similarity: ``"dot"`` (``q . c``), ``"cosine"`` (the dot product of the L2-normalised embeddings, as
            sentence-transformers' ``cos_sim``) or ``"euclidean"`` (the negative Euclidean distance
            ``-||q - c||``, as sentence-transformers' ``euclidean_sim``: higher is closer; faiss' ``IndexFlatL2``
            returns the squared distance, ``scores ** 2``, in the same order).
        corpus_ids: ``[C]`` integer ids of the corpus rows (returned as int64); None: the row numbers. Ids are
            expected to be unique and >= 0 (-1 marks padding).
        chunk_size: Corpus rows per matrix product; None: as many as the memory budget allows
            (:func:`torchrank.functional.memory_budget`, else blocks of 128 MiB of scores), the queries split into
            blocks too when even 1,024 rows would not fit.
        progress: Called after each chunk as ``progress(rows_done, rows_total)`` (corpus rows; on CUDA, rows whose
            work has been queued).

    Returns:
        ``scores [Q, k]`` in the embeddings' dtype, highest first, equal scores ordered by id, lowest first; and
        ``ids [Q, k]`` (int64).

    Scores are those of the matrix product in the embeddings' dtype (as ``queries @ corpus.T`` gives them, so
    float16 and bfloat16 scores are accumulated in float32 by the product and rounded once; with fewer bits,
    more scores tie, and ties go to the lowest id). ``"cosine"`` normalises each chunk as it is scored;
    ``"euclidean"`` expands ``||q||^2 + ||c||^2 - 2 q . c`` (what ``torch.cdist`` does for large inputs).

    Raises:
        ValueError: bad shapes, dtypes, devices or arguments; and NaN among the scores (a NaN in either
            embedding; found on the device as the search runs and raised after it, with one host read).

    Example:
        >>> import torch
        >>> from torchrank.functional import search
        >>> queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> corpus = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.9, 0.1], [0.5, 0.5]])
        >>> scores, ids = search(queries, corpus, k=2)
        >>> ids  # rows 0 and 2 tie for the first query: the lower id first
        tensor([[0, 2],
                [1, 3]])
        >>> search(queries, corpus, k=2, corpus_ids=torch.tensor([40, 30, 20, 10]))[1]
        tensor([[20, 40],
                [30, 10]])
    """
    _check_search(queries, corpus, k, similarity, corpus_ids, chunk_size, progress)
    num_queries, num_rows = queries.shape[0], corpus.shape[0]
    ids_of_rows = None if corpus_ids is None else corpus_ids.to(torch.int64)
    if similarity == "cosine":
        queries = tnf.normalize(queries, dim=1)
    best_scores = queries.new_full((num_queries, k), float("-inf"))
    best_ids = torch.full((num_queries, k), PAD_ID, dtype=torch.int64, device=queries.device)
    if num_queries == 0 or num_rows == 0:
        return best_scores, best_ids
    rows, query_rows = _chunk_shape(num_queries, num_rows, k, queries.element_size(), chunk_size)
    query_sq = queries.square().sum(1, keepdim=True) if similarity == "euclidean" else None
    nan_seen = torch.zeros((), dtype=torch.bool, device=queries.device)
    for start in range(0, num_rows, rows):
        chunk = corpus[start:start + rows]
        chunk_ids = (torch.arange(start, start + chunk.shape[0], device=corpus.device) if ids_of_rows is None
                     else ids_of_rows[start:start + chunk.shape[0]])
        if similarity == "cosine":
            chunk = tnf.normalize(chunk, dim=1)
        chunk_sq = chunk.square().sum(1) if similarity == "euclidean" else None
        for q in range(0, num_queries, query_rows):
            block = slice(q, q + query_rows)
            scores = _score(queries[block], chunk, query_sq, chunk_sq, block)
            top_scores, top_ids = _chunk_top_k(scores, chunk_ids, k)
            nan_seen |= torch.isnan(top_scores).any()
            best_scores[block], best_ids[block] = merge_top_k([best_scores[block], top_scores],
                                                              [best_ids[block], top_ids], k)
        if progress is not None:
            progress(start + chunk.shape[0], num_rows)
    if bool(nan_seen):
        raise ValueError("Arguments `queries` and `corpus` must hold no NaN, but their scores hold NaN (a NaN in "
                         "an embedding, or infinities whose product is NaN).")
    return best_scores, best_ids


def merge_top_k(scores: Sequence[Tensor], ids: Sequence[Tensor], k: int) -> tuple[Tensor, Tensor]:
    """The top ``k`` of several top-k lists of the same queries (one per corpus shard or chunk), exactly.

    The same order as :func:`search`: highest score first, equal scores by id, lowest first, padding (id ``-1``)
    after every real item; so merging the results of :func:`search` over disjoint shards of a corpus gives the
    result of searching the whole corpus, however it was split. Lists shorter than ``k`` in total are padded
    with score ``-inf`` and id ``-1``.

    Args:
        scores: ``[Q, k_i]`` float tensors, one per list, all of one dtype and device.
        ids: ``[Q, k_i]`` integer ids of those scores, ``-1`` at padding.
        k: How many to keep (>= 1).

    Example:
        >>> import torch
        >>> from torchrank.functional import merge_top_k
        >>> shard_a = torch.tensor([[0.9, 0.5]]), torch.tensor([[4, 7]])
        >>> shard_b = torch.tensor([[0.7, 0.5]]), torch.tensor([[2, 3]])
        >>> merge_top_k([shard_a[0], shard_b[0]], [shard_a[1], shard_b[1]], k=3)
        (tensor([[0.9000, 0.7000, 0.5000]]), tensor([[4, 2, 3]]))
    """
    _check_merge(scores, ids, k)
    all_scores, all_ids = torch.cat(list(scores), 1), torch.cat([i.to(torch.int64) for i in ids], 1)
    if all_scores.shape[1] < k:  # pad first, so that the one selection below also orders the padding last
        fill = k - all_scores.shape[1]
        all_scores = torch.cat([all_scores, all_scores.new_full((all_scores.shape[0], fill), float("-inf"))], 1)
        all_ids = torch.cat([all_ids, all_ids.new_full((all_ids.shape[0], fill), PAD_ID)], 1)
    # two stable sorts: by id (padding as the largest), then by score, highest first; equal scores keep id order
    by_id = torch.where(all_ids == PAD_ID, _INT64_MAX, all_ids).argsort(dim=1, stable=True)
    all_scores, all_ids = all_scores.gather(1, by_id), all_ids.gather(1, by_id)
    by_score = all_scores.argsort(dim=1, descending=True, stable=True)[:, :k]
    return all_scores.gather(1, by_score), all_ids.gather(1, by_score)


def _score(queries: Tensor, chunk: Tensor, query_sq: Tensor | None, chunk_sq: Tensor | None, block: slice) -> Tensor:
    """``[q, c]`` similarities of a block of queries to a chunk of corpus rows."""
    if query_sq is None:
        return queries @ chunk.T
    squared = torch.addmm(query_sq[block] + chunk_sq, queries, chunk.T, alpha=-2)  # ||q||^2 + ||c||^2 - 2 q.c
    return squared.clamp_min_(0).sqrt_().neg_()


def _chunk_top_k(scores: Tensor, chunk_ids: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The top ``min(k, c)`` of a ``[q, c]`` chunk, exact at ties: ``(scores, ids)`` in no particular order."""
    num_cols = scores.shape[1]
    if num_cols <= k:
        return scores, chunk_ids.expand(scores.shape[0], -1)
    values, cols = scores.topk(k + 1, dim=1)
    tied = values[:, k] == values[:, k - 1]  # the k-th score is shared with an item topk left out: choose by id
    values, cols = values[:, :k], cols[:, :k]
    if bool(tied.any()):
        rows = tied.nonzero().squeeze(1)
        cols[rows] = _lowest_ids_at_threshold(scores[rows], chunk_ids, values[rows, k - 1:k], k)
        values[rows] = scores[rows].gather(1, cols[rows])
    return values, chunk_ids[cols]


def _lowest_ids_at_threshold(scores: Tensor, chunk_ids: Tensor, threshold: Tensor, k: int) -> Tensor:
    """Columns of the top ``k`` of each row whose ``k``-th score is ``threshold``: every column above it, then the
    tied columns with the lowest ids."""
    key = torch.where(scores == threshold, chunk_ids, _INT64_MAX)
    key = torch.where(scores > threshold, -1, key)  # above the threshold: always kept (fewer than k of them)
    return key.topk(k, dim=1, largest=False).indices


def _chunk_shape(num_queries: int, num_rows: int, k: int, score_bytes: int, chunk_size: int | None) -> tuple[int, int]:
    """``(corpus rows per chunk, queries per block)``: the score block within the memory budget."""
    per_score = score_bytes + _EXTRA_BYTES_PER_SCORE
    if chunk_size is not None:
        return chunk_size, num_queries
    budget = _budget() or _DEFAULT_BLOCK_BYTES
    rows = budget // (num_queries * per_score)
    if rows >= min(_MIN_CHUNK_ROWS, num_rows, k + 1):
        return max(1, min(rows, num_rows)), num_queries
    rows = min(_MIN_CHUNK_ROWS, num_rows)
    return rows, max(1, budget // (rows * per_score))


def _check_search(
    queries: Tensor, corpus: Tensor, k: int, similarity: str, corpus_ids: Tensor | None, chunk_size: int | None,
    progress: object,
) -> None:
    """Types, shapes, dtypes, devices and arguments (no value is read)."""
    for name, x in (("queries", queries), ("corpus", corpus)):
        if not isinstance(x, Tensor) or x.ndim != 2 or not x.is_floating_point():
            raise ValueError(f"Argument `{name}` must be a 2-D float tensor of embeddings, got {_describe(x)}.")
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(f"Arguments `queries` and `corpus` must have the same embedding dimension, got "
                         f"{tuple(queries.shape)} and {tuple(corpus.shape)}.")
    if queries.dtype != corpus.dtype or queries.device != corpus.device:
        raise ValueError(f"Arguments `queries` and `corpus` must have the same dtype and device, got "
                         f"{queries.dtype} on {queries.device} and {corpus.dtype} on {corpus.device}.")
    _check_k(k)
    if similarity not in SIMILARITIES:
        raise ValueError(f"Argument `similarity` must be one of {SIMILARITIES}, got {similarity!r}.")
    if corpus_ids is not None:
        wrong = not is_integer_tensor(corpus_ids) or corpus_ids.shape != corpus.shape[:1]
        if wrong or corpus_ids.dtype == torch.uint64:
            raise ValueError(f"Argument `corpus_ids` must be a [{corpus.shape[0]}] integer tensor (one id per corpus "
                             f"row, int64 or narrower), got {_describe(corpus_ids)}.")
        if corpus_ids.device != corpus.device:
            raise ValueError(f"Argument `corpus_ids` must be on {corpus.device}, got {corpus_ids.device}.")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"Argument `chunk_size` must be a positive int or None, got {chunk_size!r}.")
    if progress is not None and not callable(progress):
        raise ValueError(f"Argument `progress` must be a callable (rows_done, rows_total) or None, got {progress!r}.")


def _check_merge(scores: Sequence[Tensor], ids: Sequence[Tensor], k: int) -> None:
    _check_k(k)
    if len(scores) == 0 or len(scores) != len(ids):
        raise ValueError(f"Arguments `scores` and `ids` must be non-empty sequences of equal length, got "
                         f"{len(scores)} and {len(ids)}.")
    first = scores[0]
    for s, i in zip(scores, ids, strict=True):
        if not isinstance(s, Tensor) or s.ndim != 2 or not s.is_floating_point() or s.dtype != first.dtype:
            raise ValueError(f"Argument `scores` must hold [queries, k] float tensors of one dtype, got "
                             f"{_describe(s)}.")
        if not is_integer_tensor(i) or i.shape != s.shape or i.device != s.device or s.shape[0] != first.shape[0]:
            raise ValueError(f"Argument `ids` must hold integer tensors shaped and placed as their scores "
                             f"{tuple(s.shape)}, got {_describe(i)}.")


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"Argument `k` must be a positive int, got {k!r}.")


def _describe(x: object) -> str:
    return f"shape {tuple(x.shape)} dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
