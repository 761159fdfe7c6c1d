"""Argument checks shared by the functional, the metric classes and the losses, one message per mistake (packages
outside :mod:`torchrank.functional` import them from here, never from its private modules)."""

from __future__ import annotations

import math

from torch import Tensor

from torchrank.functional._inputs import (
    EMPTY_TARGET_ACTIONS,
    REDUCTIONS,
    TIES,
    VALUE_PROBLEMS,
    check_choice,
    check_tensor,
    deferred_value_checks,
    is_integer_tensor,
    normalize_k,
    raise_value_problems,
    value_problems,
    working_dtype,
)
from torchrank.functional._options import TORCHMETRICS_NAMES, Cutoffs, EmptyTargetAction, Reduction, Ties, keyword_error

__all__ = [
    "EMPTY_TARGET_ACTIONS", "REDUCTIONS", "TIES", "TORCHMETRICS_NAMES", "VALUE_PROBLEMS", "Cutoffs",
    "EmptyTargetAction", "Reduction", "Ties", "check_choice", "check_k", "check_max_label", "check_positive",
    "check_tensor", "deferred_value_checks", "described", "is_finite", "is_integer_tensor", "keyword_error",
    "normalize_k", "raise_value_problems", "value_problems", "working_dtype",
]


def described(value: object) -> str:
    """What an error message says of an unexpected argument: a tensor's shape and dtype, else the type's name.

    Example:
        >>> import torch
        >>> described(torch.zeros(2, 3)), described([1, 2])
        ('shape (2, 3) dtype torch.float32', 'list')
    """
    return f"shape {tuple(value.shape)} dtype {value.dtype}" if isinstance(value, Tensor) else type(value).__name__


def check_k(k: int | None) -> None:
    """``k`` is None (the whole list) or a positive int: one cut-off (a loss takes no sequence of them).

    Example:
        >>> check_k(0)
        Traceback (most recent call last):
        ...
        ValueError: Argument `k` must be a positive int or None (the whole list), got 0.
    """
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
        raise ValueError(f"Argument `k` must be a positive int or None (the whole list), got {k!r}.")


def check_positive(name: str, value: float) -> None:
    """``value`` is a finite real number > 0 (temperatures, sigma, ``max_label``): an infinite one would make values
    NaN or 0 (``inf * 0``, ``inf - inf``) silently.

    Example:
        >>> check_positive("temperature", 0)
        Traceback (most recent call last):
        ...
        ValueError: Argument `temperature` must be a finite number > 0, got 0.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not (value > 0 and is_finite(value)):
        raise ValueError(f"Argument `{name}` must be a finite number > 0, got {value!r}.")


def is_finite(value: float) -> bool:
    """``math.isfinite``, and False for an int too large for a float (``math.isfinite(10**400)`` raises).

    Example:
        >>> is_finite(float("inf")), is_finite(10**400), is_finite(3)
        (False, False, True)
    """
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_max_label(max_label: float | None, target: Tensor | None = None, validate_args: bool = False) -> None:
    """``max_label`` (the top of a graded label scale) is None or a number > 0 and, with ``validate_args``, no label
    of ``target`` exceeds it (one host read).

    Example:
        >>> check_max_label(-1)
        Traceback (most recent call last):
        ...
        ValueError: Argument `max_label` must be a finite number > 0, got -1.
    """
    if max_label is None:
        return
    check_positive("max_label", max_label)
    if validate_args and isinstance(target, Tensor) and bool((target > max_label).any()):
        raise ValueError(f"Argument `target` holds a label above `max_label={max_label}`.")
