"""The paired t-test and its effect size, Cohen's d of the paired differences."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from torchrank.stats._common import _differences
from torchrank.stats._distributions import student_t_sf


class TTestResult(NamedTuple):
    """Result of :func:`paired_t_test`: t statistic, two-sided p-value, degrees of freedom (``Q - 1``)."""

    statistic: Tensor
    pvalue: Tensor
    df: int


def paired_t_test(a: Tensor, b: Tensor) -> TTestResult:
    """Two-sided paired t-test of ``mean(a - b) = 0`` over the last dimension (``scipy.stats.ttest_rel``).

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.

    Returns:
        ``TTestResult(statistic, pvalue, df)``; ``statistic`` and ``pvalue`` have shape ``a.shape[:-1]``.
        Identical systems give ``t = 0, p = 1``; a constant non-zero difference gives ``t = +-inf,
        p = 0`` (when every difference is the same float64: one constant only up to rounding gives, as
        scipy, a huge finite ``t`` and a tiny ``p``); one query gives ``p = NaN`` unless its difference is 0;
        a NaN score gives NaN.

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55])
        >>> res = paired_t_test(a, b)
        >>> round(res.statistic.item(), 4), round(res.pvalue.item(), 4), res.df
        (1.9598, 0.1216, 4)
    """
    d = _differences(a, b)
    n = d.shape[-1]
    mean = d.mean(-1)
    # Sum of squares by hand: torch.std warns (and returns NaN) for a single query.
    ss = (d - mean[:, None]).square().sum(-1)
    se = (ss / max(n - 1, 1) / n).sqrt()
    zero = (d == 0).all(-1)
    t = torch.where(zero, torch.zeros_like(mean), mean / se)
    if n == 1:
        t = torch.where(zero, t, torch.full_like(t, math.nan))
    p = torch.where(zero, torch.ones_like(t), 2 * student_t_sf(t.abs(), max(n - 1, 1)))
    shape = a.shape[:-1]
    return TTestResult(t.reshape(shape), p.clamp(max=1).reshape(shape), n - 1)


def cohens_d(a: Tensor, b: Tensor) -> Tensor:
    """Cohen's d of paired scores: ``mean(a - b) / sd(a - b)`` over the last dimension (``d_z``).

    The standard deviation is the sample one (``Q - 1`` in the denominator), so ``d * sqrt(Q)`` is the
    paired t statistic. Identical systems give 0, a constant non-zero difference ``+-inf``, one query NaN
    (unless its difference is 0).

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55])
        >>> round(cohens_d(a, b).item(), 4)
        0.8765
    """
    d = _differences(a, b)
    n = d.shape[-1]
    mean = d.mean(-1)
    sd = ((d - mean[:, None]).square().sum(-1) / max(n - 1, 1)).sqrt()
    zero = (d == 0).all(-1)
    effect = torch.where(zero, torch.zeros_like(mean), mean / sd)
    if n == 1:
        effect = torch.where(zero, effect, torch.full_like(effect, math.nan))
    return effect.reshape(a.shape[:-1])
