"""Where relevant items sit: reciprocal rank, hit rate and FRP (from :attr:`Ranking.first_relevant_probability`,
exact under ties) and mean rank (linear in per-position relevance). Definitions: docs/measures.md."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._fused_columns import FRP, MEAN_RANK, RR, SUCCESS
from torchrank.functional._measure import measure
from torchrank.functional._options import RankingOptions, Unpack, with_common_args
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index


def _found_within(r: Ranking, ks: Ks) -> tuple[Tensor, Tensor, Tensor]:
    """Without tie averaging (one argmax, no distribution): whether the first relevant item is within each cut-off,
    its position ``[Q, 1]`` (inf if none) and the effective cut-offs ``[Q, K]``."""
    _, k_eff = cutoff_index(r, ks)
    position = r.first_relevant_position.unsqueeze(1)
    return position <= k_eff, position, k_eff


@measure(fused=RR)
def _reciprocal_rank(r: Ranking, ks: Ks) -> Values:
    if not r.averages_ties:
        found, position, _ = _found_within(r, ks)
        return torch.where(found, position.reciprocal(), 0), r.no_relevant
    index, _ = cutoff_index(r, ks)
    reciprocal_sum = torch.cumsum(r.first_relevant_probability * r.reciprocal_positions, 1)
    return at_cutoffs(reciprocal_sum, index), r.no_relevant


@measure(fused=SUCCESS)
def _hit_rate(r: Ranking, ks: Ks) -> Values:
    if not r.averages_ties:
        return _found_within(r, ks)[0].to(r.dtype), r.no_relevant
    index, _ = cutoff_index(r, ks)
    return at_cutoffs(torch.cumsum(r.first_relevant_probability, 1), index), r.no_relevant


@measure(fused=FRP)
def _first_relevant_position(r: Ranking, ks: Ks) -> Values:
    if not r.averages_ties:
        found, position, k_eff = _found_within(r, ks)
        return torch.where(found, position, k_eff + 1), r.no_relevant
    index, k_eff = cutoff_index(r, ks)
    found = at_cutoffs(torch.cumsum(r.first_relevant_probability, 1), index)
    position_sum = at_cutoffs(torch.cumsum(r.first_relevant_probability * r.positions, 1), index)
    return position_sum + (k_eff + 1) * (1 - found), r.no_relevant


@measure(fused=MEAN_RANK)
def _mean_rank(r: Ranking, ks: Ks) -> Values:
    index, k_eff = cutoff_index(r, ks)
    position_sum = at_cutoffs(torch.cumsum(r.expected_relevant * r.positions, 1), index)
    num_relevant = r.num_relevant.unsqueeze(1)
    missed = num_relevant - at_cutoffs(r.hits, index)
    return (position_sum + (k_eff + 1) * missed) / num_relevant.clamp_min(1), r.no_relevant


@with_common_args
def reciprocal_rank(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """Reciprocal rank at k: 1 / rank of the first relevant item, 0 if none is in the top k. Mean: MRR.

    {common_args}

    Example:
        >>> import torch
        >>> reciprocal_rank(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 0, 1]))
        tensor(0.3333)
    """
    return run_measure(_reciprocal_rank, preds, target, **options)


@with_common_args
def hit_rate(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """Hit rate at k: 1 if a relevant item is in the top k, else 0 (trec_eval ``success_k``); a probability under
    ``ties="average"``.

    {common_args}

    Example:
        >>> import torch
        >>> hit_rate(torch.tensor([[0.9, 0.8, 0.7], [0.1, 0.2, 0.3]]), torch.tensor([[0, 0, 1], [0, 0, 1]]), k=1)
        tensor(0.5000)
    """
    return run_measure(_hit_rate, preds, target, **options)


@with_common_args
def first_relevant_position(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """First relevant position at k (FRP@k): the rank of the first relevant item, k+1 if none is in the top k (the
    list length + 1 for ``k=None``). Lower is better: ``empty_target_action="skip"`` leaves queries with no
    relevant item out of the mean (``"neg"`` scores them 0).

    {common_args}

    Example:
        >>> import torch
        >>> first_relevant_position(torch.tensor([[0.9, 0.8, 0.7], [0.3, 0.2, 0.1]]),
        ...                         torch.tensor([[0, 1, 0], [0, 0, 1]]), k=2, reduction="none")
        tensor([2., 3.])
    """
    return run_measure(_first_relevant_position, preds, target, **options)


@with_common_args
def mean_rank(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """Mean rank at k: the mean position of the query's R relevant items, one not in the top k (or not retrieved)
    at k+1 (the list length + 1 for ``k=None``). Lower is better: ``empty_target_action="skip"`` leaves queries with
    no relevant item out of the mean (``"neg"`` scores them 0, the best value).

    {common_args}

    Example:
        >>> import torch
        >>> mean_rank(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 0, 1]))
        tensor(2.5000)
    """
    return run_measure(_mean_rank, preds, target, **options)
