"""Pairwise losses: the LambdaLoss family (Wang, Li, Golbandi, Bendersky and Najork, CIKM 2018) and
RankNet (Burges et al., ICML 2005).

LambdaLoss sums ``w_ij log2(1 + exp(-sigma (s_i - s_j)))`` over the pairs with ``y_i > y_j``, where i and j
are ranks in the current score order and ``G = gain / IDCG@k``, ``w`` the weights of a metric:

- ``"lambdarank"``: ``|1/D_i - 1/D_j| |G_i - G_j|`` (LambdaRank's delta-NDCG);
- ``"ndcg_loss2"``: ``|1/D_|i-j| - 1/D_(|i-j|+1)| |G_i - G_j|`` (NDCG-Loss2, a bound on NDCG's loss);
- ``"ndcg_loss2pp"``: ``mu * ndcg_loss2 + lambdarank`` (NDCG-Loss2++, the paper's best).

With ``k``, only pairs of ranks both within the top k count and G uses the ideal DCG@k (allRank's
truncation).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torchrank.functional.checks import check_choice
from torchrank.functional.core import ideal_dcg
from torchrank.losses._common import (
    Discount,
    Gain,
    LossModule,
    check_at_least,
    gains,
    loss_function,
    position_weights,
    prepare,
    reduce_loss,
)
from torchrank.losses._pairwise import pairwise_logistic

__all__ = ["LambdaLoss", "RankNetLoss", "lambda_loss", "ranknet"]

WEIGHTINGS = ("ndcg_loss2", "ndcg_loss2pp", "lambdarank")


def _score_order(scores: Tensor, mask: Tensor) -> Tensor:
    """Each list's items by descending score (stable), padding last: the ranks i, j of the weights."""
    key = torch.where(mask, scores, -float("inf")).detach()
    return torch.sort(key, dim=1, descending=True, stable=True).indices


def _pair_weights(
    ranked_gains: Tensor, n: int, weighting: str, mu: float, discount: Discount, log_base: float
) -> Tensor:
    """``|G_i - G_j|`` times the weighting's rank factor ``[B, N, N]`` (ranks i, j in score order)."""
    gain_gap = (ranked_gains.unsqueeze(2) - ranked_gains.unsqueeze(1)).abs_()
    w = position_weights(n + 1, ranked_gains, discount, log_base)  # 1/D(1..n+1)
    rank = torch.arange(n, device=ranked_gains.device)
    factor = None
    if weighting != "lambdarank":
        distance = (rank.unsqueeze(1) - rank.unsqueeze(0)).abs_()
        delta = torch.cat([w.new_zeros(1), (w[:-1] - w[1:]).abs()])  # delta[d] for d = 0 (no pair) .. n
        factor = delta[distance] if weighting == "ndcg_loss2" else mu * delta[distance]
    if weighting != "ndcg_loss2":
        swap = (w[:n].unsqueeze(1) - w[:n].unsqueeze(0)).abs_()
        factor = swap if factor is None else factor + swap
    return gain_gap.mul_(factor)


def _check_mu(mu: float) -> None:
    check_at_least("mu", mu, 0)


def _ordered_pairs(labels: Tensor, mask: Tensor) -> Tensor:
    """``y_i > y_j`` for real items i, j ``[B, N, N]`` bool."""
    real = mask.unsqueeze(2) & mask.unsqueeze(1)
    return (labels.unsqueeze(2) > labels.unsqueeze(1)) & real


@loss_function(weighting=lambda value: check_choice("weighting", value, WEIGHTINGS), mu=_check_mu)
def lambda_loss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor | None = None,
    *,
    weighting: str = "ndcg_loss2pp",
    k: int | None = None,
    sigma: float = 1.0,
    mu: float = 10.0,
    gain: Gain = "exponential",
    discount: Discount = "log",
    log_base: float = 2.0,
    reduction: str = "mean",
    validate_args: bool = False,
) -> Tensor:
    """LambdaLoss (Wang et al., 2018): metric-weighted pairwise logistic loss, summed over each list's pairs.

    ``loss = sum_{y_i > y_j} w_ij log2(1 + exp(-sigma (s_i - s_j)))`` with the weights of ``weighting`` (see
    the module docstring), ranks i, j in score order. A list with no ordered pair (all labels equal, or all
    padded) does not count. allRank's ``lambdaLoss`` sums over the batch: ``reduction="sum"`` here.

    {loss_args}
        weighting: ``"ndcg_loss2pp"`` (NDCG-Loss2++), ``"ndcg_loss2"`` (NDCG-Loss2) or ``"lambdarank"``.
        sigma: Scale of score differences in the logistic.
        mu: Weight of the NDCG-Loss2 term in NDCG-Loss2++.

    Example:
        >>> scores = torch.tensor([[0.5, 0.2, 0.1, 0.01, 0.65, 0.3], [1.0, -0.5, 2.0, 0.3, 0.0, 0.0]])
        >>> labels = torch.tensor([[4, 2, 1, 0, 4, 3], [0, 1, 2, 0, -1, -1]])
        >>> lambda_loss(scores, labels, labels >= 0, weighting="ndcg_loss2", reduction="sum")  # allRank 0.7954
        tensor(0.7954)
    """
    x = prepare(scores, labels, mask, validate_args=validate_args)
    n = x.scores.shape[1]
    order = _score_order(x.scores, x.mask)
    ranked_mask = x.mask.gather(1, order)
    ranked_labels = x.labels.gather(1, order)
    ranked_gains = gains(ranked_labels, ranked_mask, gain)  # divided by 2^top when exponential: G is a ratio
    ideal = ideal_dcg(ranked_gains, position_weights(n, x.scores, discount, log_base), k, ranked_mask)
    normalised = ranked_gains / torch.where(ideal > 0, ideal, 1).unsqueeze(1)
    pairs = _ordered_pairs(ranked_labels, ranked_mask)
    if k is not None and k < n:
        top = torch.arange(n, device=x.scores.device) < k
        pairs &= top.unsqueeze(1) & top.unsqueeze(0)
    weights = _pair_weights(normalised, n, weighting, mu, discount, log_base).mul_(pairs)
    per_list = pairwise_logistic(x.scores.gather(1, order), weights, sigma) / math.log(2)
    return reduce_loss(per_list, pairs.any((1, 2)), reduction)


@loss_function()
def ranknet(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor | None = None,
    *,
    sigma: float = 1.0,
    reduction: str = "mean",
    validate_args: bool = False,
) -> Tensor:
    """RankNet (Burges et al., 2005): mean over each list's pairs ``y_i > y_j`` of ``log(1 + exp(-sigma (s_i - s_j)))``.

    A list with no ordered pair does not count. allRank's ``rankNet`` averages over all pairs of the batch
    at once; here each list is averaged over its own pairs, then over lists (equal for a single list).

    {loss_args}
        sigma: Scale of score differences in the logistic.

    Example:
        >>> ranknet(torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[0, 1, 0]]))
        tensor(0.8133)
    """
    x = prepare(scores, labels, mask, validate_args=validate_args)
    pairs = _ordered_pairs(x.labels, x.mask)
    count = pairs.sum((1, 2))
    weights = pairs.to(x.scores.dtype) / count.clamp_min(1).to(x.scores.dtype).view(-1, 1, 1)
    return reduce_loss(pairwise_logistic(x.scores, weights, sigma), count > 0, reduction)


class LambdaLoss(LossModule):
    """:func:`lambda_loss` as a module: hyperparameters in ``__init__``, ``forward(scores, labels, mask=None)``.

    Example:
        >>> LambdaLoss(weighting="lambdarank")(torch.tensor([[0.0, 1.0]]), torch.tensor([[1, 0]]))
        tensor(0.6993)
    """

    _function = staticmethod(lambda_loss)
    _shown = ("weighting", "k", "sigma", "mu", "reduction")


class RankNetLoss(LossModule):
    """:func:`ranknet` as a module: hyperparameters in ``__init__``, ``forward(scores, labels, mask=None)``.

    Example:
        >>> RankNetLoss()(torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[0, 1, 0]]))
        tensor(0.8133)
    """

    _function = staticmethod(ranknet)
    _shown = ("sigma", "reduction")
