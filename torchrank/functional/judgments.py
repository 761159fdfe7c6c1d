"""Measures for incomplete judgments (TREC DL, BEIR): the judged share of the top k, inferred AP, recall capped at
k, and :func:`judged_only_mask` (trec_eval ``-J``). Definitions: docs/measures.md."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._options import (
    Cutoffs,
    MeasureOptions,
    RankingOptions,
    Reduction,
    Ties,
    Unpack,
    with_common_args,
)
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index
from torchrank.functional.trec_extra import _judged, _none, _refuse_tie_average, _relative_precision

__all__ = ["inferred_average_precision", "judged_fraction", "judged_only_mask", "recall_cap"]

# trec_eval's INFAP_EPSILON: keeps the judged precision above a relevant item defined when nothing above is judged
INFAP_EPSILON = 0.00001


def judged_only_mask(mask: Tensor | None, judged: Tensor | None, judged_only: bool) -> Tensor | None:
    """The ``mask`` that keeps only judged items when ``judged_only`` (trec_eval ``-J``), else ``mask``: unjudged
    items become padding, so the judged items below them move up. Without ``judged`` nothing is dropped.

    Example:
        >>> import torch
        >>> judged_only_mask(torch.tensor([True, True, False]), torch.tensor([True, False, True]), True)
        tensor([ True, False, False])
    """
    if not isinstance(judged_only, bool):
        raise TypeError(f"Argument `judged_only` must be a bool, got {judged_only!r}.")
    if not judged_only or judged is None:
        return mask
    if not isinstance(judged, Tensor) or judged.dtype != torch.bool:
        raise TypeError("Argument `judged` must be a bool tensor when `judged_only=True`.")
    return judged if mask is None else mask & judged


def _judged_fraction(r: Ranking, ks: Ks) -> Values:
    # linear in the per-position judged flags: the tie groups' means give its exact expectation
    judged = torch.cumsum(r.expected(_judged(r).to(r.dtype)), 1)
    index, k_eff = cutoff_index(r, ks)
    shown = torch.minimum(k_eff, r.num_valid.unsqueeze(1))
    return at_cutoffs(judged, index) / shown.clamp_min(1), _none(r)  # defined without relevant items


def _pooled_above(r: Ranking, pooled_unjudged: Tensor) -> Tensor:
    """Pooled but unjudged items ranked above each position ``[Q, N]``, from ``pooled_unjudged`` in descending score
    order (:func:`pooled_in_score_order`), which the ranking permutes only within tie groups (keeping their order for
    ``"first"``): ``"optimistic"`` puts none of a group above, ``"pessimistic"`` all."""
    if pooled_unjudged.shape[0] != r.num_queries or pooled_unjudged.shape[1] < r.list_size:
        raise ValueError(f"Argument `pooled_unjudged` must be [queries, items] like the ranking ({r.num_queries}, "
                         f">= {r.list_size}), got {tuple(pooled_unjudged.shape)}.")
    pooled = (pooled_unjudged[:, : r.list_size] & r.valid).to(r.dtype)
    before = torch.cumsum(pooled, 1) - pooled
    if r.ties == "first":
        return before
    above_group = before.gather(1, r.tie_groups[1])
    return above_group if r.ties == "optimistic" else above_group + r.group_sum(pooled)  # pessimistic: the whole group


def _inferred_ap(r: Ranking, ks: Ks, pooled_unjudged: Tensor | None = None) -> Values:
    _refuse_tie_average(r, "infAP")
    # trec_eval's m_infAP.c (inferred_average_precision's docstring writes it out)
    rel, judged = r.relevant * r.valid, _judged(r).to(r.dtype)
    rel_above, judged_above = torch.cumsum(rel, 1) - rel, torch.cumsum(judged, 1) - judged
    pooled = judged_above if pooled_unjudged is None else judged_above + _pooled_above(r, pooled_unjudged)
    precision = (rel_above + INFAP_EPSILON) / (judged_above + 2 * INFAP_EPSILON)  # judged: relevant + non-relevant
    terms = (1 + pooled * precision) / r.positions * rel
    # summed one by one in rank order as trec_eval does (a cumulative sum's end)
    value = torch.cumsum(terms, 1)[:, -1:] / r.num_relevant.clamp_min(1).unsqueeze(1)
    return value.expand(-1, len(ks)), r.no_relevant


@with_common_args
def judged_fraction(
    preds: Tensor, target: Tensor, *, k: Cutoffs = None, indexes: Tensor | None = None, mask: Tensor | None = None,
    judged: Tensor | None = None, ties: Ties = "average", reduction: Reduction = "mean", validate_args: bool = True,
) -> Tensor:
    """Judged@k: the share of the top ``min(k, items retrieved)`` items that have a judgment (ir_measures'
    ``Judged@k``); 0 for an empty list. It reads no label: queries without relevant items count like any other.

    {common_args}
        judged: Bool ``[..., N]``, True for an item with a judgment (default: every real item).

    Example:
        >>> import torch
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
        >>> target = torch.tensor([1, 0, 0, 0])
        >>> judged_fraction(preds, target, k=[2, 10], judged=torch.tensor([True, False, True, False]))
        tensor([0.5000, 0.5000])
    """
    return run_measure(  # it reads no label: no relevance threshold, no empty queries
        _judged_fraction, preds, target, k=k, indexes=indexes, mask=mask, ideal_target=None, judged=judged, ties=ties,
        empty_target_action="neg", reduction=reduction, relevance_threshold=1, validate_args=validate_args)


@with_common_args
def inferred_average_precision(
    preds: Tensor, target: Tensor, *, judged: Tensor | None = None, pooled_unjudged: Tensor | None = None,
    ties: Ties = "first", **options: Unpack[MeasureOptions],
) -> Tensor:
    """Inferred AP (Yilmaz and Aslam, CIKM 2006), as trec_eval's ``infAP``: the relevant item at rank ``i`` adds
    ``(1 + P * (r + eps) / (r + n + 2 eps)) / i``, with ``r`` and ``n`` the relevant and judged non-relevant items
    above it, ``P`` those above in the pool (judged, or pooled but unjudged) and ``eps = 1e-5``; the sum is divided
    by R. With every item judged it is AP. ``ties="average"`` is refused.

    {common_args}
        judged: Bool ``[..., N]``, True for an item with a judgment (default: every real item).
        pooled_unjudged: Bool ``[..., N]``, True for an item in the pool that was not judged (qrels label -1;
            default: none, every unjudged item lies outside the pool). Dense input only.

    Example:
        >>> import torch
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
        >>> target = torch.tensor([1, 0, 1, 0])
        >>> judged = torch.tensor([True, False, True, True])
        >>> inferred_average_precision(preds, target, judged=judged)  # (1 + (1 + 1 * 1) / 3) / 2
        tensor(0.8333)
        >>> inferred_average_precision(preds, target, judged=judged, pooled_unjudged=~judged)
        tensor(1.)
    """
    if pooled_unjudged is not None:
        preds, target, options["mask"], judged, pooled_unjudged = pooled_in_score_order(
            preds, target, options["mask"], judged, pooled_unjudged, options["indexes"])
    params = {"judged": judged, "pooled_unjudged": pooled_unjudged}
    return run_measure(_inferred_ap, preds, target, ties=ties, **options, **params)


def pooled_in_score_order(
    preds: Tensor, target: Tensor, mask: Tensor | None, judged: Tensor | None, pooled_unjudged: object,
    indexes: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None, Tensor]:
    """``pooled_unjudged`` checked, and the dense inputs with columns in descending score order (real items first,
    stable; no value depends on it), the flags as ``[Q, N]`` rows: infAP's kernel reads the flags per column."""
    if indexes is not None:
        raise ValueError("Argument `pooled_unjudged` takes dense input only, not `indexes`.")
    if not isinstance(pooled_unjudged, Tensor) or pooled_unjudged.dtype != torch.bool:
        raise TypeError("Argument `pooled_unjudged` must be a bool tensor of the shape of `preds`.")
    if pooled_unjudged.shape != preds.shape:
        raise ValueError(f"Argument `pooled_unjudged` must have the shape of `preds` {tuple(preds.shape)}, "
                         f"got {tuple(pooled_unjudged.shape)}.")
    # real items first (a stable sort of the mask), then by descending score (stable: ties keep that order)
    order = torch.sort(preds, dim=-1, descending=True, stable=True).indices
    if mask is not None:
        order = order.gather(-1, torch.sort(mask.gather(-1, order).byte(), descending=True, stable=True).indices)

    def take(x: Tensor | None) -> Tensor | None:
        return None if x is None else x.gather(-1, order)

    return (take(preds), take(target), take(mask), take(judged),
            take(pooled_unjudged).reshape(-1, preds.shape[-1]))  # fmt: skip


@with_common_args
def recall_cap(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """Capped recall at k: relevant items in the top k / ``min(k, R)`` (BEIR's ``R_cap@k``, trec_eval's
    ``relative_P``): a perfect ranking brings it to 1 at every cut-off.

    {common_args}

    Example:
        >>> import torch
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
        >>> target = torch.tensor([1, 0, 1, 1, 1])
        >>> recall_cap(preds, target, k=[2, 4])  # 1 / min(2, 4), 3 / min(4, 4)
        tensor([0.5000, 0.7500])
    """
    return run_measure(_relative_precision, preds, target, **options)
