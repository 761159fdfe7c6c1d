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
    (a log-cumsum-exp from the end). Every list with a real item counts.

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
    if not x.padded:
        from_here = torch.logcumsumexp(ranked.flip(1), 1).flip(1)  # log sum_{l >= i} exp(s_(l))
        return reduce_loss((from_here - ranked).sum(1).to(x.scores.dtype), x.mask[:, 0], reduction)
    ranked_mask = x.mask.gather(1, order)
    ranked = _masked(ranked, ranked_mask)
    from_here = torch.logcumsumexp(ranked.flip(1), 1).flip(1)
    per_list = torch.where(ranked_mask, from_here - ranked, 0).sum(1)
    return reduce_loss(per_list.to(x.scores.dtype), x.mask.any(1), reduction)


def _scan_dtype(ranked: Tensor) -> Tensor:
    """``ranked`` in float64 where the device has it: ListMLE's log-cumsum-exp in float32 rounds
    ``log sum_{l >= i} exp(s_l)`` to ``eps |s|`` (8 at scores of 1e8), and its gradient ``exp(s_l - that)`` is then
    off by a factor up to ``e^8``; the scan is ``O(N)`` per list, so float64 costs little against the rest."""
    if ranked.dtype == torch.float32 and ranked.device.type != "mps":  # MPS has no float64
        return ranked.to(torch.float64)
    return ranked


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
