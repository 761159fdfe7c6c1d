"""A measure's kernel with what it declares to the pipeline (:class:`Measure`), carried by every request: no table on
the side. It imports neither the measures nor the pipeline (nor triton)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from torchrank.functional._fused_columns import CODES, RBP, Column

Kernel = Callable[..., tuple[Tensor, Tensor]]
# the fused kernel's rule for a measure: its column code for the measure's params, None for params it does not take
Rule = Callable[[dict], int | None]
LabelLimit = Callable[[dict, torch.dtype], float | None]
ValueProblems = Callable[..., Tensor | None]


class Measure:
    """A kernel ``(ranking, ks, **params) -> (values [Q, K], no_relevant [Q])`` with its declarations, called and
    pickled as the function itself.

    Attributes:
        fused: The triton fused kernel's column code for the params (None: not computed there); a code: that
            column, without params (:mod:`~torchrank.functional._fused_columns`).
        label_limit: ``(params, dtype) -> the largest label the kernel takes, or None`` (DCG's ``2^label - 1``).
        value_problems: ``(ranking, params) -> VALUE_PROBLEMS' flags or None``: checks of the kernel's parameters.
    """

    def __init__(
        self, kernel: Kernel, *, fused: Rule | int | None = None, label_limit: LabelLimit | None = None,
        value_problems: ValueProblems | None = None,
    ) -> None:
        functools.update_wrapper(self, kernel)  # inspect.signature follows __wrapped__: the kernel's parameters
        self.kernel = kernel
        self.fused = _without_params(_known(fused)) if isinstance(fused, int) else fused
        self.label_limit = label_limit
        self.value_problems = value_problems

    def __call__(self, ranking: object, ks: Sequence[int | None], **params: object) -> tuple[Tensor, Tensor]:
        return self.kernel(ranking, ks, **params)

    def __reduce__(self) -> str:
        return self.kernel.__qualname__  # the module's name for it

    def __repr__(self) -> str:
        return f"<measure {self.kernel.__module__}.{self.kernel.__qualname__}>"


def measure(
    *, fused: Rule | int | None = None, label_limit: LabelLimit | None = None,
    value_problems: ValueProblems | None = None,
) -> Callable[[Kernel], Measure]:
    """Declare the kernel this decorates (see :class:`Measure`).

    Example:
        >>> from torchrank.functional._fused_columns import PRECISION
        >>> @measure(fused=PRECISION)
        ... def _my_precision(r, ks, adaptive_k=False):
        ...     ...
        >>> fused_columns(_my_precision, [5, None], {}), fused_columns(_my_precision, [5], {"adaptive_k": True})
        ([Column(code=0, k=5, p=0.0, top=0.0), Column(code=0, k=0, p=0.0, top=0.0)], None)
    """
    return lambda kernel: Measure(kernel, fused=fused, label_limit=label_limit, value_problems=value_problems)


def _without_params(code: int) -> Rule:
    return lambda params: code if not params else None


def _known(code: int) -> int:
    if code not in CODES:
        raise ValueError(f"The fused kernel has no column code {code!r} (its codes: {CODES}).")
    return code


def fused_code(kernel: Kernel, params: dict) -> int | None:
    """The fused kernel's column code for ``kernel`` with ``params``; None where it does not compute them."""
    code = kernel.fused(params) if isinstance(kernel, Measure) and kernel.fused is not None else None
    return None if code is None else _known(code)


def fused_columns(kernel: Kernel, ks: Sequence[int | None], params: dict) -> list[Column] | None:
    """The fused kernel's columns for ``kernel`` at cut-offs ``ks`` with ``params``; None where it computes none."""
    code = fused_code(kernel, params)
    if code is None:
        return None
    p, top = (float(params["p"]), float(params["max_label"] or 0.0)) if code == RBP else (0.0, 0.0)
    return [Column(code, 0 if k is None else k, p, top) for k in ks]
