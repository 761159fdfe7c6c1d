"""The torch backend's ordering: one sort of whole rows (stable where the tie order is a key), which every backend
also uses for rows whose ties must be ordered exactly (:func:`_sorted_ranking`)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._inputs import RankingInput, working_dtype
from torchrank.functional._ranked import Ranking, _gather_ranking


def _sorted_ranking(inputs: RankingInput, ties: str, relevance_threshold: float) -> Ranking:
    """The :class:`Ranking` of whole rows of ``inputs`` sorted by :func:`_ranking_order`, ties as ``ties`` says."""
    mask = inputs.mask if inputs.padded else None
    order, scores = _ranking_order(inputs.preds, inputs.target, mask, ties, inputs.padding_last)
    return _gather_ranking(inputs, order, ties, relevance_threshold, scores)


def _ranking_order(
    preds: Tensor, target: Tensor, mask: Tensor | None, ties: str, padding_last: bool = False
) -> tuple[Tensor, Tensor]:
    """Permutation of each row: real items by descending score, ties as ``ties`` says, padding last; and the scores in
    that order (the last sort's values: scores that order and tie as the caller's, padding at the lowest score).

    Without padding, ``"average"`` needs one sort of any stability (tie groups are averaged whole) and
    ``"first"`` one stable sort. Otherwise two stable sorts: first by the tie-break key (descending), then
    by score (descending); a stable sort keeps the first sort's order among equal scores. When each row's
    padding already follows its real items (``padding_last``), one stable sort keeps it there.
    """
    scores = preds.float() if preds.dtype in (torch.float16, torch.bfloat16) else preds
    if mask is None and ties in ("average", "first"):
        ordered, order = torch.sort(scores, dim=1, descending=True, stable=ties == "first")
        return order, ordered
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    # the lowest score there is; real items of equal score stay first through the key sort below
    lowest = -float("inf") if scores.is_floating_point() else torch.iinfo(scores.dtype).min
    scores = torch.where(mask, scores, lowest)
    if padding_last and ties in ("average", "first"):
        ordered, order = torch.sort(scores, dim=1, descending=True, stable=True)
        return order, ordered
    if ties == "first" or ties == "average":
        # padding last among equal (lowest) scores; input order kept otherwise
        key = mask.to(torch.int8)
    else:
        sign = 1 if ties == "optimistic" else -1
        target = target.to(working_dtype(preds))  # labels of large batches may come in the caller's dtype
        key = torch.where(mask, sign * target, torch.finfo(target.dtype).min)
    order = torch.sort(key, dim=1, descending=True, stable=True).indices
    ordered, by_score = torch.sort(scores.gather(1, order), dim=1, descending=True, stable=True)
    return order.gather(1, by_score), ordered
