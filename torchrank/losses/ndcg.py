"""Differentiable NDCG: NeuralNDCG (Pobrotyn and Bialobrzeski, 2021) and ApproxNDCG (Qin, Liu and Li, 2010).

Both return ``-NDCG`` (a loss to minimise), with the exact ideal DCG at k of :mod:`torchrank.functional`.

- NeuralNDCG replaces the sorting permutation in ``DCG = sum_i d_i gain(y_(i))`` by NeuralSort's relaxed,
  Sinkhorn-scaled permutation matrix P: ``DCG = sum_{i<=k} d_i (P g)_i``.
- ApproxNDCG replaces each item's rank by the smooth rank ``1 + sum_{l != j} sigmoid((s_l - s_j) / T)`` in
  the discount, and the cut-off by ``sigmoid((k + 1/2 - rank) / T)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional.core import discount_weights, discounted_gains, ideal_dcg
from torchrank.losses._common import (
    Discount,
    Gain,
    LossModule,
    apply_empty_target_action,
    gains,
    loss_function,
    position_weights,
    prepare,
    reduce_loss,
)
from torchrank.losses._neuralsort import soft_sort

__all__ = ["ApproxNDCGLoss", "NeuralNDCGLoss", "approx_ndcg", "neural_ndcg"]


def _ndcg_loss(
    dcg: Tensor,
    item_gains: Tensor,
    mask: Tensor,
    k: int | None,
    weights: Tensor,
    empty_target_action: str,
    reduction: str,
) -> Tensor:
    """``-DCG / IDCG@k`` per list, empty lists as ``empty_target_action`` says, then the shared reduction."""
    ideal = ideal_dcg(item_gains, weights, k, mask)
    empty = ideal <= 0
    ndcg = dcg / torch.where(empty, 1, ideal)
    values, counted = apply_empty_target_action(ndcg, empty, empty_target_action)
    return reduce_loss(values, counted & mask.any(1), reduction)


@loss_function()
def neural_ndcg(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor | None = None,
    *,
    k: int | None = None,
    temperature: float = 1.0,
    sinkhorn_iterations: int = 10,
    transposed: bool = False,
    gain: Gain = "exponential",
    discount: Discount = "log",
    log_base: float = 2.0,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = False,
) -> Tensor:
    """NeuralNDCG loss ``-NDCG@k`` (Pobrotyn and Bialobrzeski, 2021): DCG over NeuralSort's soft permutation.

    ``DCG = sum_{i<=k} (P g)_i / discount(i)`` with P NeuralSort's matrix (temperature tau) after
    ``sinkhorn_iterations`` Sinkhorn iterations, g the items' gains; divided by the exact ideal DCG@k.
    Memory ``O(B N^2)`` (one matrix, whatever the iteration count); the backward is hand-written.

    {loss_args}

    Example:
        >>> scores = torch.tensor([[0.5, 0.2, 0.1, 0.01, 0.65, 0.3], [1.0, -0.5, 2.0, 0.3, 0.0, 0.0]])
        >>> labels = torch.tensor([[4, 2, 1, 0, 4, 3], [0, 1, 2, 0, -1, -1]])
        >>> neural_ndcg(scores, labels, labels >= 0, sinkhorn_iterations=50)  # allRank: -0.888043
        tensor(-0.8880)
    """
    x = prepare(scores, labels, mask, validate_args=validate_args)
    item_gains = gains(x.labels, x.mask, gain)
    soft_gains = soft_sort(
        x.scores,
        item_gains,
        x.mask,
        temperature=temperature,
        sinkhorn_iterations=sinkhorn_iterations,
        transposed=transposed,
        padded=x.padded,
    )
    weights = position_weights(soft_gains.shape[1], soft_gains, discount, log_base)
    depth = soft_gains.shape[1] if k is None else min(k, soft_gains.shape[1])
    dcg = discounted_gains(soft_gains[:, :depth], weights).sum(1)
    return _ndcg_loss(dcg, item_gains, x.mask, k, weights, empty_target_action, reduction)


def smooth_ranks(scores: Tensor, mask: Tensor, temperature: float, padded: bool) -> Tensor:
    """``1 + sum_{l != j} sigmoid((s_l - s_j) / T)`` over the real items l ``[B, N]`` (ApproxNDCG's ranks).

    Each item's own term is ``sigmoid(0) = 1/2``, so the sum runs over every real item from ``1/2``.

    Example:
        >>> smooth_ranks(torch.tensor([[3.0, 0.0, -3.0]]), torch.ones(1, 3, dtype=torch.bool), 1.0, False)
        tensor([[1.0499, 2.0000, 2.9501]])
    """
    return _SmoothRanks.apply(scores, mask.to(scores.dtype), float(temperature), padded)


def _sigmoid_slope(z: Tensor) -> Tensor:
    """``sigmoid'(z) = e^-|z| / (1 + e^-|z|)^2``, accurate down to the dtype's smallest normal number.

    Why not autograd's ``y (1 - y)``: in float32 ``y = sigmoid(z)`` rounds to 1 for ``z > 17``, so every pair more
    than 17 temperatures apart got an exactly-zero slope, and items with only such neighbours no gradient at all.
    """
    e = z.abs_().neg_().exp_()  # in place: z is a temporary of the caller
    return e.div_((e + 1).square_())


class _SmoothRanks(torch.autograd.Function):
    """:func:`smooth_ranks`, its pairwise slopes recomputed in backward: ``O(B N)`` saved, not ``[B, N, N]``."""

    @staticmethod
    def forward(ctx, scores, real, temperature, padded):
        beaten_by = (scores.unsqueeze(1) - scores.unsqueeze(2)).div_(temperature).sigmoid_()  # [B, j, l]
        ctx.save_for_backward(scores, real)
        ctx.temperature = temperature
        if padded:
            return 0.5 + torch.bmm(beaten_by, real.unsqueeze(2)).squeeze(2)
        return 0.5 + beaten_by.sum(2)

    @staticmethod
    def backward(ctx, grad_ranks):
        scores, real = ctx.saved_tensors
        # d r_j / d s_l = slope_jl real_l / T (l != j), d r_j / d s_j = -sum_l slope_jl real_l / T; slope symmetric
        slope = _sigmoid_slope((scores.unsqueeze(1) - scores.unsqueeze(2)).div_(ctx.temperature))
        # an item's own term is constant; its slope 1/4 would swamp the e^-20 slopes of far neighbours in the sums
        slope.diagonal(dim1=1, dim2=2).zero_()
        both = torch.bmm(slope, torch.stack([grad_ranks * real, real], 2))
        grad = (real * both[..., 0] - grad_ranks * both[..., 1]) / ctx.temperature
        return grad, None, None, None


def _stable_sigmoid(z: Tensor) -> Tensor:
    """``sigmoid(z)`` whose gradient stays nonzero (relative) where ``sigmoid(z)`` rounds to 1 (see _sigmoid_slope)."""
    return torch.exp(torch.nn.functional.logsigmoid(z))


@loss_function()
def approx_ndcg(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor | None = None,
    *,
    k: int | None = None,
    temperature: float = 1.0,
    gain: Gain = "exponential",
    discount: Discount = "log",
    log_base: float = 2.0,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = False,
) -> Tensor:
    """ApproxNDCG loss ``-NDCG@k`` (Qin, Liu and Li, 2010) with smooth ranks.

    Item j's rank is ``r_j = 1 + sum_{l != j} sigmoid((s_l - s_j) / T)`` and
    ``DCG = sum_j gain_j / discount(r_j) * sigmoid((k + 1/2 - r_j) / T)`` (no cut-off factor for
    ``k=None``); divided by the exact ideal DCG@k. allRank's ``alpha`` is ``1 / temperature``. Memory and
    time ``O(B N^2)``.

    {loss_args}

    Example:
        >>> approx_ndcg(torch.tensor([[0.6, 0.8]]), torch.tensor([[1, 0]]), temperature=0.1)  # TF-Ranking
        tensor(-0.6551)
    """
    x = prepare(scores, labels, mask, validate_args=validate_args)
    item_gains = gains(x.labels, x.mask, gain)
    ranks = smooth_ranks(x.scores, x.mask, temperature, x.padded)
    discounted = item_gains * discount_weights(discount, ranks, log_base=log_base)
    if k is not None:
        discounted = discounted * _stable_sigmoid((k + 0.5 - ranks) / temperature)
    weights = position_weights(x.scores.shape[1], x.scores, discount, log_base)
    return _ndcg_loss(discounted.sum(1), item_gains, x.mask, k, weights, empty_target_action, reduction)


class NeuralNDCGLoss(LossModule):
    """:func:`neural_ndcg` as a module: hyperparameters in ``__init__``, ``forward(scores, labels, mask=None)``.

    Example:
        >>> loss = NeuralNDCGLoss(temperature=0.5)
        >>> loss(torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[2, 1, 0]]))
        tensor(-0.9730)
    """

    _function = staticmethod(neural_ndcg)
    _shown = ("k", "temperature", "sinkhorn_iterations", "transposed", "gain", "reduction")


class ApproxNDCGLoss(LossModule):
    """:func:`approx_ndcg` as a module: hyperparameters in ``__init__``, ``forward(scores, labels, mask=None)``.

    Example:
        >>> ApproxNDCGLoss(temperature=0.1)(torch.tensor([[0.6, 0.8]]), torch.tensor([[1, 0]]))
        tensor(-0.6551)
    """

    _function = staticmethod(approx_ndcg)
    _shown = ("k", "temperature", "gain", "reduction")
