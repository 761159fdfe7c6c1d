"""Adjusted p-values for many tests: Holm, Bonferroni, Benjamini-Hochberg, and :func:`adjust` by name."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def _family(pvalues: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Flattened p-values, their NaN mask and the number of real ones (the size of the family).

    A value outside [0, 1] is no p-value (a statistic or a log p-value passed by mistake): it would be scaled
    into an adjusted "p-value" below 0 or change the ranks of the others, so it is refused. NaN is allowed:
    a test that could not be computed, left out of the family.
    """
    if not isinstance(pvalues, Tensor):
        raise TypeError(f"Argument `pvalues` must be a tensor, got {type(pvalues).__name__}.")
    flat = pvalues.reshape(-1)
    missing = flat.isnan()
    outside = flat[~missing & ((flat < 0) | (flat > 1))]
    if outside.numel():
        raise ValueError(
            f"Argument `pvalues` must hold p-values in [0, 1] (or NaN), got {outside.numel()} outside it, "
            f"from {outside.min().item():g} to {outside.max().item():g}."
        )
    return flat, missing, flat.numel() - missing.sum()


def holm(pvalues: Tensor) -> Tensor:
    """Holm-Bonferroni adjusted p-values over all elements of ``pvalues`` (one family of tests).

    The i-th smallest of m p-values is multiplied by ``m - i + 1``, then a running maximum keeps the
    order and the result is clipped to 1, as ``statsmodels.stats.multitest.multipletests(p, method="holm")``.
    Rejecting where the adjusted p-value is ``<= alpha`` controls the family-wise error rate at ``alpha``.
    NaN p-values (tests that could not be computed) stay NaN and are not counted in m.

    Example:
        >>> import torch
        >>> holm(torch.tensor([0.01, 0.04, 0.03, 0.005]))
        tensor([0.0300, 0.0600, 0.0600, 0.0200])
    """
    flat, missing, m = _family(pvalues)
    # NaNs sort last (as +inf) so they never lower the running maximum of the real p-values.
    order = torch.where(missing, torch.full_like(flat, math.inf), flat).argsort(stable=True)
    ranked = flat[order] * (m - torch.arange(flat.numel(), device=flat.device)).to(flat.dtype)
    adjusted = torch.empty_like(flat)
    adjusted[order] = ranked.cummax(0).values.clamp(max=1)
    return torch.where(missing, flat, adjusted).reshape(pvalues.shape)


def bonferroni(pvalues: Tensor) -> Tensor:
    """Bonferroni adjusted p-values: each of the m real p-values times m, clipped to 1.

    Controls the family-wise error rate at ``alpha`` under any dependence (as
    ``multipletests(method="bonferroni")``); Holm's procedure does the same and is never less powerful.
    NaN p-values stay NaN and are not counted in m.

    Example:
        >>> import torch
        >>> bonferroni(torch.tensor([0.01, 0.04, 0.03, 0.005]))
        tensor([0.0400, 0.1600, 0.1200, 0.0200])
    """
    flat, missing, m = _family(pvalues)
    return torch.where(missing, flat, (flat * m).clamp(max=1)).reshape(pvalues.shape)


def benjamini_hochberg(pvalues: Tensor) -> Tensor:
    """Benjamini-Hochberg adjusted p-values (false discovery rate; ``scipy.stats.false_discovery_control``).

    The i-th smallest of m p-values becomes ``min over j >= i of p_(j) m / j``, clipped to 1. Rejecting where
    the adjusted p-value is ``<= alpha`` keeps the expected share of false discoveries at ``alpha`` for
    independent or positively dependent tests. NaN p-values stay NaN and are not counted in m.

    Example:
        >>> import torch
        >>> benjamini_hochberg(torch.tensor([0.01, 0.04, 0.03, 0.005]))
        tensor([0.0200, 0.0400, 0.0400, 0.0200])
    """
    flat, missing, m = _family(pvalues)
    order = torch.where(missing, torch.full_like(flat, math.inf), flat).argsort(stable=True)
    rank = torch.arange(1, flat.numel() + 1, device=flat.device).to(flat.dtype)
    scaled = torch.where(missing[order], torch.full_like(flat, math.inf), flat[order] * m / rank)
    adjusted = torch.empty_like(flat)
    adjusted[order] = scaled.flip(0).cummin(0).values.flip(0).clamp(max=1)  # NaNs sort last: they never lower it
    return torch.where(missing, flat, adjusted).reshape(pvalues.shape)


#: Multiple-comparison corrections by name (``compare --correction``); ``"none"`` keeps the p-values.
CORRECTIONS = ("holm", "bonferroni", "bh", "none")


def adjust(pvalues: Tensor, method: str) -> Tensor:
    """Adjusted p-values of one family of tests by ``method`` in :data:`CORRECTIONS` (``"bh"``: Benjamini-Hochberg).

    Every method, ``"none"`` included, refuses values outside [0, 1] with a ValueError; NaN stays out of the family.

    Example:
        >>> import torch
        >>> adjust(torch.tensor([0.01, 0.04]), "bh"), adjust(torch.tensor([0.01, 0.04]), "none")
        (tensor([0.0200, 0.0400]), tensor([0.0100, 0.0400]))
    """
    if method not in CORRECTIONS:
        raise ValueError(f"Argument `method` must be one of {CORRECTIONS}, got {method!r}.")
    if method == "none":
        _family(pvalues)
        return pvalues
    return {"holm": holm, "bonferroni": bonferroni, "bh": benjamini_hochberg}[method](pvalues)
