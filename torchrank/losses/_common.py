"""What every loss shares: argument checks, the working dtype, gains and discounts, and the one reduction.

The conventions are :mod:`torchrank.functional`'s: the same gain and discount names (and callables), the
same cut-off ``k``, the same ``empty_target_action`` values, the same float64-or-float32 working dtype.
Value checks that read tensors (and so would synchronise a GPU stream on every training step) run only
with ``validate_args=True``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from torchrank.functional.checks import (
    EMPTY_TARGET_ACTIONS,
    REDUCTIONS,
    check_choice,
    check_k,
    check_max_label,
    check_positive,
    check_tensor,
    is_finite,
    working_dtype,
)
from torchrank.functional.core import (
    Discount,
    Gain,
    check_gain_discount,
    check_transform,
    gain_values,
    rank_weights,
    top_of_scale,
)

__all__ = [
    "Discount",
    "Gain",
    "LossInput",
    "LossModule",
    "apply_empty_target_action",
    "check_at_least",
    "check_iterations",
    "check_labels_at_most",
    "check_positive",
    "check_reduction",
    "gains",
    "loss_function",
    "position_weights",
    "prepare",
    "reduce_loss",
]

LOSS_ARGS = {
    "scores": "Model scores ``[B, N]`` (B lists of N items), float; bf16/fp16 are computed in float32.",
    "labels": "Graded labels ``[B, N]`` (bool, int or float, ``>= 0`` at real items).",
    "mask": "Bool ``[B, N]``, True for a real item; padded items are never ranked, never counted, and get a\n"
    "    zero gradient. None: every item is real. (allRank's label -1 padding is ``mask=labels >= 0``.)",
    "k": "Cut-off: only the top k ranks count (``None``: the whole list); the ideal DCG is at k too.",
    "temperature": "Smoothing: the surrogate tends to the exact metric as it goes to 0 (on the scores' scale).",
    "sinkhorn_iterations": "Sinkhorn iterations (a column then a row normalisation each) after NeuralSort; 0\n"
    "    uses NeuralSort's row-stochastic matrix as it is. A fixed count: no data-dependent loop.",
    "transposed": "End Sinkhorn on a column normalisation (each item's distribution over ranks sums to 1),\n"
    "    the paper's NeuralNDCG-transposed; False ends on rows (each rank's distribution over items).",
    "gain": '``"exponential"`` (``2^label - 1``; allRank, LightGBM, ranx ``ndcg_burges``), ``"linear"``\n'
    "    (the label; trec_eval) or a callable on the label tensor, as in :func:`torchrank.functional.ndcg`.",
    "discount": '``"log"`` (``log_b(i + 1)``), ``"power"``, ``"linear"`` or a callable of the 1-based\n'
    "    rank returning the divisor, as in :func:`torchrank.functional.ndcg`.",
    "log_base": '``b`` of the ``"log"`` discount.',
    "empty_target_action": 'A list with no positive label (ideal value 0): ``"skip"`` (left out of the\n'
    '    mean, as allRank), ``"neg"`` (metric 0, loss 0, counted), ``"pos"`` (metric 1, loss -1, counted)\n'
    '    or ``"error"``. Its loss is constant, so it never has a gradient. A fully padded list never counts.',
    "reduction": '``"mean"`` over the lists that count (0 when none does), ``"sum"``, or ``"none"``:\n'
    "    per-list losses ``[B]``, NaN for a list that does not count (``loss.nanmean()`` is the mean).",
    "validate_args": "Also run the checks that read values (NaN or infinite scores, NaN or negative labels at\n"
    "    real items); each synchronises a GPU stream, so they are off by default on the training path.",
}


def loss_function(**own_checks: Callable[[Any], None]) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """Make ``fn`` a loss function: its docstring's ``{loss_args}`` documents the shared arguments it takes (in
    signature order), and every call checks its options first, by name: the shared ones (``k``, ``temperature``,
    ``sigma``, ``sinkhorn_iterations``, gain and discount, ``transform``, ``max_label``, ``reduction`` and
    ``empty_target_action``) as every loss does, a loss' own with ``own_checks`` (option name -> check of its value).
    Its module (:class:`LossModule`) runs the same checks at construction: the checks are written once.
    """

    def decorate(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
        _document(fn)
        defaults = {p.name: p.default for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY}

        def check_options(options: dict[str, Any]) -> None:
            for name in defaults:  # in signature order: the first wrong option is the one reported
                if name in own_checks:
                    own_checks[name](options[name])
                elif name in _SHARED_CHECKS:
                    _SHARED_CHECKS[name](options)

        @functools.wraps(fn)
        def checked(scores: Tensor, labels: Tensor, mask: Tensor | None = None, **options: Any) -> Tensor:
            check_options({**defaults, **options})
            return fn(scores, labels, mask, **options)

        checked.check_options = check_options  # type: ignore[attr-defined]
        return checked

    return decorate


def _document(fn: Callable) -> None:
    """Replace ``{loss_args}`` in ``fn``'s docstring by the shared arguments it takes, in signature order."""
    taken = [name for name in inspect.signature(fn).parameters if name in LOSS_ARGS]
    lines = ["    Args:"]
    for name in taken:
        lines.append(f"        {name}: " + LOSS_ARGS[name].replace("\n", "\n        "))
    fn.__doc__ = (fn.__doc__ or "").replace("    {loss_args}\n", "\n".join(lines) + "\n")


class LossModule(nn.Module):
    """A loss function as a module: its options keyword-only arguments of ``__init__`` (the function's, with its
    defaults), checked by the function's own checks and kept as attributes, and ``forward(scores, labels,
    mask=None)`` calling ``_function`` with each option read from the attribute of the same name. ``repr`` shows
    the options ``_shown`` names. A subclass names its function; ``__init__`` is built from it.

    Example:
        >>> from torchrank.losses import RankNetLoss, ranknet
        >>> scores, labels = torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[0, 1, 0]])
        >>> torch.equal(RankNetLoss(sigma=2.0)(scores, labels), ranknet(scores, labels, sigma=2.0))
        True
    """

    _function: ClassVar[Callable[..., Tensor]]
    _shown: ClassVar[tuple[str, ...]] = ("reduction",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_function" in cls.__dict__:
            cls.__init__ = _module_constructor(cls._function)  # type: ignore[method-assign]

    def forward(self, scores: Tensor, labels: Tensor, mask: Tensor | None = None) -> Tensor:
        function = type(self)._function
        return function(scores, labels, mask, **{name: getattr(self, name) for name in _options(function)})

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)


def _module_constructor(function: Callable[..., Tensor]) -> Callable[..., None]:
    """``__init__(self, *, <function's options with its defaults>)``: the function's checks, then one attribute per
    option (what ``inspect.signature`` and ``help`` show is that signature)."""
    options = [p for p in inspect.signature(function).parameters.values() if p.kind is p.KEYWORD_ONLY]
    signature = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *options])

    def __init__(self: LossModule, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        del given["self"]
        function.check_options(given)  # type: ignore[attr-defined]
        nn.Module.__init__(self)
        for name, value in given.items():
            setattr(self, name, value)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    return __init__


@functools.cache
def _options(function: Callable[..., Tensor]) -> tuple[str, ...]:
    """The keyword-only parameters of a loss function: the options its module fixes."""
    parameters = inspect.signature(function).parameters.values()
    return tuple(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class LossInput:
    """Validated ``[B, N]`` input in the working dtype (float64 for float64 scores, else float32)."""

    scores: Tensor  # [B, N] floating, with the caller's autograd history; padded positions hold 0
    labels: Tensor  # [B, N] floating, 0 at padding
    mask: Tensor  # [B, N] bool, True for a real item
    padded: bool  # False when the caller passed no mask (known without reading values)


def prepare(scores: Tensor, labels: Tensor, mask: Tensor | None, *, validate_args: bool = False) -> LossInput:
    """Check shapes, dtypes and devices (always) and values (``validate_args``); cast to the working dtype.

    bf16/fp16 scores are computed in float32 (as under autocast); the gradient flows back in their dtype.

    Example:
        >>> x = prepare(torch.tensor([[0.2, 0.1]]), torch.tensor([[1, 0]]), None)
        >>> x.scores.dtype, x.labels
        (torch.float32, tensor([[1., 0.]]))
    """
    check_tensor("scores", scores)
    check_tensor("labels", labels)
    if not scores.is_floating_point():
        raise TypeError(f"Argument `scores` must be a floating tensor (a model's output), got dtype {scores.dtype}.")
    if scores.ndim != 2:
        raise ValueError(f"Argument `scores` must have shape [B, N] (lists x items), got {tuple(scores.shape)}.")
    if labels.shape != scores.shape:
        raise ValueError(
            f"Argument `labels` must have the shape of `scores` {tuple(scores.shape)}, got {tuple(labels.shape)}."
        )
    if labels.is_complex():
        raise TypeError(f"Argument `labels` must hold real labels (bool, int or float), got dtype {labels.dtype}.")
    if scores.shape[1] == 0:
        raise ValueError(f"Argument `scores` must hold at least one item per list, got shape {tuple(scores.shape)}.")
    _check_device("labels", labels, scores)
    if mask is not None:
        check_tensor("mask", mask)
        if mask.dtype != torch.bool:
            raise TypeError(f"Argument `mask` must be a bool tensor (True = real item), got dtype {mask.dtype}.")
        if mask.shape != scores.shape:
            raise ValueError(
                f"Argument `mask` must have the shape of `scores` {tuple(scores.shape)}, got {tuple(mask.shape)}."
            )
        _check_device("mask", mask, scores)
    if validate_args:
        _check_values(scores, labels, mask)
    work = working_dtype(scores)
    padded = mask is not None
    labels = labels.to(work)
    scores = scores.to(work)
    if padded:
        # padded positions may hold anything (-1, NaN, inf): every loss reads 0 there, with no gradient
        labels = torch.where(mask, labels, 0)
        scores = torch.where(mask, scores, 0)
    else:
        mask = torch.ones_like(scores, dtype=torch.bool)
    return LossInput(scores=scores, labels=labels, mask=mask, padded=padded)


def _check_device(name: str, value: Tensor, scores: Tensor) -> None:
    if value.device != scores.device:
        raise ValueError(f"Argument `{name}` must be on the device of `scores` ({scores.device}), got {value.device}.")


def _check_values(scores: Tensor, labels: Tensor, mask: Tensor | None) -> None:
    """Checks that read values: one host synchronisation each (off by default on the training path).

    An infinite score at a real item is refused as NaN is: every loss compares scores by their differences, and
    ``inf - inf`` is NaN (unchecked, the loss is NaN, with no error).
    """
    real = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask
    if not bool(torch.isfinite(scores[real]).all()):
        raise ValueError(
            "Argument `scores` contains NaN or an infinity at a real (unmasked) item; scores must be finite."
        )
    if labels.is_floating_point() and bool(torch.isnan(labels[real]).any()):
        raise ValueError("Argument `labels` contains NaN at a real (unmasked) item.")
    if labels.dtype != torch.bool and bool((labels[real] < 0).any()):
        raise ValueError(
            "Argument `labels` must be >= 0 at real items; mark padding with `mask` (False), not a negative label."
        )


def check_labels_at_most(labels: Tensor, mask: Tensor, max_label: float | None) -> None:
    """No real item's label exceeds ``max_label`` (one host read; ``validate_args`` only), as
    :func:`torchrank.functional.err` checks: a label above the top of the scale would give a stop probability
    above 1 (``(2^3 - 1) / 2^2 = 1.75``) and a cascade that is no ERR."""
    if max_label is not None and bool((labels[mask] > max_label).any()):
        raise ValueError(f"Argument `labels` holds a label above `max_label={max_label}` at a real (unmasked) item.")


def check_iterations(sinkhorn_iterations: int) -> None:
    """``sinkhorn_iterations`` is an int >= 0."""
    if isinstance(sinkhorn_iterations, bool) or not isinstance(sinkhorn_iterations, int) or sinkhorn_iterations < 0:
        raise ValueError(f"Argument `sinkhorn_iterations` must be an int >= 0, got {sinkhorn_iterations!r}.")


def check_reduction(reduction: str) -> None:
    """``reduction`` is one of :data:`~torchrank.functional.checks.REDUCTIONS`."""
    check_choice("reduction", reduction, REDUCTIONS)


def check_at_least(name: str, value: float, at_least: float) -> None:
    """``value`` is a finite real number ``>= at_least`` (``mu``; the options > 0 use
    :func:`~torchrank.functional.checks.check_positive`, which refuses infinities too).

    Example:
        >>> check_at_least("mu", float("inf"), 0)
        Traceback (most recent call last):
        ...
        ValueError: Argument `mu` must be a finite number >= 0, got inf.
    """
    real = not isinstance(value, bool) and isinstance(value, int | float)
    if not (real and is_finite(value) and value >= at_least):
        raise ValueError(f"Argument `{name}` must be a finite number >= {at_least:g}, got {value!r}.")


# the checks of the options several losses share, by option name (each reads the options it needs); every numeric
# option is refused unless finite
_SHARED_CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "k": lambda o: check_k(o["k"]),
    "temperature": lambda o: check_positive("temperature", o["temperature"]),
    "sigma": lambda o: check_positive("sigma", o["sigma"]),
    "sinkhorn_iterations": lambda o: check_iterations(o["sinkhorn_iterations"]),
    "gain": lambda o: check_gain_discount(o["gain"], o["discount"], o["log_base"]),
    "transform": lambda o: check_transform(o["transform"]),
    "max_label": lambda o: check_max_label(o["max_label"]),
    # None is no action (torchrank.functional refuses it too): it used to pass as "neg"
    "empty_target_action": lambda o: check_choice(
        "empty_target_action", o["empty_target_action"], EMPTY_TARGET_ACTIONS
    ),
    "reduction": lambda o: check_reduction(o["reduction"]),
}


def gains(labels: Tensor, mask: Tensor, gain: Gain) -> Tensor:
    """Each real item's gain ``[B, N]`` (0 at padding), as :func:`torchrank.functional.ndcg` defines it; exponential
    gains divided by ``2^top`` (``top``: the list's largest label), which every loss' normalised DCG leaves out, so
    that no label overflows the dtype (``2^128`` is inf in float32).

    Example:
        >>> gains(torch.tensor([[0.0, 1.0, 3.0]]), torch.tensor([[True, True, True]]), "exponential")  # (0, 1, 7) / 8
        tensor([[0.0000, 0.1250, 0.8750]])
    """
    top = top_of_scale(labels, mask) if gain == "exponential" else None
    return torch.where(mask, gain_values(labels, gain, top), 0)


def position_weights(n: int, like: Tensor, discount: Discount, log_base: float) -> Tensor:
    """``1 / discount(i)`` for ranks ``i = 1..n`` ``[n]``, in ``like``'s dtype and device."""
    return rank_weights(discount, n, dtype=like.dtype, device=like.device, log_base=log_base)


def apply_empty_target_action(metric: Tensor, empty: Tensor, empty_target_action: str) -> tuple[Tensor, Tensor]:
    """The loss ``-metric`` of each list, and which lists count, with lists in ``empty`` (no ideal gain) scored
    as ``empty_target_action`` says: ``"neg"`` (metric 0), ``"pos"`` (metric 1), ``"skip"`` (left out),
    ``"error"`` (raise; one host synchronisation)."""
    if empty_target_action == "error" and bool(empty.any()):
        raise ValueError(
            "A list has no relevant item and `empty_target_action='error'`; pass 'skip', 'neg' or 'pos' to "
            "score such lists."
        )
    fill = 1.0 if empty_target_action == "pos" else 0.0
    metric = torch.where(empty, fill, metric)
    counted = ~empty if empty_target_action == "skip" else torch.ones_like(empty)
    return -metric, counted


def reduce_loss(values: Tensor, counted: Tensor, reduction: str) -> Tensor:
    """The one reduction of every loss: over the lists that count.

    ``"mean"``: their mean (0, with a zero gradient, when none counts); ``"sum"``: their sum; ``"none"``:
    per-list values ``[B]`` with NaN for a list that does not count (so ``loss.nanmean()`` equals ``"mean"``).
    ``values`` must be finite where ``counted`` is False: ``where`` blocks their gradient, not a NaN's.

    Example:
        >>> reduce_loss(torch.tensor([1.0, 5.0, 3.0]), torch.tensor([True, False, True]), "mean")
        tensor(2.)
    """
    kept = torch.where(counted, values, 0)
    if reduction == "none":
        return torch.where(counted, values, float("nan"))
    if reduction == "sum":
        return kept.sum()
    return kept.sum() / counted.sum().clamp_min(1).to(values.dtype)
