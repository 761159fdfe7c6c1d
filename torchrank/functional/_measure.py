"""A measure's kernel with what it declares to the pipeline (:class:`Measure`): whether the triton backend's fused
kernel computes it (its column code for the params: :mod:`torchrank.functional._fused_columns`), the largest label it
takes, the value checks of its own parameters. The registry's declarations hold the kernels, so each request that
reaches the pipeline carries its kernel's declarations: no table on the side. This module sits below the measures
and the pipeline and imports neither (nor triton).
"""

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
    """A kernel ``(ranking, ks, **params) -> (values [Q, K], no_relevant [Q])``, called as the function itself (its
    name, doc and signature are the function's; pickled by reference), with its declarations.

    Attributes:
        fused: The fused kernel's rule (None: it never computes the measure); a code: that column, without params.
        label_limit: ``(params, dtype) -> the largest label the kernel takes, or None``, for values that grow without
            bound in the label (DCG's undivided ``2^label - 1``): the value checks refuse larger labels.
        value_problems: ``(ranking, params) -> flags or None``: the value checks of the kernel's own parameters
            (bpref's judged counts), ``VALUE_PROBLEMS``' flags on the device.
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
