"""Per-query AUROC (the Mann-Whitney form, exact under ties) and GAUC, its weighted mean over queries.

A query's AUROC is the probability that a random relevant item scores above a random non-relevant one, ties
counting one half: ``sum over relevant i of (#non-relevant below s_i + #equal / 2) / (P N)``. Each query's
non-relevant scores are sorted once and every item's counts found with two ``searchsorted``: ``O(Q N log N)``
time, ``O(Q N)`` memory, no host read, no loop over queries. This equals the trapezoidal area under the ROC
curve with tie groups as single steps (scikit-learn's ``roc_auc_score``, torchmetrics' ``binary_auroc``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._inputs import format_inputs
from torchrank.functional._pipeline import check_options, finalize


def auroc(
    preds: Tensor,
    target: Tensor,
    *,
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

    Example:
        >>> import torch
        >>> from torchrank.functional import auroc
        >>> auroc(torch.tensor([[0.9, 0.5, 0.5, 0.1]]), torch.tensor([[1, 1, 0, 0]]))  # (2 + 1.5) / 4
        tensor(0.8750)
    """
    check_options("average", empty_target_action, reduction, relevance_threshold)
    inputs = format_inputs(preds, target, indexes=indexes, mask=mask, validate_args=validate_args)
    values, relevant, other = per_query_auroc(inputs.preds, inputs.target >= relevance_threshold, inputs.mask)
    undefined = (relevant == 0) | (other == 0)
    return finalize(values.unsqueeze(1), undefined, inputs, empty_target_action, reduction, False)


def per_query_auroc(preds: Tensor, relevant: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(AUROC [Q], relevant items [Q], non-relevant items [Q])`` of dense rows; 0 where undefined."""
    relevant = relevant & mask
    negative = mask & ~relevant
    scores = preds.contiguous()
    # non-relevant scores ascending, the other positions +inf after them: counts past n_neg are clamped away
    below = torch.where(negative, scores, torch.inf).sort(1).values
    n_neg = negative.sum(1, keepdim=True)
    less = torch.searchsorted(below, scores).minimum(n_neg)
    not_above = torch.searchsorted(below, scores, right=True).minimum(n_neg)
    wins = torch.where(relevant, (less + not_above).to(scores.dtype) / 2, 0).sum(1)
    n_rel = relevant.sum(1)
    pairs = (n_rel * n_neg.squeeze(1)).clamp(min=1).to(scores.dtype)
    return wins / pairs, n_rel, n_neg.squeeze(1)


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
    inputs = format_inputs(preds, target, indexes=indexes, mask=mask, validate_args=validate_args)
    values, relevant, other = per_query_auroc(inputs.preds, inputs.target >= relevance_threshold, inputs.mask)
    if weights is None:
        weights = inputs.mask.sum(1).to(values.dtype)
    elif not isinstance(weights, Tensor) or weights.reshape(-1).shape != values.shape:
        raise ValueError(f"Argument `weights` must hold one weight per query ({values.shape[0]}), got "
                         f"{tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__}.")
    weights = torch.where((relevant > 0) & (other > 0), weights.reshape(-1).to(values.dtype), 0)
    return (weights * values).sum() / weights.sum()  # NaN when no query has both kinds of item
