"""Soft ERR: a differentiable expected reciprocal rank (derivation in ``docs/losses.md``).

ERR (Chapelle et al., 2009) is a cascade over the stop probabilities in rank order,
``ERR@k = sum_{i<=k} (1/i) R_(i) prod_{l<i} (1 - R_(l))``, and a hard permutation matrix Pi gives those
probabilities as ``Pi R``. Soft ERR feeds the cascade ``rho = P R`` instead, with P NeuralSort's
Sinkhorn-scaled matrix: ``rho_i`` is the expected stop probability at rank i. The products run in log
space, ``prod_{l<i} (1 - rho_l) = exp(sum_{l<i} log(1 - rho_l))``. Each ``rho_i`` is a convex combination
of the R's (in [0, 1)), so the value is a valid ERR of a cascade and lies in [0, 1]; as the temperature goes
to 0, P tends to Pi (for distinct scores) and soft ERR to ERR.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional.core import Transform, top_of_scale
from torchrank.functional.core import stop_probabilities as _stop_probabilities
from torchrank.losses._common import (
    LossModule,
    apply_empty_target_action,
    check_labels_at_most,
    loss_function,
    prepare,
    reduce_loss,
)
from torchrank.losses._neuralsort import soft_sort

__all__ = ["SoftERRLoss", "soft_err"]


def stop_probabilities(labels: Tensor, mask: Tensor, transform: Transform, max_label: float | None) -> Tensor:
    """``R`` of each item ``[B, N]`` as :func:`torchrank.functional.err` defines it; 0 at padding.

    ``"exponential"``: ``(2^y - 1) / 2^g_max`` with ``g_max = max_label`` or each list's largest label (computed
    divided, so no label overflows: :func:`torchrank.functional.core.stop_probabilities`).

    Example:
        >>> stop_probabilities(torch.tensor([[3.0, 1.0, 0.0]]), torch.ones(1, 3, dtype=torch.bool), "exponential", None)
        tensor([[0.8750, 0.1250, 0.0000]])
    """
    return _stop_probabilities(labels, mask, transform, top_of_scale(labels, mask, max_label))


def cascade(rho: Tensor, k: int | None) -> Tensor:
    """``sum_{i<=k} (1/i) rho_i prod_{l<i} (1 - rho_l)`` per list ``[B]``, the product in log space."""
    depth = rho.shape[1] if k is None else min(k, rho.shape[1])
    rho = rho[:, :depth]
    log_keep = torch.log((1 - rho).clamp_min(torch.finfo(rho.dtype).tiny))
    log_reach = torch.cumsum(log_keep, 1) - log_keep  # exclusive: the ranks above
    ranks = torch.arange(1, depth + 1, dtype=rho.dtype, device=rho.device)
    return (rho * torch.exp(log_reach) / ranks).sum(1)


@loss_function()
def soft_err(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor | None = None,
    *,
    k: int | None = None,
    temperature: float = 1.0,
    sinkhorn_iterations: int = 10,
    transposed: bool = False,
    transform: Transform = "exponential",
    max_label: float | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = False,
) -> Tensor:
    """Soft ERR loss ``-ERR@k``: the ERR cascade over NeuralSort's soft permutation (see the module docstring).

    ``rho = P R`` (R the items' stop probabilities, P as in :func:`neural_ndcg`), then
    ``ERR = sum_{i<=k} (1/i) rho_i prod_{l<i} (1 - rho_l)`` with the product in log space. Tends to
    :func:`torchrank.functional.err` as the temperature goes to 0.

    {loss_args}
        transform: Label to stop probability, as :func:`torchrank.functional.err`: ``"exponential"``
            (``(2^y - 1) / 2^max_label``), ``"sigmoid"`` (``2 sigmoid(y) - 1``) or a callable.
        max_label: Top of the label scale for ``"exponential"`` (4 for LETOR's 0-4). Default: each list's
            largest label, as :func:`torchrank.functional.err`. With ``validate_args``, a real item's label above
            it is refused (its stop probability would exceed 1), as :func:`torchrank.functional.err` does.

    Example:
        >>> scores = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
        >>> labels = torch.tensor([[3, 2, 3, 0]])
        >>> soft_err(scores, labels, temperature=0.01, max_label=3)  # torchrank.functional.err: 0.9212
        tensor(-0.9212)
    """
    x = prepare(scores, labels, mask, validate_args=validate_args)
    if validate_args:
        check_labels_at_most(x.labels, x.mask, max_label)
    stop = stop_probabilities(x.labels, x.mask, transform, max_label)
    rho = soft_sort(
        x.scores,
        stop,
        x.mask,
        temperature=temperature,
        sinkhorn_iterations=sinkhorn_iterations,
        transposed=transposed,
        padded=x.padded,
    )
    empty = ~((x.labels > 0) & x.mask).any(1)
    values, counted = apply_empty_target_action(cascade(rho, k), empty, empty_target_action)
    return reduce_loss(values, counted & x.mask.any(1), reduction)


class SoftERRLoss(LossModule):
    """:func:`soft_err` as a module: hyperparameters in ``__init__``, ``forward(scores, labels, mask=None)``.

    Example:
        >>> SoftERRLoss(temperature=0.01, max_label=3)(torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[3, 2, 3]]))
        tensor(-0.9212)
    """

    _function = staticmethod(soft_err)
    _shown = ("k", "temperature", "sinkhorn_iterations", "transposed", "max_label", "reduction")
