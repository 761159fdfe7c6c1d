"""The gains, discounts, ERR's stop probabilities and ideal DCG that the measures and the losses share, so that a
gain means the same in a metric and in the loss trained for it: any device, no host read, autograd kept. Where only
a ratio is taken, exponential gains are divided by ``2^top`` and never overflow (docs/measures.md, section dcg).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from torchrank.functional._descending import descending_rows
from torchrank.functional.checks import check_choice, is_finite

__all__ = [
    "DISCOUNTS", "GAINS", "TRANSFORMS", "Discount", "Gain", "Transform", "check_gain_discount", "check_transform",
    "discount_weights", "discounted_gains", "exponential_gain", "gain_values", "ideal_dcg", "largest_exponent",
    "rank_weights", "stop_probabilities", "top_of_scale",
]

#: A gain: ``"linear"`` (the label), ``"exponential"`` (``2^label - 1``) or a callable on the label tensor (applied to
#: labels above 0: label 0 has gain 0).
Gain = str | Callable[[Tensor], Tensor]
#: A discount: ``"log"``, ``"power"``, ``"linear"`` or a callable of the 1-based rank returning the divisor.
Discount = str | Callable[[Tensor], Tensor]
#: ERR's label-to-stop-probability map: ``"exponential"``, ``"sigmoid"`` or a callable.
Transform = str | Callable[[Tensor], Tensor]

GAINS = ("linear", "exponential")
DISCOUNTS = ("log", "power", "linear")
TRANSFORMS = ("exponential", "sigmoid")


def check_gain_discount(gain: Gain, discount: Discount, log_base: float) -> None:
    """Validate the gain and discount options of every DCG-style measure and loss.

    Example:
        >>> check_gain_discount("cubic", "log", 2.0)
        Traceback (most recent call last):
        ...
        ValueError: Argument `gain` must be one of ('linear', 'exponential'), got 'cubic'.
    """
    if not callable(gain):
        check_choice("gain", gain, GAINS)
    if not callable(discount):
        check_choice("discount", discount, DISCOUNTS)
    if not log_base > 1 or not is_finite(log_base):  # log_inf(i + 1) = 0: every discount weight infinite
        raise ValueError(f"Argument `log_base` must be a finite number > 1, got {log_base}.")


def check_transform(transform: Transform) -> None:
    """Validate ERR's ``transform`` (the metric's and the loss').

    Example:
        >>> check_transform("linear")
        Traceback (most recent call last):
        ...
        ValueError: Argument `transform` must be one of ('exponential', 'sigmoid'), got 'linear'.
    """
    if not callable(transform):
        check_choice("transform", transform, TRANSFORMS)


def largest_exponent(dtype: torch.dtype) -> int:
    """The largest label whose exponential gain ``2^label - 1`` is finite in ``dtype`` (127 for float32).

    Example:
        >>> largest_exponent(torch.float32), largest_exponent(torch.float64)
        (127, 1023)
    """
    return math.frexp(torch.finfo(dtype).max)[1] - 1  # max = m * 2^e with m < 1: 2^(e - 1) is the largest power


def exponential_gain(labels: Tensor, top: Tensor | float | None = None) -> Tensor:
    """``2^label - 1``, or with ``top`` that gain divided by ``2^top``, at most 1 for labels up to ``top`` (a label
    far below it underflows to 0, which a ratio of gains could not resolve anyway).

    Example:
        >>> exponential_gain(torch.tensor([0.0, 1.0, 3.0]))
        tensor([0., 1., 7.])
        >>> exponential_gain(torch.tensor([200.0, 199.0]), top=200.0)  # 2^200 is inf in float32
        tensor([1.0000, 0.5000])
    """
    if top is None:
        return torch.pow(2.0, labels) - 1
    return torch.pow(2.0, labels - top) - 2.0 ** (-top)


def gain_values(labels: Tensor, gain: Gain, top: Tensor | float | None = None) -> Tensor:
    """``gain(label)`` of each label, in the labels' dtype; ``top`` divides exponential gains by ``2^top``
    (:func:`exponential_gain`; the other gains ignore it). A callable maps the labels above 0 only: label 0 is also
    what padding, unjudged items and the 0-padding of ``ideal_target`` hold.

    Example:
        >>> gain_values(torch.tensor([[0.0, 1.0, 3.0]]), lambda y: y**2 + 1)
        tensor([[ 0.,  2., 10.]])
    """
    if callable(gain):
        return torch.where(labels > 0, gain(labels).to(labels.dtype), 0)
    if gain == "linear":
        return labels
    return exponential_gain(labels, top)


def top_of_scale(labels: Tensor, mask: Tensor | None = None, max_label: float | None = None) -> Tensor:
    """The top of each list's label scale ``[B, 1]``: ``max_label``, or the list's largest label (1 when none is
    positive), as ERR's ``g_max`` and the divisor of exponential gains.

    Example:
        >>> top_of_scale(torch.tensor([[2.0, 4.0], [0.0, 0.0]]))
        tensor([[4.],
                [1.]])
    """
    if max_label is not None:
        return torch.as_tensor(float(max_label), dtype=labels.dtype, device=labels.device)
    real = labels if mask is None else torch.where(mask, labels, 0)
    top = real.amax(1, keepdim=True)
    return torch.where(top > 0, top, 1)


def stop_probabilities(labels: Tensor, valid: Tensor, transform: Transform, top: Tensor | float) -> Tensor:
    """ERR's ``R`` of each item (Chapelle et al., 2009), 0 where ``valid`` is False: ``"exponential"``
    ``(2^label - 1) / 2^top`` (``top``: :func:`top_of_scale`), ``"sigmoid"`` ``2 sigmoid(label) - 1``, or a callable's.

    Example:
        >>> labels = torch.tensor([[3.0, 1.0, 0.0]])
        >>> stop_probabilities(labels, torch.ones_like(labels, dtype=torch.bool), "exponential", 3.0)
        tensor([[0.8750, 0.1250, 0.0000]])
    """
    if callable(transform):
        prob = transform(labels).to(labels.dtype)
    elif transform == "sigmoid":
        prob = 2 * torch.sigmoid(labels) - 1
    else:
        prob = exponential_gain(labels, top)
    return torch.where(valid, prob, 0)


def discount_weights(discount: Discount, positions: Tensor, *, log_base: float = 2.0, power: float = 1.0) -> Tensor:
    """Weights ``1 / discount(i)`` for 1-based ranks ``positions`` (smooth ranks too, as ApproxNDCG's): ``"log"``
    ``log_b(i + 1)`` (``b = log_base``), ``"power"`` ``i ** power``, ``"linear"`` ``i``, or a callable's divisors.

    Example:
        >>> discount_weights("log", torch.tensor([1.0, 3.0]))
        tensor([1.0000, 0.5000])
    """
    if callable(discount):
        divisor = discount(positions).to(positions.dtype)
    elif discount == "log":
        divisor = torch.log(positions + 1) / math.log(log_base)
    elif discount == "power":
        divisor = positions**power
    elif discount == "linear":
        divisor = positions
    else:
        raise ValueError(f"Argument `discount` must be 'log', 'power', 'linear' or a callable, got {discount!r}.")
    return 1.0 / divisor


def rank_weights(
    discount: Discount, n: int, *, dtype: torch.dtype, device: torch.device | str, log_base: float = 2.0,
    power: float = 1.0,
) -> Tensor:
    """:func:`discount_weights` of ranks ``1..n`` ``[n]``.

    Example:
        >>> rank_weights("linear", 3, dtype=torch.float32, device="cpu")
        tensor([1.0000, 0.5000, 0.3333])
    """
    ranks = torch.arange(1, n + 1, dtype=dtype, device=device)
    return discount_weights(discount, ranks, log_base=log_base, power=power)


def discounted_gains(ordered_gains: Tensor, weights: Tensor) -> Tensor:
    """Each rank's term of DCG, ``gain_i / discount(i)`` ``[..., N]``, from gains in rank order and the weights of
    ranks ``1..>=N`` (:func:`rank_weights`): DCG@k is the sum of the first k.

    Example:
        >>> discounted_gains(torch.tensor([[3.0, 0.0, 1.0]]), rank_weights("log", 3, dtype=torch.float32, device="cpu"))
        tensor([[3.0000, 0.0000, 0.5000]])
    """
    n = ordered_gains.shape[-1]
    return ordered_gains * (weights if weights.shape[0] == n else weights[:n])  # a slice: one more op per update


def ideal_dcg(gains: Tensor, weights: Tensor, k: int | None = None, mask: Tensor | None = None) -> Tensor:
    """Ideal DCG@k of each list ``[B]`` (``None``: the whole list) from its real items' gains, which carry no
    gradient here (the ideal is a constant of the labels).

    Example:
        >>> w = rank_weights("log", 3, dtype=torch.float32, device="cpu")
        >>> ideal_dcg(torch.tensor([[1.0, 3.0, 0.0]]), w)  # 3 + 1 / log2(3)
        tensor([3.6309])
    """
    ideal = gains.detach() if mask is None else torch.where(mask, gains.detach(), 0)
    return discounted_gains(descending_rows(ideal, k), weights).sum(1)  # the ideal ranking of the measures
