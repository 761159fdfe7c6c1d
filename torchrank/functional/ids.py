"""Id-list input (the top-K ids a retriever returns, and the relevant ids) as the dense input every ranking function
takes, matched by the backend of the ids' device, or by ``searchsorted`` on any device (docs/recommenders.md)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._chunking import current_memory_budget
from torchrank.functional._inputs import is_integer_tensor
from torchrank.functional.backends import backend_for
from torchrank.functional.checks import described

# top-k working memory per catalogue score: the scores' copy a sort-based top-k may make plus its indices
_TOPK_BYTES_PER_SCORE = 16
_DEFAULT_TOPK_BUDGET = 2**30


def ids_to_dense(
    ranked_ids: Tensor, relevant_ids: Tensor, relevant_labels: Tensor | None = None, *, pad_id: int = -1,
    scores: Tensor | None = None,
) -> dict[str, Tensor]:
    """Dense ranking input from id lists: ``{"preds", "target", "mask", "ideal_target"}``.

    Args:
        ranked_ids: ``[B, K]`` integer ids of each query's retrieved items, best first; ``pad_id`` pads a
            shorter list (anywhere in the row).
        relevant_ids: ``[B, M]`` integer ids of each query's relevant (judged) items, ``pad_id`` as padding; those
            missing from the ranked list still count in ``R`` and the ideal ranking, as in trec_eval.
        relevant_labels: ``[B, M]`` graded labels (>= 0) of ``relevant_ids``; None: label 1 for every one.
        pad_id: The id that marks padding in both id tensors, one their dtype holds (not -1 with ``uint8`` ids).
        scores: Optional ``[B, K]`` scores of the ranked items (their ties then follow the measures' ``ties``);
            None: the list order itself (position scores ``K, K-1, ..., 1``).

    Returns:
        ``preds [B, K]`` (float), ``target [B, K]`` (0 where not relevant), ``mask [B, K]`` (False at padding) and
        ``ideal_target [B, max(M, 1)]``. A repeated ranked id counts at its first position only; a repeated relevant
        id counts once, with its largest label.

    Example:
        >>> import torch
        >>> from torchrank.functional import ids_to_dense, ndcg, recall
        >>> ranked = torch.tensor([[7, 3, 9], [4, 5, -1]])
        >>> relevant = torch.tensor([[3, 8], [5, -1]])
        >>> inputs = ids_to_dense(ranked, relevant)
        >>> inputs["target"]
        tensor([[0, 1, 0],
                [0, 1, 0]])
        >>> recall(**inputs, k=3)  # item 8 is relevant but not retrieved: R = 2 for the first query
        tensor(0.7500)
    """
    _check_ids(ranked_ids, relevant_ids, relevant_labels, scores, pad_id)
    if relevant_ids.shape[1] == 0:  # one padding column, which matches nothing: every path needs an entry
        relevant_ids = torch.full_like(ranked_ids[:, :1], pad_id)
        relevant_labels = None if relevant_labels is None else relevant_labels.new_zeros(relevant_ids.shape)
    mask, matched = backend_for(ranked_ids.device).match_ids(ranked_ids, relevant_ids, relevant_labels, pad_id)
    target, ideal = matched or _match_torch(ranked_ids, relevant_ids, relevant_labels, pad_id, mask)
    if scores is None:  # the list order: position scores K, K-1, ..., 1
        scores = torch.arange(ranked_ids.shape[1], 0, -1, dtype=torch.get_default_dtype(), device=ranked_ids.device)
    return {"preds": scores.expand(ranked_ids.shape), "target": target, "mask": mask, "ideal_target": ideal}


def _match_torch(
    ranked_ids: Tensor, relevant_ids: Tensor, relevant_labels: Tensor | None, pad_id: int, mask: Tensor,
) -> tuple[Tensor, Tensor]:
    """``(target [B, K], ideal [B, M])`` on any device without a host read: each query's relevant ids sorted
    once, the ranked ids found with ``searchsorted`` (uint16-uint64, which those ops lack, as :func:`_signed`)."""
    labels = torch.ones_like(relevant_ids) if relevant_labels is None else relevant_labels
    label_dtype = labels.dtype
    pad = pad_id + _SIGN_BIT if ranked_ids.dtype == torch.uint64 else pad_id  # as _signed maps the ids
    ranked_ids, relevant_ids, labels = _signed(ranked_ids), _signed(relevant_ids), _signed(labels)
    zero = _signed(torch.zeros((), dtype=label_dtype, device=labels.device))  # label 0, as matched
    # each row's relevant ids ascending: an id's largest label at its first entry, label 0 at its repeats (one sort;
    # the largest label of a run of equal ids by a segment maximum, not a second sort)
    sorted_ids, order = relevant_ids.sort(1)
    labels = torch.where(relevant_ids != pad, labels, zero).gather(1, order)
    repeat = torch.zeros_like(sorted_ids, dtype=torch.bool)
    repeat[:, 1:] = sorted_ids[:, 1:] == sorted_ids[:, :-1]
    if relevant_labels is not None:  # binary labels are equal within a run already
        run = (~repeat).cumsum(1) - 1
        labels = torch.zeros_like(labels).scatter_reduce_(1, run, labels, "amax", include_self=False).gather(1, run)
    ideal = torch.where(repeat, zero, labels)
    # a ranked id found among the relevant ones points at its first (largest-label) entry
    where = torch.searchsorted(sorted_ids.contiguous(), ranked_ids.contiguous()).clamp_(max=sorted_ids.shape[1] - 1)
    found = (sorted_ids.gather(1, where) == ranked_ids) & mask
    # only a relevant id's repeats need finding (a repeated non-relevant id is label 0 anyway): the first ranked
    # position of each found relevant entry, by a scatter of positions, not a sort
    k = where.shape[1]
    position = torch.arange(k, device=where.device).expand_as(where)
    first = torch.full(sorted_ids.shape, k, device=where.device, dtype=position.dtype)
    found &= first.scatter_reduce_(1, where, torch.where(found, position, k), "amin").gather(1, where) == position
    target = torch.where(found, ideal.gather(1, where), zero)
    return _unsigned(target, label_dtype), _unsigned(ideal, label_dtype)


# an int64 with only the sign bit set: XOR with it maps uint64's order onto int64's (v -> v - 2^63)
_SIGN_BIT = -(2**63)
_WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def _signed(x: Tensor) -> Tensor:
    """``x`` as a signed tensor in the same order: uint16/uint32 widened to int64, uint64 shifted down by 2^63."""
    if x.dtype == torch.uint64:
        return x.view(torch.int64) ^ _SIGN_BIT
    return x.to(torch.int64) if x.dtype in _WIDE_UNSIGNED else x


def _unsigned(x: Tensor, dtype: torch.dtype) -> Tensor:
    """The inverse of :func:`_signed`: ``x`` back in ``dtype``."""
    if dtype == torch.uint64:
        return (x ^ _SIGN_BIT).view(torch.uint64)
    return x.to(dtype) if dtype in _WIDE_UNSIGNED else x


def first_occurrence(ids: Tensor, pad_id: int = -1) -> Tensor:
    """``[B, K]`` bool: True where an id is not padding and does not occur earlier in its row (one sort per row, by
    the backend of the ids' device or a stable ``torch.sort``).

    Example:
        >>> import torch
        >>> first_occurrence(torch.tensor([[4, 2, 4, -1, 2, 5]]))
        tensor([[ True,  True, False, False, False,  True]])
    """
    if not is_integer_tensor(ids) or ids.ndim != 2:
        raise ValueError(f"Argument `ids` must be a [lists, items] integer tensor, got {described(ids)}.")
    first = backend_for(ids.device).first_occurrence(ids)
    if first is None:
        ordered, order = torch.sort(ids, dim=1, stable=True)
        # the first of each run of equal ids keeps True; a validation epoch calls this per batch: few ops
        first = torch.ones_like(ids, dtype=torch.bool).scatter_(1, order[:, 1:], ordered[:, 1:] != ordered[:, :-1])
    return first & (ids != pad_id)


def top_k_ids(scores: Tensor, k: int, *, max_bytes: int | None = None) -> tuple[Tensor, Tensor]:
    """The ``k`` best items of each query over a catalogue: ``(values [B, k], ids [B, k])``, best first, by chunks of
    queries whose working memory stays under ``max_bytes`` (default: :func:`~torchrank.functional.memory_budget`'s,
    else 1 GiB).

    Example:
        >>> import torch
        >>> values, ids = top_k_ids(torch.tensor([[0.1, 0.9, 0.5], [0.7, 0.2, 0.3]]), 2)
        >>> ids
        tensor([[1, 2],
                [0, 2]])
    """
    if not isinstance(scores, Tensor) or scores.ndim != 2 or not scores.is_floating_point():
        raise ValueError(f"Argument `scores` must be a [queries, items] float tensor, got {described(scores)}.")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 < k <= scores.shape[1]:
        raise ValueError(f"Argument `k` must be an int in [1, {scores.shape[1]}] (the catalogue size), got {k!r}.")
    budget = max_bytes or current_memory_budget() or _DEFAULT_TOPK_BUDGET
    rows = max(1, budget // (_TOPK_BYTES_PER_SCORE * scores.shape[1]))
    parts = [chunk.topk(k, dim=1) for chunk in scores.split(rows)]
    return torch.cat([p.values for p in parts]), torch.cat([p.indices for p in parts])


def catalogue_to_dense(
    scores: Tensor, relevant_ids: Tensor, k: int, relevant_labels: Tensor | None = None, *, pad_id: int = -1,
) -> dict[str, Tensor]:
    """Dense ranking input of the top ``k`` of catalogue scores ``[B, C]`` (item ids are column numbers), as
    :func:`ids_to_dense` with the retrieved items' scores.

    Example:
        >>> import torch
        >>> from torchrank.functional import catalogue_to_dense, recall
        >>> scores = torch.tensor([[0.1, 0.9, 0.5, 0.3], [0.7, 0.2, 0.3, 0.8]])
        >>> recall(**catalogue_to_dense(scores, torch.tensor([[2, 0], [3, -1]]), k=2))
        tensor(0.7500)
    """
    values, ids = top_k_ids(scores, k)
    if is_integer_tensor(relevant_ids) and relevant_ids.dtype != ids.dtype:
        # item ids are column numbers: matched in the caller's id dtype where it holds them all
        if torch.iinfo(relevant_ids.dtype).max < scores.shape[1] - 1:
            raise ValueError(f"Argument `relevant_ids` has dtype {relevant_ids.dtype}, which cannot hold the "
                             f"catalogue's item ids (0 to {scores.shape[1] - 1}).")
        ids = ids.to(relevant_ids.dtype)
    return ids_to_dense(ids, relevant_ids, relevant_labels, pad_id=pad_id, scores=values)


def _check_ids(
    ranked_ids: Tensor, relevant_ids: Tensor, relevant_labels: Tensor | None, scores: Tensor | None, pad_id: int
) -> None:
    """Types, shapes, devices and the padding id (no value is read)."""
    for name, ids in (("ranked_ids", ranked_ids), ("relevant_ids", relevant_ids)):
        if not is_integer_tensor(ids) or ids.ndim != 2:
            raise ValueError(f"Argument `{name}` must be a [queries, items] integer tensor, got {described(ids)}.")
    if ranked_ids.shape[0] != relevant_ids.shape[0]:
        raise ValueError(f"Arguments `ranked_ids` and `relevant_ids` must have the same number of queries, got "
                         f"{tuple(ranked_ids.shape)} and {tuple(relevant_ids.shape)}.")
    if ranked_ids.shape[1] == 0:
        raise ValueError("Argument `ranked_ids` must hold at least one position, got shape "
                         f"{tuple(ranked_ids.shape)}.")
    for name, other, like in (("relevant_labels", relevant_labels, relevant_ids), ("scores", scores, ranked_ids)):
        if other is not None and (not isinstance(other, Tensor) or other.shape != like.shape):
            raise ValueError(f"Argument `{name}` must be a tensor of shape {tuple(like.shape)}, got "
                             f"{described(other)}.")
    for name, other in (("relevant_ids", relevant_ids), ("relevant_labels", relevant_labels), ("scores", scores)):
        if other is not None and other.device != ranked_ids.device:
            raise ValueError(f"Argument `{name}` must be on {ranked_ids.device}, got {other.device}.")
    if scores is not None and not scores.is_floating_point():
        raise ValueError(f"Argument `scores` must hold float scores, got dtype {scores.dtype}.")
    if relevant_ids.dtype != ranked_ids.dtype:
        raise ValueError(f"Arguments `ranked_ids` and `relevant_ids` must have the same dtype, got "
                         f"{ranked_ids.dtype} and {relevant_ids.dtype}.")
    info = torch.iinfo(ranked_ids.dtype)
    if isinstance(pad_id, bool) or not isinstance(pad_id, int) or not info.min <= pad_id <= info.max:
        # an id dtype cannot hold it (-1 in uint8): comparisons would wrap it onto a real id on some paths only
        raise ValueError(f"Argument `pad_id` must be an int that {ranked_ids.dtype} ids can hold "
                         f"([{info.min}, {info.max}]), got {pad_id!r}.")

