"""Exact top-k search of a corpus by embeddings, in chunks of the corpus (one matrix product each, into a reused
buffer) merged into a running top ``k`` by score, then id: never a ``[queries, corpus]`` matrix. A chunk's
candidates: :func:`_candidates`; memory, host reads and ties: docs/retrieval.md."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as tnf
from torch import Tensor

from torchrank.functional._chunking import current_memory_budget
from torchrank.functional._inputs import check_choice, is_integer_tensor
from torchrank.functional.checks import described

SIMILARITIES = ("dot", "cosine", "euclidean")
PAD_ID = -1
# working memory per score of a chunk, in bytes beyond the score: the (k + 1) selection's copy of a row (per thread)
# and, for "euclidean", the norms' sum the product accumulates into; rounded up for headroom
_EXTRA_BYTES_PER_SCORE = 4
# without a memory budget, the bytes of a chunk's scores and working memory: the product at full speed and the merge a
# small share of the work, far below any device's memory
_DEFAULT_BLOCK_BYTES = 2**29
_MIN_CHUNK_ROWS = 1024  # the fewest corpus rows per chunk when the queries are split into blocks for the budget
_INT64_MAX = torch.iinfo(torch.int64).max


@torch.no_grad()
def search(
    queries: Tensor, corpus: Tensor, k: int, *, similarity: str = "dot", corpus_ids: Tensor | None = None,
    chunk_size: int | None = None, progress: Callable[[int, int], object] | None = None,
) -> tuple[Tensor, Tensor]:
    """The ``k`` corpus items most similar to each query: ``(scores [Q, k], ids [Q, k])``, best first.

    Exact: every query is scored against every corpus row, by matrix products over chunks of ``chunk_size`` corpus
    rows; the extra memory is about ``Q x (k + chunk_size)`` scores. Details: docs/retrieval.md.

    Args:
        queries: ``[Q, D]`` float embeddings (float32, float16, bfloat16 or float64).
        corpus: ``[C, D]`` float embeddings, same dtype and device as ``queries``.
        k: How many items to return per query (>= 1). With fewer than ``k`` corpus rows, the rest of each row is
            padding: score ``-inf``, id ``-1``.
        similarity: ``"dot"`` (``q . c``), ``"cosine"`` (of the L2-normalised embeddings, as sentence-transformers'
            ``cos_sim``) or ``"euclidean"`` (``-||q - c||``, as its ``euclidean_sim``: higher is closer).
        corpus_ids: ``[C]`` integer ids of the corpus rows (returned as int64), unique and >= 0 (-1 marks padding);
            None: the row numbers.
        chunk_size: Corpus rows per matrix product; None: as many as the memory budget allows
            (:func:`torchrank.functional.memory_budget`, else 512 MiB for the scores and their working memory), the
            queries split into blocks too when even 1,024 rows would not fit.
        progress: Called after each chunk as ``progress(rows_done, rows_total)``, in corpus rows (queued ones on
            CUDA) over every block of queries.

    Returns:
        ``scores [Q, k]`` in the embeddings' dtype (as ``queries @ corpus.T`` gives them), highest first, equal
        scores ordered by id, lowest first; and ``ids [Q, k]`` (int64). No gradient flows (``torch.no_grad()``).

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
    if num_queries == 0 or num_rows == 0:
        return _padded(queries.new_empty((num_queries, 0)), queries.new_empty((num_queries, 0), dtype=torch.int64), k)
    rows, query_rows = _chunk_shape(num_queries, num_rows, k, queries.element_size(), chunk_size)
    blocks = range(0, num_queries, query_rows)
    buffer = queries.new_empty(min(query_rows, num_queries) * min(rows, num_rows))  # every chunk's scores, reused
    results = []
    for block_number, q in enumerate(blocks):
        block = queries[q:q + query_rows]
        block_sq = block.square().sum(1, keepdim=True) if similarity == "euclidean" else None
        best: tuple[Tensor, Tensor] | None = None
        for start in range(0, num_rows, rows):
            chunk = corpus[start:start + rows]
            if similarity == "cosine":
                chunk = tnf.normalize(chunk, dim=1)
            scores = buffer[:block.shape[0] * chunk.shape[0]].view(block.shape[0], chunk.shape[0])
            if block_sq is None:
                torch.matmul(block, chunk.T, out=scores)
            else:  # -sqrt(||q||^2 + ||c||^2 - 2 q.c)
                torch.add(block_sq, chunk.square().sum(1), out=scores)
                scores.addmm_(block, chunk.T, alpha=-2).clamp_min_(0).sqrt_().neg_()
            best = _merge_chunk(best, scores, ids_of_rows, start, k)
            if progress is not None:
                progress(block_number * num_rows + start + chunk.shape[0], len(blocks) * num_rows)
        results.append(best)
    best_scores, best_ids = torch.cat([r[0] for r in results]), torch.cat([r[1] for r in results])
    if bool(torch.isnan(best_scores).any()):  # topk ranks NaN first: a NaN score anywhere is in the top k
        raise ValueError("Arguments `queries` and `corpus` must hold no NaN, but their scores hold NaN (a NaN in "
                         "an embedding, or infinities whose product is NaN).")
    return _padded(*_in_order(best_scores, best_ids), k)


def merge_top_k(scores: Sequence[Tensor], ids: Sequence[Tensor], k: int) -> tuple[Tensor, Tensor]:
    """The top ``k`` of several top-k lists of the same queries (one per corpus shard or chunk), exactly.

    In :func:`search`'s order (equal scores by id, lowest first, padding after every real item), so merging its
    results over disjoint shards of a corpus gives the search of the whole corpus, however it was split. Lists
    shorter than ``k`` in total are padded with score ``-inf`` and id ``-1``.

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
    _check_k(k)
    if len(scores) == 0 or len(scores) != len(ids):
        raise ValueError(f"Arguments `scores` and `ids` must be non-empty sequences of equal length, got "
                         f"{len(scores)} and {len(ids)}.")
    for s, i in zip(scores, ids, strict=True):
        if not isinstance(s, Tensor) or s.ndim != 2 or not s.is_floating_point() or s.dtype != scores[0].dtype:
            raise ValueError(f"Argument `scores` must hold [queries, k] float tensors of one dtype, got "
                             f"{described(s)}.")
        if not is_integer_tensor(i) or i.shape != s.shape or i.device != s.device or s.shape[0] != scores[0].shape[0]:
            raise ValueError(f"Argument `ids` must hold integer tensors shaped and placed as their scores "
                             f"{tuple(s.shape)}, got {described(i)}.")
    all_scores, all_ids = torch.cat(list(scores), 1), torch.cat([i.to(torch.int64) for i in ids], 1)
    return _padded(*_in_order(*_select(all_scores, all_ids, k)), k)


def _merge_chunk(best: tuple[Tensor, Tensor] | None, scores: Tensor, ids_of_rows: Tensor | None, start: int, k: int
                 ) -> tuple[Tensor, Tensor]:
    """The running top ``k`` (scores, ids; None before the first chunk) merged with a chunk's ``[q, c]`` scores, the
    chunk's columns being corpus rows ``start, start + 1, ...`` (their ids: ``ids_of_rows``, else the row numbers)."""

    def ids_of(cols: Tensor) -> Tensor:
        return cols + start if ids_of_rows is None else ids_of_rows[cols + start]

    # once k items are held, only chunk items scoring at least the k-th of them can enter (ties with a lower id)
    floor = None if best is None or best[0].shape[1] < k else best[0].amin(1, keepdim=True)
    cols, padding = _candidates(scores, k, floor)
    if cols is None:
        every = torch.arange(scores.shape[1], device=scores.device)
        candidates, ids = scores, ids_of(every).expand(scores.shape[0], -1)
    else:
        candidates, ids = scores.gather(1, cols), ids_of(cols)
        if padding is not None:  # rows with fewer candidates than the fullest: score -inf, id -1
            candidates.masked_fill_(padding, float("-inf"))
            ids.masked_fill_(padding, PAD_ID)
    if best is not None:
        candidates, ids = torch.cat([best[0], candidates], 1), torch.cat([best[1], ids], 1)
    merged = _select(candidates, ids, k)
    if merged[0] is scores:  # the whole chunk kept (k or fewer columns): out of the buffer the next chunk reuses
        merged = scores.clone(), ids.clone()
    return merged


def _candidates(scores: Tensor, k: int, floor: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
    """``(cols, padding)``: each row's candidate columns (every item that can enter its top ``k`` under any order of
    ties; None: every column) and their padding (None if none). The candidates are the strided groups of columns
    (group ``j``: columns ``j``, ``j + c / g``, ...) whose maximum reaches ``floor`` (``[q, 1]``, the ``k``-th score
    held so far; for the first chunk the ``k``-th highest group maximum), ties included, no sort."""
    num_queries, num_cols = scores.shape
    size = 16  # columns per group: the largest power of two up to 16 leaving at least 4 (k + 1) groups
    while size > 1 and num_cols // size < 4 * (k + 1):
        size //= 2
    if size < 2:  # a chunk too small to gain
        return None, None
    groups = num_cols // size
    maxima = scores[:, :groups * size].view(num_queries, size, groups).amax(1)
    if floor is None:
        floor = maxima.topk(k, dim=1, sorted=False).values.amin(1, keepdim=True)
    which, padding = _reaching(maxima, floor)
    members = torch.arange(0, groups * size, groups, device=scores.device)
    width = which.shape[1] * size  # explicit: a chunk no row can gain from has none
    cols = (which[:, :, None] + members).view(num_queries, width)
    padding = padding[:, :, None].expand(-1, -1, size).reshape(num_queries, width)
    if groups * size < num_cols:  # the last columns, in no group: candidates all
        rest = torch.arange(groups * size, num_cols, device=scores.device).expand(num_queries, -1)
        cols = torch.cat([cols, rest], 1)
        padding = torch.cat([padding, torch.zeros_like(rest, dtype=torch.bool)], 1)
    return cols, padding


def _reaching(maxima: Tensor, floor: Tensor) -> tuple[Tensor, Tensor]:
    """``(groups [q, w], padding [q, w])``: each row's groups whose maximum is not below ``floor`` (NaN included:
    NaN must reach the top k), left-aligned in a row as wide as the fullest row's count, padded with group 0."""
    rows, which = torch.nonzero(~(maxima < floor), as_tuple=True)  # row-major: each row's groups in order
    counts = torch.bincount(rows, minlength=maxima.shape[0])
    width = int(counts.max()) if rows.numel() else 0
    slot = torch.arange(rows.numel(), device=maxima.device) - (counts.cumsum(0) - counts)[rows]
    groups = torch.zeros((maxima.shape[0], width), dtype=torch.int64, device=maxima.device)
    groups[rows, slot] = which
    return groups, torch.arange(width, device=maxima.device) >= counts[:, None]


def _select(scores: Tensor, ids: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The top ``k`` of each row of ``[q, n]`` scores by score, then lowest id (padding, id -1, last), in no
    particular order; every column when ``n <= k``."""
    if scores.shape[1] <= k:
        return scores, ids
    values, cols = scores.topk(k + 1, dim=1)
    tied = values[:, k] == values[:, k - 1]  # the k-th score is shared with an item topk left out: choose by id
    cols = cols[:, :k]
    if bool(tied.any()):  # those rows: every column above the k-th score, then the tied ones of lowest id, padding last
        rows = tied.nonzero().squeeze(1)
        row_scores, row_ids, threshold = scores[rows], ids[rows], values[rows, k - 1:k]
        key = torch.where(row_scores == threshold, torch.where(row_ids < 0, _INT64_MAX - 1, row_ids), _INT64_MAX)
        key = torch.where(row_scores > threshold, -1, key)  # above the threshold: always kept (fewer than k of them)
        cols[rows] = key.topk(k, dim=1, largest=False).indices
    return scores.gather(1, cols), ids.gather(1, cols)


def _in_order(scores: Tensor, ids: Tensor) -> tuple[Tensor, Tensor]:
    """Each row sorted by score, highest first, then by id, lowest first (padding last)."""
    if scores.shape[1] == 0:
        return scores, ids
    id_key = torch.where(ids < 0, _INT64_MAX, ids)
    if scores.dtype == torch.float64:  # no room to pack: two sorts, the second stable
        by_id = id_key.argsort(dim=1)
        scores, ids = scores.gather(1, by_id), ids.gather(1, by_id)
        order = scores.argsort(dim=1, descending=True, stable=True)
        return scores.gather(1, order), ids.gather(1, order)
    # one sort of packed keys: the score's order-preserving 32 bits, then the id's rank within the row, inverted
    width = scores.shape[1]
    id_rank = torch.empty_like(id_key).scatter_(
        1, id_key.argsort(dim=1), torch.arange(width, device=ids.device).expand(ids.shape[0], -1))
    bits = (scores.float() + 0.0).view(torch.int32)  # + 0.0: -0.0 becomes +0.0, equal scores get equal bits
    ordered = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(torch.int64)
    order = ((ordered << 32) + (width - 1 - id_rank)).argsort(dim=1, descending=True)
    return scores.gather(1, order), ids.gather(1, order)


def _padded(scores: Tensor, ids: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """``[Q, k]``: columns past the results filled with score -inf and id -1."""
    missing = k - scores.shape[1]
    if missing <= 0:
        return scores, ids
    fill = scores.new_full((scores.shape[0], missing), float("-inf"))
    return torch.cat([scores, fill], 1), torch.cat([ids, ids.new_full((ids.shape[0], missing), PAD_ID)], 1)


def _chunk_shape(num_queries: int, num_rows: int, k: int, score_bytes: int, chunk_size: int | None) -> tuple[int, int]:
    """``(corpus rows per chunk, queries per block)``: the score block within the memory budget."""
    per_score = score_bytes + _EXTRA_BYTES_PER_SCORE
    if chunk_size is not None:
        return chunk_size, num_queries
    budget = current_memory_budget() or _DEFAULT_BLOCK_BYTES
    rows = budget // (num_queries * per_score)
    if rows >= min(_MIN_CHUNK_ROWS, num_rows, k + 1):
        rows = min(rows, num_rows)
        return max(1, rows - rows % 16 if rows > 16 else rows), num_queries
    rows = min(_MIN_CHUNK_ROWS, num_rows)
    return rows, max(1, budget // (rows * per_score))


def _check_search(queries: Tensor, corpus: Tensor, k: int, similarity: str, corpus_ids: Tensor | None,
                  chunk_size: int | None, progress: object) -> None:
    """Types, shapes, dtypes, devices and arguments (no value is read)."""
    for name, x in (("queries", queries), ("corpus", corpus)):
        if not isinstance(x, Tensor) or x.ndim != 2 or not x.is_floating_point():
            raise ValueError(f"Argument `{name}` must be a 2-D float tensor of embeddings, got {described(x)}.")
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(f"Arguments `queries` and `corpus` must have the same embedding dimension, got "
                         f"{tuple(queries.shape)} and {tuple(corpus.shape)}.")
    if queries.dtype != corpus.dtype or queries.device != corpus.device:
        raise ValueError(f"Arguments `queries` and `corpus` must have the same dtype and device, got "
                         f"{queries.dtype} on {queries.device} and {corpus.dtype} on {corpus.device}.")
    _check_k(k)
    check_choice("similarity", similarity, SIMILARITIES)
    if corpus_ids is not None:
        wrong = not is_integer_tensor(corpus_ids) or corpus_ids.shape != corpus.shape[:1]
        if wrong or corpus_ids.dtype == torch.uint64:
            raise ValueError(f"Argument `corpus_ids` must be a [{corpus.shape[0]}] integer tensor (one id per corpus "
                             f"row, int64 or narrower), got {described(corpus_ids)}.")
        if corpus_ids.device != corpus.device:
            raise ValueError(f"Argument `corpus_ids` must be on {corpus.device}, got {corpus_ids.device}.")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"Argument `chunk_size` must be a positive int or None, got {chunk_size!r}.")
    if progress is not None and not callable(progress):
        raise ValueError(f"Argument `progress` must be a callable (rows_done, rows_total) or None, got {progress!r}.")


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"Argument `k` must be a positive int, got {k!r}.")

