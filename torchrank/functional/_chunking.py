"""Dense input whose working memory would pass the budget (:func:`memory_budget`; by default half the free memory of
its device) is evaluated by chunks of queries, joined and reduced once: every measure is per row, so the values are
the same. The per-query values of all queries come on top of the budget, as they would without chunks."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor

from torchrank.functional._compile import constant_when_compiled

# working memory per list item beyond the input (rank order, ranked labels and scores, the measures' per-position
# tensors): about 55 bytes measured (benchmarks/bench_chunked.py); the round figure leaves headroom
BYTES_PER_ITEM = 96

_ALWAYS_FITS = 256 * 2**20  # working memory that any device has to spare without asking

_BUDGET: ContextVar[int | None] = ContextVar("torchrank_memory_budget", default=None)


@contextmanager
def memory_budget(num_bytes: int | None) -> Iterator[None]:
    """Cap the working memory of the ranking functions inside the ``with`` block at ``num_bytes``: larger dense inputs
    are evaluated in chunks of queries, with the same result. ``None``: half the free memory of the input's device.

    Example:
        >>> import torch
        >>> from torchrank.functional import memory_budget, ndcg
        >>> preds, target = torch.rand(1000, 50), torch.randint(0, 3, (1000, 50))
        >>> with memory_budget(2**20):  # 1 MiB: chunks of about 200 queries
        ...     chunked = ndcg(preds, target, k=10)
        >>> torch.equal(chunked, ndcg(preds, target, k=10))
        True
    """
    if num_bytes is not None and (isinstance(num_bytes, bool) or not isinstance(num_bytes, int) or num_bytes <= 0):
        raise ValueError(f"Argument `num_bytes` must be a positive int or None, got {num_bytes!r}.")
    token = _BUDGET.set(num_bytes)
    try:
        yield
    finally:
        _BUDGET.reset(token)


@constant_when_compiled  # torch.compile reads the setting once, at tracing, as a constant
def current_memory_budget() -> int | None:
    """The ``num_bytes`` of the innermost :func:`memory_budget` block in force, or None (the default budget).

    Example:
        >>> from torchrank.functional import current_memory_budget, memory_budget
        >>> with memory_budget(2**20):
        ...     current_memory_budget()
        1048576
    """
    return _BUDGET.get()


def _default_budget(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free // 2
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): never chunk on CPU
        return 2**62


#: The prefix of the chunked inputs that carry a measure's tensor parameter, ``[*batch, 1]`` or shaped as ``preds``.
PARAMETER_ROWS = "param:"


def query_chunks(preds: Tensor, tensors: dict[str, Tensor | None]) -> list[slice] | None:
    """Slices of the query axis that each fit the budget; None when the input fits (or is not dense with consistent
    shapes: validation then reports it)."""
    if not isinstance(preds, Tensor) or preds.dim() < 2 or preds.numel() == 0:
        return None
    lead = preds.shape[:-1]
    for name, tensor in tensors.items():
        if tensor is None:
            continue
        if not isinstance(tensor, Tensor) or tensor.dim() != preds.dim() or tensor.shape[:-1] != lead:
            return None
        per_query_column = name.startswith(PARAMETER_ROWS) and tensor.shape[-1] == 1
        if name != "ideal_target" and tensor.shape != preds.shape and not per_query_column:
            return None
    num_queries = preds.numel() // preds.shape[-1]
    ideal = tensors.get("ideal_target")
    per_query = (preds.shape[-1] + (0 if ideal is None else ideal.shape[-1])) * BYTES_PER_ITEM
    budget = current_memory_budget()
    if budget is None:
        if num_queries * per_query <= _ALWAYS_FITS:
            return None  # spare the query of free memory (a read of /proc/meminfo) for small inputs
        budget = _default_budget(preds.device)
    rows = max(1, budget // per_query)
    return None if rows >= num_queries else [slice(i, min(i + rows, num_queries)) for i in range(0, num_queries, rows)]


def reduce_queries(values: Tensor, reduction: str, batch_shape: Sequence[int]) -> Tensor:
    """Per-query values ``[Q, ...]`` reduced over the queries (NaN, a skipped query, left out), or shaped
    ``[*batch_shape, ...]`` for ``"none"``."""
    if reduction == "none":
        shape = (*batch_shape, *values.shape[1:])
        return values if values.shape == shape else values.reshape(shape)
    return torch.nansum(values, 0) if reduction == "sum" else torch.nanmean(values, 0)


def evaluate_in_chunks(
    call: Callable[[dict[str, Tensor | None]], Tensor], preds: Tensor, tensors: dict[str, Tensor | None]
) -> Tensor | None:
    """``call`` (per-query values ``[q, ...]``) on each chunk of ``{"preds": preds, **tensors}``, joined ``[*batch,
    ...]`` as they come (held once, not twice); None if one call fits the budget."""
    chunks = query_chunks(preds, tensors)
    if chunks is None:
        return None
    everything = {"preds": preds, **tensors}
    joined = None
    for rows in chunks:  # the queries `rows` of each tensor, batch dimensions flattened into one query axis
        part = call({name: None if t is None else t.reshape(-1, t.shape[-1])[rows] for name, t in everything.items()})
        if joined is None:
            joined = part.new_empty((chunks[-1].stop, *part.shape[1:]))
        joined[rows] = part
    return reduce_queries(joined, "none", preds.shape[:-1])
