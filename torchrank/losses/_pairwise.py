"""The pairwise logistic kernel of RankNet and the LambdaLoss family.

``sum_{i,j} W_ij softplus(-sigma (s_i - s_j))`` per list, for a weight matrix W that is zero outside the
pairs that count (i ranked above j by the labels). The gradient,
``d/ds_i = -sigma (sum_j W_ij sigmoid(-sigma(s_i - s_j)) - sum_j W_ji sigmoid(-sigma(s_j - s_i)))``, is
computed in the forward pass and only that ``[B, N]`` vector is kept: no ``[B, N, N]`` tensor survives
into the backward (first-order differentiable only).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["pairwise_logistic"]


class _PairwiseLogistic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, weights, sigma):
        margins = (scores.unsqueeze(2) - scores.unsqueeze(1)).mul_(sigma)  # [B, i, j] = sigma (s_i - s_j)
        losses = F.softplus(-margins)
        loss = (losses.mul_(weights)).sum((1, 2))
        lambdas = torch.sigmoid(margins.neg_()).mul_(weights)  # d loss / d margin_ij, negated
        ctx.save_for_backward((lambdas.sum(1) - lambdas.sum(2)).mul_(sigma))
        return loss

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return grad_out.unsqueeze(1) * grad, None, None


def pairwise_logistic(scores: Tensor, weights: Tensor, sigma: float) -> Tensor:
    """``sum_{i,j} W_ij log(1 + exp(-sigma (s_i - s_j)))`` per list ``[B]`` (weights carry no gradient).

    Example:
        >>> pairwise_logistic(torch.tensor([[1.0, 0.0]]), torch.tensor([[[0.0, 1.0], [0.0, 0.0]]]), 1.0)
        tensor([0.3133])
    """
    return _PairwiseLogistic.apply(scores, weights.detach(), float(sigma))
