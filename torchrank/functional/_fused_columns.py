"""What the triton backend's fused kernel (:mod:`torchrank.functional.backends._triton.kernel`) writes: its output
columns, one measure code each, and which measures it computes, each declared by its measure module next to the kernel
function (:func:`fused_as`): this module sits below the measures and the pipeline, imports neither (nor triton:
importing torchrank does not load the compiler), and answers the pipeline's "does the fused kernel cover this request?".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

# what a column of the kernel's output holds (the kernel's constexpr codes, eight bits each)
PRECISION, RECALL, F1, SUCCESS, AP, RR, DCG, DCG_EXP, NDCG, NDCG_EXP, ERR, RPREC, FRP, MEAN_RANK, RBP = range(15)
# the columns whose empty query is one without a relevant item (binary); the others': no positive label (graded)
BINARY_CODES = (PRECISION, RECALL, F1, SUCCESS, AP, RR, RPREC, FRP, MEAN_RANK)

# a measure's rule: its column code for the measure's params, or None where the kernel does not take them
Rule = Callable[[dict], int | None]
_RULES: dict[object, Rule] = {}  # kernel function -> its rule, filled by fused_as as the measure modules load

M = TypeVar("M")


class Column(NamedTuple):
    """One output column: a measure code, its cut-off (0: the whole list) and, for RBP, the persistence and the top
    of the label scale (0: each query's largest label)."""

    code: int
    k: int
    p: float = 0.0
    top: float = 0.0


def fused_as(rule: Rule | int) -> Callable[[M], M]:
    """Declare that the fused kernel computes the measure whose kernel function this decorates (returned as it is):
    ``rule`` gives its column code for its params (None: params the kernel does not take), or is the code of a
    measure the kernel computes only without params.

    Example:
        >>> @fused_as(PRECISION)
        ... def _my_precision(r, ks):
        ...     ...
        >>> fused_columns(_my_precision, [5, None], {}), fused_columns(_my_precision, [5], {"adaptive_k": True})
        ([Column(code=0, k=5, p=0.0, top=0.0), Column(code=0, k=0, p=0.0, top=0.0)], None)
    """

    def declare(measure: M) -> M:
        _RULES[measure] = rule if callable(rule) else _without_params(rule)
        return measure

    return declare


def _without_params(code: int) -> Rule:
    """The rule of a measure the kernel computes only without params: ``code`` then, else None."""
    return lambda params: code if not params else None


def fused_columns(measure: object, ks: Sequence[int | None], params: dict) -> list[Column] | None:
    """The kernel's columns for ``measure`` (a kernel of :mod:`torchrank.functional`) at cut-offs ``ks`` with
    ``params``; None where the fused kernel does not compute it."""
    code = _code_of(measure, params)
    if code is None:
        return None
    p, top = (float(params["p"]), float(params["max_label"] or 0.0)) if code == RBP else (0.0, 0.0)
    return [Column(code, 0 if k is None else k, p, top) for k in ks]


def _code_of(measure: object, params: dict) -> int | None:
    rule = _RULES.get(measure)
    return None if rule is None else rule(params)
