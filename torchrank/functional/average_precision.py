"""Average precision (AP, MAP) and average recall (MAR).

Both sum ``rel_i * c_i`` over the relevant ranks i, where ``c_i`` counts the relevant items in the top i;
:attr:`Ranking.relevant_times_count` holds its exact expectation under random order of ties.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from torchrank.functional._pipeline import no_relevant_item, run_measure, with_common_args
from torchrank.functional._ranking import Ranking, cutoff_index, sum_to_cutoffs


def _average_precision(r: Ranking, ks: Sequence[int | None]) -> tuple[Tensor, Tensor]:
    index, _ = cutoff_index(r, ks)
    precision_sum = sum_to_cutoffs(r.relevant_times_count * r.reciprocal_positions, index, ks)
    return precision_sum / r.num_relevant.clamp_min(1).unsqueeze(1), no_relevant_item(r)


def _average_recall(r: Ranking, ks: Sequence[int | None]) -> tuple[Tensor, Tensor]:
    index, _ = cutoff_index(r, ks)
    num_relevant = r.num_relevant.clamp_min(1).unsqueeze(1)
    recall_sum = sum_to_cutoffs(r.relevant_times_count, index, ks) / num_relevant
    return recall_sum / num_relevant, no_relevant_item(r)


@with_common_args
def average_precision(
    preds: Tensor,
    target: Tensor,
    *,
    k: int | Sequence[int] | None = None,
    indexes: Tensor | None = None,
    mask: Tensor | None = None,
    ideal_target: Tensor | None = None,
    ties: str = "average",
    empty_target_action: str = "neg",
    reduction: str = "mean",
    relevance_threshold: float = 1,
    validate_args: bool = True,
) -> Tensor:
    """Average precision at k: the sum of P@i over the relevant ranks i <= k, divided by R.

    R counts all relevant items of the query, as trec_eval's ``map_cut`` and ranx do; torchmetrics'
    ``retrieval_average_precision(top_k=k)`` divides by the relevant items found in the top k instead.
    The mean over queries is MAP.

    {common_args}

    Example:
        >>> import torch
        >>> ranks = torch.tensor([1, 2, 4, 5, 7, 9])  # relevant ranks, 6 relevant of 10
        >>> target = torch.zeros(10).index_fill(0, ranks - 1, 1)
        >>> preds = torch.arange(10, 0, -1.0)
        >>> average_precision(preds, target)
        tensor(0.8218)
    """
    return run_measure(
        _average_precision, preds, target, k=k, indexes=indexes, mask=mask, ideal_target=ideal_target,
        ties=ties, empty_target_action=empty_target_action, reduction=reduction,
        relevance_threshold=relevance_threshold, validate_args=validate_args,
    )


@with_common_args
def average_recall(
    preds: Tensor,
    target: Tensor,
    *,
    k: int | Sequence[int] | None = None,
    indexes: Tensor | None = None,
    mask: Tensor | None = None,
    ideal_target: Tensor | None = None,
    ties: str = "average",
    empty_target_action: str = "neg",
    reduction: str = "mean",
    relevance_threshold: float = 1,
    validate_args: bool = True,
) -> Tensor:
    """Average recall at k: the mean of R@i over the relevant ranks i <= k, over all R relevant items.

    The counterpart of AP with recall in place of precision; relevant items not ranked in the top k add
    0, as in AP. Its mean over queries is MAR.

    {common_args}

    Example:
        >>> import torch
        >>> # relevant at ranks 1 and 3 of 2 relevant: (R@1 + R@3) / 2 = (1/2 + 2/2) / 2
        >>> average_recall(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1]))
        tensor(0.7500)
    """
    return run_measure(
        _average_recall, preds, target, k=k, indexes=indexes, mask=mask, ideal_target=ideal_target,
        ties=ties, empty_target_action=empty_target_action, reduction=reduction,
        relevance_threshold=relevance_threshold, validate_args=validate_args,
    )
