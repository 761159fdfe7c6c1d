"""A measure's kernel with what it declares to the pipeline (:class:`Measure`): whether the triton backend's fused
kernel computes it (its column code for the params, :mod:`torchrank.functional._fused_columns`), the largest label it
takes and the value checks of its own parameters. The measure modules declare their kernels so (:func:`measure`), the
registry's declarations hold them, and each request that reaches the pipeline carries its kernel's declarations: no
table on the side. This module sits below the measures and the pipeline and imports neither (nor triton).
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


class Measure:
    """A kernel ``(ranking, ks, **params) -> (values [Q, K], no_relevant [Q])``, called as the function itself (its
    name, doc and signature are the function's), with its declarations.

    Attributes:
        kernel: The function.
        fused: The fused kernel's rule: the column code for the params, None where the fused kernel does not compute
            them; None: it never does.
        label_limit: ``(params, dtype) -> the largest label the kernel takes, or None``: for values that grow without
            bound in the label (DCG's undivided ``2^label - 1``), which the value checks then refuse.
        value_problems: ``(ranking, params) -> flags or None``: the value checks of the kernel's own parameters
            (bpref's judged counts), :data:`~torchrank.functional._inputs.VALUE_PROBLEMS`' flags on the device.
    """

    def __init__(
        self,
        kernel: Kernel,
        *,
        fused: Rule | None = None,
        label_limit: Callable[[dict, torch.dtype], float | None] | None = None,
        value_problems: Callable[..., Tensor | None] | None = None,
    ) -> None:
        functools.update_wrapper(self, kernel)  # inspect.signature follows __wrapped__: the kernel's parameters
        self.kernel = kernel
        self.fused = fused
        self.label_limit = label_limit
        self.value_problems = value_problems

    def __call__(self, ranking: object, ks: Sequence[int | None], **params: object) -> tuple[Tensor, Tensor]:
        return self.kernel(ranking, ks, **params)

    def __reduce__(self) -> str:
        return self.__qualname__  # pickled by reference, as the function it replaces in its module

    def __repr__(self) -> str:
        return f"<measure {self.kernel.__module__}.{self.kernel.__qualname__}>"


def measure(
    *,
    fused: Rule | int | None = None,
    label_limit: Callable[[dict, torch.dtype], float | None] | None = None,
    value_problems: Callable[..., Tensor | None] | None = None,
) -> Callable[[Kernel], Measure]:
    """Declare the kernel this decorates (see :class:`Measure`); ``fused`` may be the code of a column the fused
    kernel computes only without params.

    Example:
        >>> from torchrank.functional._fused_columns import PRECISION
        >>> @measure(fused=PRECISION)
        ... def _my_precision(r, ks, adaptive_k=False):
        ...     ...
        >>> fused_columns(_my_precision, [5, None], {}), fused_columns(_my_precision, [5], {"adaptive_k": True})
        ([Column(code=0, k=5, p=0.0, top=0.0), Column(code=0, k=0, p=0.0, top=0.0)], None)
    """
    if isinstance(fused, int):
        _check_code(fused)
    rule = _without_params(fused) if isinstance(fused, int) else fused
    return lambda kernel: Measure(kernel, fused=rule, label_limit=label_limit, value_problems=value_problems)


def _without_params(code: int) -> Rule:
    """The rule of a measure the fused kernel computes only without params: ``code`` then, else None."""
    return lambda params: code if not params else None


def _check_code(code: int) -> None:
    if code not in CODES:
        raise ValueError(f"The fused kernel has no column code {code!r} (its codes: {CODES}).")


def fused_code(kernel: Kernel, params: dict) -> int | None:
    """The fused kernel's column code for ``kernel`` with ``params``; None where it does not compute them (or
    ``kernel`` declares no fused rule)."""
    rule = kernel.fused if isinstance(kernel, Measure) else None
    code = None if rule is None else rule(params)
    if code is not None:
        _check_code(code)
    return code


def fused_columns(kernel: Kernel, ks: Sequence[int | None], params: dict) -> list[Column] | None:
    """The fused kernel's columns for ``kernel`` at cut-offs ``ks`` with ``params``; None where it does not compute
    them."""
    code = fused_code(kernel, params)
    if code is None:
        return None
    p, top = (float(params["p"]), float(params["max_label"] or 0.0)) if code == RBP else (0.0, 0.0)
    return [Column(code, 0 if k is None else k, p, top) for k in ks]
