"""Listwise baselines: ListNet (Cao et al., ICML 2007) and ListMLE (Xia et al., ICML 2008)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional.checks import check_choice
from torchrank.losses._common import LossModule, loss_function, prepare, reduce_loss

__all__ = ["ListMLELoss", "ListNetLoss", "listmle", "listnet"]

LISTMLE_TIES = ("random", "first")


def _masked(values: Tensor, mask: Tensor) -> Tensor:
    """``values`` with padding at the dtype's lowest finite value: no item after a softmax, no inf or NaN."""
    return torch.where(mask, values, torch.finfo(values.dtype).min)


@loss_function()
def listnet(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor | None = None,
    *,
    reduction: str = "mean",
    validate_args: bool = False,
) -> Tensor:
    """ListNet (Cao et al., 2007): cross-entropy between the top-one distributions of labels and scores.

    ``loss = -sum_j softmax(y)_j log softmax(s)_j`` over the real items of each list (allRank's form, log-softmax
    instead of ``log(softmax + eps)``). Every list with a real item counts.

    {loss_args}

    Example:
        >>> scores = torch.tensor([[0.5, 0.2, 0.1, 0.01, 0.65, 0.3], [1.0, -0.5, 2.0, 0.3, 0.0, 0.0]])
        >>> labels = torch.tensor([[4, 2, 1, 0, 4, 3], [0, 1, 2, 0, -1, -1]])
        >>> listnet(scores, labels, labels >= 0)  # allRank: 1.441052
        tensor(1.4411)
    """
    x = prepare(scores, labels, mask, validate_args=validate_args)
    if not x.padded:  # the common case, without the masking passes
        per_list = -(torch.softmax(x.labels, 1) * torch.log_softmax(x.scores, 1)).sum(1)
        return reduce_loss(per_list, x.mask[:, 0], reduction)
    target = torch.softmax(_masked(x.labels, x.mask), 1)
    log_probs = torch.log_softmax(_masked(x.scores, x.mask), 1)
    per_list = -(torch.where(x.mask, target * log_probs, 0)).sum(1)
    return reduce_loss(per_list, x.mask.any(1), reduction)


def _label_order(labels: Tensor, mask: Tensor, ties: str, generator: torch.Generator | None) -> Tensor:
    """Each list's items by descending label, padding last; equal labels in random or input order.

    Random: one uniform permutation of the columns, then a stable sort. Each list's tie groups are then in
    uniformly random order (lists share the permutation, as in allRank, which costs one sort instead of two).
    """
    key = torch.where(mask, labels, -float("inf"))
    if ties == "first":
        return torch.sort(key, dim=1, descending=True, stable=True).indices
    shuffle = torch.randperm(key.shape[1], generator=generator, device=key.device)
    by_label = torch.sort(key[:, shuffle], dim=1, descending=True, stable=True).indices
    return shuffle[by_label]


@loss_function(ties=lambda value: check_choice("ties", value, LISTMLE_TIES))
def listmle(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor | None = None,
    *,
    ties: str = "random",
    generator: torch.Generator | None = None,
    reduction: str = "mean",
    validate_args: bool = False,
) -> Tensor:
    """ListMLE (Xia et al., 2008): negative Plackett-Luce log-likelihood of the label order.

    ``loss = sum_i (log sum_{l >= i} exp(s_(l)) - s_(i))`` over the real items in descending label order
    (a log-cumsum-exp from the end, computed from differences of scores: accurate at any score magnitude).
    Every list with a real item counts.

    {loss_args}
        ties: Order of items with equal labels: ``"random"`` (a fresh uniform order each call, as allRank;
            ``generator`` makes it reproducible) or ``"first"`` (input order: deterministic).
        generator: Random generator for ``ties="random"``, on the device of ``scores``.

    Example:
        >>> listmle(torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[2, 1, 0]]), ties="first")
        tensor(0.7209)
    """
    x = prepare(scores, labels, mask, validate_args=validate_args)
    order = _label_order(x.labels, x.mask, ties, generator)
    ranked = _scan_dtype(x.scores.gather(1, order))
    per_list = _PlackettLuce.apply(ranked, x.mask.gather(1, order))
    return reduce_loss(per_list.to(x.scores.dtype), x.mask.any(1), reduction)


def _scan_dtype(ranked: Tensor) -> Tensor:
    """``ranked`` in float64 where the device has it (MPS has none): the exponents below are differences of
    scores, rounded to ``eps |s_l - m_i|`` each, and float32's eps would carry into the gradient's tail
    (``|s_l - m_i|`` up to ~700 before ``exp`` underflows); the scans are ``O(N log N)`` on ``[B, N]``, cheap
    against the rest of a training step."""
    if ranked.dtype == torch.float32 and ranked.device.type != "mps":
        return ranked.to(torch.float64)
    return ranked


def _rescaled_cumsum(key: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
    """Inclusive prefix scan along dim 1 of ``(max key, sum weight e^(key - max key))``: each position's running
    maximum ``M_l = max_{i <= l} key_i`` and ``sum_{i <= l} weight_i e^(key_i - M_l)``.

    Why not ``logcumsumexp``: its output ``log sum e^key`` is rounded to ``eps |key|``, and every quantity
    derived from it (torch's own backward included) carries that error into an exponent: at scores of 1e16 the
    gradient lost whole items. Here each exponent is ``key_i - M_l``, a difference of two inputs (exact up to
    one rounding of the difference itself), and the sums stay in ``[0, N max weight]``. A log-step
    (Hillis-Steele) scan: ``log2(N)`` vectorised combines of the associative ``(m1, w1) + (m2, w2) = (m,
    w1 e^(m1 - m) + w2 e^(m2 - m))``, ``m = max(m1, m2)``. Keys must be finite (padding at the dtype's lowest
    value) so that ``key_i - M_l`` is never ``inf - inf``.

    Example:
        >>> top, total = _rescaled_cumsum(torch.tensor([[1e16, 0.0, 1e16]]), torch.ones(1, 3))
        >>> top, total
        (tensor([[1.0000e+16, 1.0000e+16, 1.0000e+16]]), tensor([[1., 1., 2.]]))
    """
    n, step = key.shape[1], 1
    while step < n:
        before, here = key[:, :-step], key[:, step:]
        top = torch.maximum(before, here)
        total = weight[:, :-step] * torch.exp(before - top) + weight[:, step:] * torch.exp(here - top)
        key = torch.cat([key[:, :step], top], 1)
        weight = torch.cat([weight[:, :step], total], 1)
        step *= 2
    return key, weight


class _PlackettLuce(torch.autograd.Function):
    """ListMLE's per-list loss ``sum_i (lse_i - s_i)``, ``lse_i = log sum_{l >= i} e^(s_l)`` over the real items of
    ``ranked`` (items in label order), with an exact backward (first-order differentiable only).

    Each ``lse_i`` is kept as ``m_i + r_i``: ``m_i = max_{l >= i} s_l`` (a score itself) and ``r_i = log sum_{l >= i}
    e^(s_l - m_i)`` in ``[0, log N]``, so the loss terms ``(m_i - s_i) + r_i`` and the gradient
    ``d/ds_l = sum_{i <= l} e^(s_l - m_i - r_i) - 1`` read only differences of scores, never of two numbers of
    size ``|s|`` (a forward scan sums ``e^(-m_i - r_i)`` relative to its running maximum ``-min m_i``). Padded
    items weigh nothing in either scan and get a zero gradient.
    """

    @staticmethod
    def forward(ctx, ranked, real):
        lowest = torch.finfo(ranked.dtype).min
        scores = torch.where(real, ranked, lowest)
        top, total = _rescaled_cumsum(scores.flip(1), real.to(ranked.dtype).flip(1))
        top, log_total = top.flip(1), torch.log(total.flip(1))  # m_i and r_i (-inf where no real item follows)
        ctx.save_for_backward(scores, real, top, log_total)
        return torch.where(real, (top - scores) + log_total, 0).sum(1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        scores, real, top, log_total = ctx.saved_tensors
        lowest = torch.finfo(scores.dtype).min
        key = torch.where(real, -top, lowest)
        lowest_top, total = _rescaled_cumsum(key, torch.where(real, torch.exp(-log_total), 0))
        share = torch.exp(scores + lowest_top) * total  # sum_{i <= l} e^(s_l - m_i - r_i): l's share of the lists
        return torch.where(real, share - 1, 0) * grad_out.unsqueeze(1), None


class ListNetLoss(LossModule):
    """:func:`listnet` as a module: ``forward(scores, labels, mask=None)``.

    Example:
        >>> ListNetLoss()(torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[2, 1, 0]]))
        tensor(0.8324)
    """

    _function = staticmethod(listnet)


class ListMLELoss(LossModule):
    """:func:`listmle` as a module: hyperparameters in ``__init__``, ``forward(scores, labels, mask=None)``.

    Example:
        >>> ListMLELoss(ties="first")(torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[2, 1, 0]]))
        tensor(0.7209)
    """

    _function = staticmethod(listmle)
    _shown = ("ties", "reduction")
