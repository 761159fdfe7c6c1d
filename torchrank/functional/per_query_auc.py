"""Per-query AUROC (the Mann-Whitney form, exact under ties) and GAUC, its weighted mean over queries.

A query's AUROC is the probability that a random relevant item scores above a random non-relevant one, ties
counting one half: ``sum over relevant i of (#non-relevant below s_i + #equal / 2) / (P N)``. Each query's
non-relevant scores are sorted once and every item's counts found with two ``searchsorted``: ``O(Q N log N)``
time, ``O(Q N)`` memory, no host read, no loop over queries. This equals the trapezoidal area under the ROC
curve with tie groups as single steps (scikit-learn's ``roc_auc_score``, torchmetrics' ``binary_auroc``).

Two options give torchmetrics' ``RetrievalAUROC`` (:mod:`torchrank.compat`): ``k``, the AUROC of each query's top k
items only, and ``max_fpr``, the standardised partial AUC over false positive rates ``[0, max_fpr]`` (McClish's
correction, as scikit-learn and torchmetrics compute it).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from torchrank.functional._inputs import normalize_k, working_dtype
from torchrank.functional._keywords import with_keyword_hints
from torchrank.functional._pipeline import check_options, finalize, format_on_backend


@with_keyword_hints
def auroc(
    preds: Tensor,
    target: Tensor,
    *,
    k: int | Sequence[int] | None = None,
    max_fpr: float | None = None,
    indexes: Tensor | None = None,
    mask: Tensor | None = None,
    empty_target_action: str = "neg",
    relevance_threshold: float = 1,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """AUROC of each query (relevant: ``label >= relevance_threshold``), exact under ties, then reduced.

    A query without a relevant or without a non-relevant item has no AUROC: ``empty_target_action`` scores it
    (``"neg"``: 0, ``"pos"``: 1, ``"skip"``: NaN, left out of the mean, ``"error"``). Input as every ranking
    function takes it: dense ``[..., N]`` with an optional ``mask``, or flat with ``indexes``.

    Args:
        k: Only each query's top k items by score (None: all; a sequence of ints gives one value per cut-off in a
            last dimension); where tied items span the k-th position, those first in input order are kept
            (torchmetrics keeps whichever ``torch.topk`` returns). Undefined (see above) when the top k lack either
            kind of item.
        max_fpr: Standardised partial AUC over false positive rates in ``[0, max_fpr]``, ``0 < max_fpr <= 1``: the
            area under the ROC curve (tie groups as straight segments) up to ``max_fpr``, interpolated there, mapped
            by McClish's correction ``(1 + (A - max_fpr^2 / 2) / (max_fpr - max_fpr^2 / 2)) / 2``. None or 1: AUROC.

    Example:
        >>> import torch
        >>> from torchrank.functional import auroc
        >>> auroc(torch.tensor([[0.9, 0.5, 0.5, 0.1]]), torch.tensor([[1, 1, 0, 0]]))  # (2 + 1.5) / 4
        tensor(0.8750)
        >>> auroc(torch.tensor([[0.9, 0.5, 0.5, 0.1]]), torch.tensor([[1, 1, 0, 0]]), k=3)  # (1 + 0.5) / 2
        tensor(0.7500)
        >>> auroc(torch.tensor([[0.9, 0.8, 0.4, 0.3]]), torch.tensor([[1, 0, 1, 0]]), max_fpr=0.5)
        tensor(0.6667)
    """
    check_options("average", empty_target_action, reduction, relevance_threshold)
    ks, k_is_sequence = normalize_k(k)
    if max_fpr is not None and (isinstance(max_fpr, bool) or not isinstance(max_fpr, int | float)
                                or not 0 < max_fpr <= 1):
        raise ValueError(f"Argument `max_fpr` must be a number in (0, 1] or None, got {max_fpr!r}.")
    inputs = format_on_backend(preds, target, indexes=indexes, mask=mask, validate_args=validate_args)
    relevant = inputs.target >= relevance_threshold
    columns, undefined = [], []
    for cutoff in ks:
        kept = inputs.mask if cutoff is None else inputs.mask & _top_k(inputs.preds, inputs.mask, cutoff)
        values, relevant_count, other = per_query_auroc(inputs.preds, relevant, kept)
        if max_fpr is not None and max_fpr < 1:
            values = _standardised_partial_auroc(inputs.preds, relevant & kept, kept, float(max_fpr))
        columns.append(values)
        undefined.append((relevant_count == 0) | (other == 0))
    return finalize(torch.stack(columns, 1), torch.stack(undefined, 1), inputs, empty_target_action, reduction,
                    k_is_sequence)


def per_query_auroc(preds: Tensor, relevant: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(AUROC [Q], relevant items [Q], non-relevant items [Q])`` of dense rows, in the working dtype (float32, or
    float64 for float64 scores); 0 where undefined."""
    relevant = relevant & mask
    negative = mask & ~relevant
    scores = preds.contiguous()
    # non-relevant scores ascending in the scores' own dtype (exact: no integer score rounds into a tie), the other
    # positions after them at the dtype's top; a real score may equal that top, but the counts are clamped to n_neg
    top = torch.inf if scores.is_floating_point() else torch.iinfo(scores.dtype).max
    below = torch.where(negative, scores, top).sort(1).values
    n_neg = negative.sum(1, keepdim=True)
    less = torch.searchsorted(below, scores).minimum(n_neg)
    not_above = torch.searchsorted(below, scores, right=True).minimum(n_neg)
    # counts in the working dtype: a pair count past 65,504 is inf in float16
    work = working_dtype(scores)
    wins = torch.where(relevant, (less + not_above).to(work) / 2, 0).sum(1)
    n_rel = relevant.sum(1)
    pairs = (n_rel * n_neg.squeeze(1)).clamp(min=1).to(work)
    return wins / pairs, n_rel, n_neg.squeeze(1)


def _descending_order(preds: Tensor, mask: Tensor) -> Tensor:
    """Each row's real items by descending score (ties in input order), its padding after them ``[..., N]``."""
    order = torch.sort(preds, dim=-1, descending=True, stable=True).indices
    real_first = torch.sort(mask.gather(-1, order).to(torch.int8), dim=-1, descending=True, stable=True).indices
    return order.gather(-1, real_first)


def _top_k(preds: Tensor, mask: Tensor, k: int) -> Tensor:
    """Whether each item is among its row's top ``k`` real items (ties at the cut-off in input order) ``[Q, N]``."""
    order = _descending_order(preds, mask)
    positions = torch.arange(order.shape[1], device=order.device).expand_as(order)
    ranks = torch.empty_like(order).scatter_(1, order, positions)
    return ranks < k


def _standardised_partial_auroc(preds: Tensor, relevant: Tensor, mask: Tensor, max_fpr: float) -> Tensor:
    """McClish's standardised area under each row's ROC curve up to ``max_fpr`` ``[Q]`` (0 where undefined).

    In descending score order, each tie group ends a straight segment of the curve from (false, true positives)
    before the group to those after it; the segments are clipped at ``max_fpr`` and summed as trapezoids.
    """
    order = _descending_order(preds, mask)
    scores, real = preds.gather(1, order), mask.gather(1, order)
    dtype = working_dtype(scores)  # the counts as in per_query_auroc: float16 holds no count past 2,048 exactly
    positive = relevant.gather(1, order).to(dtype)
    negative = (real & ~relevant.gather(1, order)).to(dtype)
    tps, fps = torch.cumsum(positive, 1), torch.cumsum(negative, 1)
    n_pos, n_neg = tps[:, -1:].clamp_min(1), fps[:, -1:].clamp_min(1)
    same = (scores[:, 1:] == scores[:, :-1]) & real[:, 1:]  # a real item in the group of the one above
    last = real & ~torch.nn.functional.pad(same, (0, 1), value=False)  # the last item of its group
    first = torch.nn.functional.pad(~same, (1, 0), value=True)
    positions = torch.arange(order.shape[1], device=order.device)
    start = torch.cummax(torch.where(first, positions, 0), 1).values
    before = (start - 1).clamp_min(0)
    x0 = torch.where(start > 0, fps.gather(1, before), 0) / n_neg
    y0 = torch.where(start > 0, tps.gather(1, before), 0) / n_pos
    x1, y1 = fps / n_neg, tps / n_pos
    end = x1.clamp_max(max_fpr)
    width = (end - x0).clamp_min(0)
    y_end = y0 + (y1 - y0) * width / (x1 - x0).clamp_min(torch.finfo(dtype).tiny)
    area = torch.where(last & (width > 0), width * (y0 + y_end) / 2, 0).sum(1)
    min_area = 0.5 * max_fpr**2
    return 0.5 * (1 + (area - min_area) / (max_fpr - min_area))


@with_keyword_hints
def gauc(
    preds: Tensor,
    target: Tensor,
    *,
    indexes: Tensor | None = None,
    mask: Tensor | None = None,
    weights: Tensor | None = None,
    relevance_threshold: float = 1,
    validate_args: bool = True,
) -> Tensor:
    """Group AUC: ``sum_q w_q AUROC_q / sum_q w_q`` over the queries that have both relevant and non-relevant
    items (the others are left out, as in Zhu et al., KDD 2017, and Zhou et al.'s DIN, KDD 2018).

    Input as every ranking function takes it: dense rows ``[..., N]`` with an optional ``mask``, or flat items
    with ``indexes`` (each distinct index a query).

    Args:
        weights: ``[Q]`` per-query weights (e.g. clicks): one per row, or with ``indexes`` one per distinct index
            in ascending order (the order of ``auroc(..., reduction="none")``); None: the query's number of
            items (impressions).

    Example:
        >>> import torch
        >>> from torchrank.functional import gauc
        >>> preds = torch.tensor([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.0, 0.0]])
        >>> target = torch.tensor([[1, 0, 0, 0], [1, 0, 0, 0]])
        >>> gauc(preds, target, mask=torch.tensor([[True] * 4, [True, True, False, False]]))  # (4 * 1 + 2 * 0) / 6
        tensor(0.6667)
        >>> gauc(torch.tensor([0.2, 0.9, 0.1, 0.8]), torch.tensor([1, 1, 0, 0]), indexes=torch.tensor([5, 3, 3, 5]))
        tensor(0.5000)
    """
    check_options("average", "neg", "mean", relevance_threshold)
    inputs = format_on_backend(preds, target, indexes=indexes, mask=mask, validate_args=validate_args)
    values, relevant, other = per_query_auroc(inputs.preds, inputs.target >= relevance_threshold, inputs.mask)
    if weights is None:
        weights = inputs.mask.sum(1).to(values.dtype)
    elif not isinstance(weights, Tensor) or weights.reshape(-1).shape != values.shape:
        raise ValueError(f"Argument `weights` must hold one weight per query ({values.shape[0]}), got "
                         f"{tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__}.")
    weights = torch.where((relevant > 0) & (other > 0), weights.reshape(-1).to(values.dtype), 0)
    return (weights * values).sum() / weights.sum()  # NaN when no query has both kinds of item
