"""Kendall's tau between the predicted order and the label order of each list, by counting pairs (definition, and
how it differs from scipy's tau-b on tied scores: docs/measures.md)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._inputs import RankingInput, working_dtype
from torchrank.functional._options import EmptyTargetAction, Reduction, Ties, with_common_args
from torchrank.functional._pipeline import check_options, finalize, format_on_backend
from torchrank.functional._ranked import row_blocks

_PAIR_BUDGET = 1 << 24  # pair comparisons per chunk of queries: bounds memory at O(Q N) + O(budget)


def _pair_counts(preds: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """Per query ``[Q, 6]``: pairs, label-tied pairs, S = concordant - discordant, discordant, and
    score-tied pairs not tied in label split as [order by input agrees with label, disagrees]."""
    upper = torch.triu(torch.ones(preds.shape[1], preds.shape[1], dtype=torch.bool, device=preds.device), 1)
    pair = mask.unsqueeze(2) & mask.unsqueeze(1) & upper
    score_sign = torch.sign(preds.unsqueeze(2) - preds.unsqueeze(1))
    label_sign = torch.sign(target.unsqueeze(2) - target.unsqueeze(1))
    agree = (score_sign * label_sign).to(target.dtype)
    score_tied = pair & (score_sign == 0) & (label_sign != 0)
    counts = [
        pair.sum((1, 2)),
        (pair & (label_sign == 0)).sum((1, 2)),
        torch.where(pair, agree, 0).sum((1, 2)),
        (pair & (agree < 0)).sum((1, 2)),
        (score_tied & (label_sign > 0)).sum((1, 2)),  # earlier input item has the higher label
        (score_tied & (label_sign < 0)).sum((1, 2)),
    ]
    return torch.stack([c.to(target.dtype) for c in counts], 1)


def _kendall(inputs: RankingInput, ties: str, distance: bool) -> tuple[Tensor, Tensor]:
    q, n = inputs.preds.shape
    work = working_dtype(inputs.preds)
    preds = inputs.preds.to(work)
    blocks = row_blocks(q, n * n, _PAIR_BUDGET)  # chunks of queries bound memory; each one batched op
    counts = torch.cat([_pair_counts(preds[rows], inputs.target[rows].to(work), inputs.mask[rows]) for rows in blocks])
    pairs, label_tied, s_sum, discordant, tied_up, tied_down = counts.unbind(1)
    ordered = pairs - label_tied
    tied = tied_up + tied_down
    if distance:
        wrong = {"average": discordant + tied / 2, "optimistic": discordant, "pessimistic": discordant + tied,
                 "first": discordant + tied_down}
        return (wrong[ties] / ordered.clamp_min(1)).unsqueeze(1), ordered == 0
    numerator = {"average": s_sum, "optimistic": s_sum + tied, "pessimistic": s_sum - tied,
                 "first": s_sum + tied_up - tied_down}
    return (numerator[ties] / torch.sqrt(pairs * ordered).clamp_min(1)).unsqueeze(1), ordered == 0


@with_common_args
def kendall_tau(
    preds: Tensor, target: Tensor, *, distance: bool = False, indexes: Tensor | None = None, mask: Tensor | None = None,
    ties: Ties = "average", empty_target_action: EmptyTargetAction = "neg", reduction: Reduction = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Kendall's tau between the predicted ranking and the labels, or the normalised tau distance, of whole lists
    (no ``k``). A list whose labels give no ordered pair gets ``empty_target_action``'s value.

    {common_args}
        distance: Return the fraction of label-ordered pairs ranked wrongly instead of the correlation.

    Example:
        >>> import torch
        >>> kendall_tau(torch.tensor([0.9, 0.5, 0.1]), torch.tensor([2, 1, 0]))
        tensor(1.)
        >>> kendall_tau(torch.tensor([0.9, 0.5, 0.1]), torch.tensor([0, 1, 2]), distance=True)
        tensor(1.)
    """
    check_options(ties, empty_target_action, reduction, relevance_threshold=1)
    inputs = format_on_backend(preds, target, indexes=indexes, mask=mask, validate_args=validate_args)
    values, no_order = _kendall(inputs, ties, distance)
    return finalize(values, no_order, inputs, empty_target_action, reduction, k_is_sequence=False)
