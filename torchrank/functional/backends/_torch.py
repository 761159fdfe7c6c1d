"""The torch backend, and the seam every backend implements (:class:`TorchBackend`): stock torch ops on any device,
with no host read. Its sort (:func:`_sorted_ranking`) also ranks, on every backend, rows whose ties need exact order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from torchrank.functional._descending import torch_descending_rows
from torchrank.functional._inputs import (
    RankingInput,
    _false,
    _value_problems,
    ideal_misses_labels,
    report_value_problems,
    working_dtype,
)
from torchrank.functional._ranked import Ranking, _gather_ranking

if TYPE_CHECKING:
    from torchrank.functional._fused_columns import Column


class TorchBackend:
    """What a backend does, as the torch backend does it (docs/architecture.md). A new backend subclasses this one and
    overrides :meth:`order`; the other methods are device-safe defaults (no host read) it may replace."""

    name = "torch"
    # value checks read the values on the host and raise at once (True), or keep their flags on the device (False)
    checks_on_host = False

    def order(self, inputs: RankingInput, ties: str, relevance_threshold: float, depth: int | None) -> Ranking:
        """Each list of ``inputs`` ranked once, ties as ``ties`` says, padding last, to ``depth`` (the deepest position
        a measure reads, None: the whole list). Here whole rows sorted once, ties averaged by closed forms."""
        if in_rank_order(inputs):  # no sort (the device backends never look for ties: `ties` kept for the forms)
            return _gather_ranking(inputs, _width(inputs, depth), ties, relevance_threshold)
        return _sorted_ranking(inputs, ties, relevance_threshold)

    def descending(self, values: Tensor, depth: int | None) -> Tensor:
        """Each row of ``values`` sorted descending, its first ``depth`` (all for None): the ideal ranking's labels."""
        return torch_descending_rows(values, depth)

    def fused(self, preds: Tensor, target: Tensor, columns: Sequence[Column], **options: Any) -> tuple | None:
        """``(values, empty, mixed, problems)`` from a kernel that ranks and measures in one pass (triton's
        ``fused_values``, which takes ``options``); None where it does not take the input: then :meth:`order` ranks."""
        return None

    def may_tie(self, ranking: Ranking) -> bool:
        """Whether ``ranking`` may hold a tie of real items: always, here (finding out would read the host)."""
        return True

    def tie_means(self, ranking: Ranking, values: Tensor) -> Tensor:
        """The mean of ``values`` ``[Q, N]`` over each position's tie group of ``ranking``: one scatter."""
        group_id = ranking._group_ids[1]
        means = torch.zeros_like(values).scatter_reduce_(1, group_id, values, reduce="mean", include_self=False)
        return means.gather(1, group_id)

    def rows_any(self, x: Tensor) -> Tensor:
        """``x.any(1)`` of a bool (or 0/1 byte) ``[Q, N >= 1]``, as the byte maximum."""
        return x.view(torch.uint8).amax(1).bool()

    def real_mask(self, mask: Tensor | None) -> Tensor | None:
        """The caller's ``mask``, or None where it pads nothing and finding out reads no device (kept, here)."""
        return mask

    def check_values(
        self, given: tuple[Tensor, Tensor, Tensor | None], target: Tensor, ideal: Tensor, label_limit: float | None
    ) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """The value checks of the caller's ``(preds, target, ideal_target)`` and of the formatted ``target`` and
        ``ideal`` rows; the scores' and labels' bounds where they read them. Here flags on the device, no bounds."""
        missing = _false(target.device) if ideal is target else ideal_misses_labels(target, ideal)
        report_value_problems(_value_problems(*given, label_limit, missing))
        return None

    def grouped(self, indexes: Tensor) -> bool:
        """Whether flat ``indexes`` are known to be grouped already (ascending): not without a host read, here."""
        return False

    def scatter_rows(self, x: Tensor, mask: Tensor) -> Tensor:
        """A zero tensor shaped as ``mask`` holding the values ``x`` at its True positions, in row-major order."""
        return x.new_zeros(mask.shape).masked_scatter_(mask, x)

    def match_ids(
        self, ranked_ids: Tensor, relevant_ids: Tensor, relevant_labels: Tensor | None, pad_id: int
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """The ranked ids' mask (False at ``pad_id``) and ``(target, ideal)`` of ``ids_to_dense`` where this backend
        matches the ids itself; None: ``ids_to_dense``'s own matching."""
        return ranked_ids != pad_id, None

    def first_occurrence(self, ids: Tensor) -> Tensor | None:
        """``ids.first_occurrence`` before the padding check where this backend finds it; None: its own sort."""
        return None


def in_rank_order(inputs: RankingInput) -> bool:
    """Whether each row of CPU ``inputs`` is in rank order already, with no tie: scores that repeat one strictly
    descending row (a stride-0 broadcast, as ``ids_to_dense``'s list positions; NaN fails), padding after the real
    items. A device tensor is never read (that would synchronise): devices sort."""
    preds = inputs.preds
    if preds.stride(0) != 0 or preds.device.type != "cpu" or inputs.exact_ties:
        return False
    row = preds[0]
    if not bool((row[1:] < row[:-1]).all()):
        return False
    if not inputs.padded or inputs.padding_last:
        return True
    mask = inputs.mask.numpy()  # numpy's passes over bools beat torch's (benchmarks/notes/code_comment_timings.md)
    return not bool(np.less(mask[:, :-1], mask[:, 1:]).any())  # no real item after a padded one


def _width(inputs: RankingInput, depth: int | None) -> int:
    """The positions a ranking of ``inputs`` to ``depth`` holds: the depth, or the whole list."""
    n = inputs.preds.shape[1]
    return n if depth is None or depth >= n else depth


def _sorted_ranking(inputs: RankingInput, ties: str, relevance_threshold: float) -> Ranking:
    """The :class:`Ranking` of whole rows of ``inputs`` by torch's sort: real items by descending score, ties as
    ``ties`` says, padding last: one sort where neither the tie order nor the padding needs a key, else two stable."""
    preds, mask = inputs.preds, inputs.mask
    scores = preds.float() if preds.dtype in (torch.float16, torch.bfloat16) else preds
    if inputs.padded:  # padding at the lowest score there is; real items of equal score stay first through the sorts
        lowest = -float("inf") if scores.is_floating_point() else torch.iinfo(scores.dtype).min
        scores = torch.where(mask, scores, lowest)
    if ties in ("average", "first") and (inputs.padding_last or not inputs.padded):
        ordered, order = torch.sort(scores, dim=1, descending=True, stable=ties == "first" or inputs.padded)
        return _gather_ranking(inputs, order, ties, relevance_threshold, ordered)
    if ties in ("average", "first"):  # padding last among equal (lowest) scores; input order kept otherwise
        key = mask.to(torch.int8)
    else:
        target = inputs.target.to(working_dtype(preds))  # labels of large batches may come in the caller's dtype
        key = torch.where(mask, (1 if ties == "optimistic" else -1) * target, torch.finfo(target.dtype).min)
    order = torch.sort(key, dim=1, descending=True, stable=True).indices
    ordered, by_score = torch.sort(scores.gather(1, order), dim=1, descending=True, stable=True)
    return _gather_ranking(inputs, order.gather(1, by_score), ties, relevance_threshold, ordered)
