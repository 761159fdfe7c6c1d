"""Per-query AUROC (the Mann-Whitney form, read from the shared ranking's tie groups) and GAUC, its weighted mean
over queries (definitions: docs/recommenders.md)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from torchrank.functional._options import with_keyword_hints
from torchrank.functional._pipeline import prepare, run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, apply_measure


@with_keyword_hints
def auroc(
    preds: Tensor, target: Tensor, *, k: int | Sequence[int] | None = None, max_fpr: float | None = None,
    indexes: Tensor | None = None, mask: Tensor | None = None, empty_target_action: str = "neg",
    relevance_threshold: float = 1, reduction: str = "mean", validate_args: bool = True,
) -> Tensor:
    """AUROC of each query (relevant: ``label >= relevance_threshold``), ties counting one half, then reduced.

    A query without a relevant or without a non-relevant item has no AUROC: ``empty_target_action`` scores it.
    Input as every ranking function's: dense ``[..., N]`` with an optional ``mask``, or flat with ``indexes``.

    Args:
        k: Only each query's top k items by score (None: all; a sequence gives one value per cut-off); tied items
            across the k-th position are kept in input order (torchmetrics: as ``torch.topk`` returns them).
        max_fpr: McClish's standardised partial AUC over false positive rates ``[0, max_fpr]``, ``0 < max_fpr <=
            1`` (tie groups as straight segments; torchmetrics' ``RetrievalAUROC``). None or 1: AUROC.

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
    if max_fpr is not None and (isinstance(max_fpr, bool) or not isinstance(max_fpr, int | float)
                                or not 0 < max_fpr <= 1):
        raise ValueError(f"Argument `max_fpr` must be a number in (0, 1] or None, got {max_fpr!r}.")
    # ranked with ties="first": the top k keep input order across the cut-off; the pairs tied in score count one half
    # whatever the order (the tie groups of the ranking)
    return run_measure(
        _auroc, preds, target, k=k, indexes=indexes, mask=mask, ideal_target=None, ties="first",
        empty_target_action=empty_target_action, reduction=reduction, relevance_threshold=relevance_threshold,
        validate_args=validate_args, max_fpr=None if max_fpr is None or max_fpr == 1 else float(max_fpr))


def _auroc(r: Ranking, ks: Ks, max_fpr: float | None) -> Values:
    """(Partial) AUROC of each query's top k ``[Q, K]``, and where it is undefined (one kind of item only)."""
    # counts in the working dtype (float32 for float16 scores: a pair count past 65,504 is inf there); tie groups
    # from the scores as ranked, in their own dtype (integers past 2^24 do not round into ties)
    _, start, _ = r.tie_groups
    columns, undefined = [], []
    for k in ks:
        kept = r.valid if k is None else r.valid & (r.positions <= k)
        relevant = r.relevant * kept
        negative = kept.to(r.dtype) - relevant
        n_rel, n_neg = relevant.sum(1), negative.sum(1)
        if max_fpr is None:  # a relevant item beats the non-relevant items below its tie group, half of those in it
            above = (torch.cumsum(negative, 1) - negative).gather(1, start)
            wins = (relevant * (n_neg.unsqueeze(1) - above - r.group_sum(negative) / 2)).sum(1)
            columns.append(wins / (n_rel * n_neg).clamp(min=1))
        else:
            columns.append(_standardised_partial_auroc(r, kept, relevant, negative, max_fpr))
        undefined.append((n_rel == 0) | (n_neg == 0))
    return torch.stack(columns, 1), torch.stack(undefined, 1)


def _standardised_partial_auroc(r: Ranking, kept: Tensor, relevant: Tensor, negative: Tensor, max_fpr: float) -> Tensor:
    """McClish's standardised area ``(1 + (A - max_fpr^2 / 2) / (max_fpr - max_fpr^2 / 2)) / 2`` under each row's ROC
    curve up to ``max_fpr`` ``[Q]``: each tie group a straight segment, clipped at ``max_fpr``, summed as trapezoids."""
    group_id, start, _ = r.tie_groups
    tps, fps = torch.cumsum(relevant, 1), torch.cumsum(negative, 1)
    n_pos, n_neg = tps[:, -1:].clamp_min(1), fps[:, -1:].clamp_min(1)
    same_as_next = (group_id[:, 1:] == group_id[:, :-1]) & kept[:, 1:]
    last = kept & ~torch.nn.functional.pad(same_as_next, (0, 1), value=False)  # the last kept item of its group
    before = (start - 1).clamp_min(0)
    x0 = torch.where(start > 0, fps.gather(1, before), 0) / n_neg
    y0 = torch.where(start > 0, tps.gather(1, before), 0) / n_pos
    x1, y1 = fps / n_neg, tps / n_pos
    width = (x1.clamp_max(max_fpr) - x0).clamp_min(0)
    y_end = y0 + (y1 - y0) * width / (x1 - x0).clamp_min(torch.finfo(r.dtype).tiny)
    area = torch.where(last & (width > 0), width * (y0 + y_end) / 2, 0).sum(1)
    min_area = 0.5 * max_fpr**2
    return 0.5 * (1 + (area - min_area) / (max_fpr - min_area))


@with_keyword_hints
def gauc(
    preds: Tensor, target: Tensor, *, indexes: Tensor | None = None, mask: Tensor | None = None,
    weights: Tensor | None = None, relevance_threshold: float = 1, validate_args: bool = True,
) -> Tensor:
    """Group AUC: ``sum_q w_q AUROC_q / sum_q w_q`` over the queries with both relevant and non-relevant items
    (Zhu et al., KDD 2017). Input: dense ``[..., N]`` with an optional ``mask``, or flat with ``indexes``.

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
    inputs, ranking = prepare(
        preds, target, indexes=indexes, mask=mask, ideal_target=None, judged=None, ties="first", reduction="mean",
        empty_target_action="neg", relevance_threshold=relevance_threshold, validate_args=validate_args)
    values, undefined = (x[:, 0] for x in apply_measure(_auroc, ranking, [None], max_fpr=None))
    if weights is None:
        weights = inputs.mask.sum(1).to(values.dtype)
    elif not isinstance(weights, Tensor) or weights.reshape(-1).shape != values.shape:
        raise ValueError(f"Argument `weights` must hold one weight per query ({values.shape[0]}), got "
                         f"{tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__}.")
    weights = torch.where(undefined, 0, weights.reshape(-1).to(values.dtype))
    return (weights * values).sum() / weights.sum()  # NaN when no query has both kinds of item
