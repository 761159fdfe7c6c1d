"""The Wilcoxon signed-rank test (``scipy.stats.wilcoxon``): exact, by enumerated sign patterns, or normal."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from torchrank.stats._common import _differences
from torchrank.stats._distributions import _ndtr
from torchrank.stats._resampling import _sign_chunks

_ZERO_METHODS = ("wilcox", "pratt", "zsplit")
_WILCOXON_METHODS = ("auto", "exact", "asymptotic", "permutation")
# scipy's "auto": the exact null distribution up to this many queries, the normal approximation above
_EXACT_MAX = 50
# with ties or zeros and at most this many queries, "auto" enumerates every sign pattern (scipy: 2**13 < 9999)
_PERMUTATION_AUTO_MAX = 13
_PERMUTATION_MAX = 24  # 2**24 patterns: the most "permutation" enumerates


class WilcoxonResult(NamedTuple):
    """Result of :func:`wilcoxon`.

    Attributes:
        statistic: ``min(R+, R-)``, the smaller signed-rank sum (scipy's two-sided statistic).
        pvalue: Two-sided p-value.
        zstatistic: ``-|z|`` of the normal approximation (continuity-corrected when asked), as scipy's
            ``zstatistic``; NaN where it is undefined (no non-zero difference).
        exact: True where the p-value comes from an exact null distribution (the signed-rank
            distribution, or every sign pattern enumerated), False where from the normal approximation.
    """

    statistic: Tensor
    pvalue: Tensor
    zstatistic: Tensor
    exact: Tensor


def _average_ranks(values: Tensor) -> tuple[Tensor, Tensor]:
    """Row-wise average ranks (1-based) of ``values [M, Q]`` and the size of each element's tie group."""
    n = values.shape[-1]
    ordered, order = values.sort(dim=-1, stable=True)
    pos = torch.arange(n, device=values.device).expand_as(order)
    differs = ordered[:, 1:] != ordered[:, :-1]
    edge = torch.ones(values.shape[0], 1, dtype=torch.bool, device=values.device)
    start, end = torch.cat([edge, differs], 1), torch.cat([differs, edge], 1)
    first = torch.where(start, pos, 0).cummax(1).values
    last = torch.where(end, pos, n - 1).flip(1).cummin(1).values.flip(1)
    rank = torch.empty_like(values, dtype=torch.float64).scatter_(1, order, (first + last).to(torch.float64) / 2 + 1)
    size = torch.empty_like(rank).scatter_(1, order, (last - first + 1).to(torch.float64))
    return rank, size


def _signed_rank_tails(counts: Tensor, r_plus: Tensor) -> Tensor:
    """``2 min(P(T >= floor(r+)), P(T <= ceil(r+)))`` under the exact null distribution of the signed-rank
    sum ``T`` of ``counts`` non-zero differences (no ties), clipped to 1, as scipy's ``method="exact"``."""
    needed = sorted(set(counts.tolist()))
    width = max(needed) * (max(needed) + 1) // 2 + 1
    pmfs = torch.zeros(len(needed), width, dtype=torch.float64, device=r_plus.device)
    pmf = torch.ones(1, dtype=torch.float64, device=r_plus.device)
    index = {}
    for k in range(max(needed) + 1):  # T_k = T_{k-1} + k with probability 1/2: a loop over ranks, not queries
        if k:
            grown = torch.zeros(k * (k + 1) // 2 + 1, dtype=torch.float64, device=r_plus.device)
            grown[: pmf.numel()] += pmf * 0.5
            grown[-pmf.numel() :] += pmf * 0.5
            pmf = grown
        if k in needed:
            index[k] = len(index)
            pmfs[index[k], : pmf.numel()] = pmf
    cdf = pmfs.cumsum(1)
    sf = pmfs.flip(1).cumsum(1).flip(1)  # summed from the tail: small p-values keep their digits
    row = torch.tensor([index[c] for c in counts.tolist()], device=r_plus.device, dtype=torch.long)
    hi = r_plus.ceil().long().clamp(0, width - 1)
    lo = r_plus.floor().long().clamp(0, width - 1)
    p = 2 * torch.minimum(sf[row, lo], cdf[row, hi])
    return p.clamp(max=1)


def _sign_flip_p(weights: Tensor, base: Tensor, observed: Tensor) -> Tensor:
    """Two-sided p of ``observed`` against ``base + weights . [s > 0]`` over all ``2**Q`` sign patterns ``s``, as
    ``scipy.stats.permutation_test`` counts them (exactly, with its relative tolerance for ties)."""
    rows, n = weights.shape
    gamma = 100 * torch.finfo(torch.float64).eps * observed.abs()
    greater = torch.zeros(rows, dtype=torch.int64, device=weights.device)
    less = torch.zeros_like(greater)
    for signs in _sign_chunks(n, 2**n, True, None, weights.device):
        null = base[:, None] + weights @ ((signs + 1) / 2).T
        greater += (null >= (observed - gamma)[:, None]).sum(-1)
        less += (null <= (observed + gamma)[:, None]).sum(-1)
    return (2 * torch.minimum(greater, less).to(torch.float64) / 2**n).clamp(max=1)


def wilcoxon(
    a: Tensor,
    b: Tensor,
    *,
    zero_method: str = "wilcox",
    correction: bool = False,
    method: str = "auto",
) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test of the paired differences ``a - b`` (``scipy.stats.wilcoxon``).

    The absolute differences are ranked (average ranks for ties); ``R+`` and ``R-`` sum the ranks of the
    positive and negative differences. Zero differences are dropped (``zero_method="wilcox"``, default),
    ranked but not counted (``"pratt"``, with Cureton's adjustment of the normal approximation) or split
    between ``R+`` and ``R-`` (``"zsplit"``). The p-value comes from

    * ``method="exact"``: the exact distribution of ``R+`` over the non-zero differences (exact without
      ties; with ties ``R+`` is rounded towards the centre, as scipy);
    * ``"asymptotic"``: the normal approximation with mean ``n(n+1)/4`` and the tie-corrected variance
      ``(n(n+1)(2n+1) - sum(t^3 - t) / 2) / 24``, ``correction=True`` adding the continuity correction;
    * ``"permutation"``: every sign pattern of the differences enumerated (at most 24 queries);
    * ``"auto"`` (default), as scipy decides, for each comparison (row) on its own: exact for at most 50
      queries without zeros and ties, every sign pattern for at most 13 queries with them, else asymptotic.

    Identical systems (every difference 0) give ``p = 1`` (scipy: 1 or NaN, depending on the method). A NaN
    score makes the statistic, the p-value and ``zstatistic`` of its comparison NaN and ``exact`` False, as
    scipy's default ``nan_policy="propagate"`` and the other tests of this package: a p-value computed without
    that query would test other data than asked. Infinite differences are ranked as the largest, as scipy.

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.
        zero_method: ``"wilcox"``, ``"pratt"`` or ``"zsplit"``.
        correction: Continuity correction of the normal approximation.
        method: ``"auto"``, ``"exact"``, ``"asymptotic"`` or ``"permutation"``.

    Returns:
        ``WilcoxonResult(statistic, pvalue, zstatistic, exact)``, each of shape ``a.shape[:-1]``.

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61, 0.47])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55, 0.33])
        >>> res = wilcoxon(a, b)  # no ties, no zeros, 6 queries: the exact distribution
        >>> res.statistic.item(), round(res.pvalue.item(), 4), res.exact.item()
        (2.0, 0.0938, True)
        >>> round(wilcoxon(a, b, method="asymptotic", correction=True).pvalue.item(), 4)
        0.0917
    """
    if zero_method not in _ZERO_METHODS:
        raise ValueError(f"Argument `zero_method` must be one of {_ZERO_METHODS}, got {zero_method!r}.")
    if method not in _WILCOXON_METHODS:
        raise ValueError(f"Argument `method` must be one of {_WILCOXON_METHODS}, got {method!r}.")
    if not isinstance(correction, bool):
        raise ValueError(f"Argument `correction` must be a bool, got {correction!r}.")
    d = _differences(a, b)
    n = d.shape[-1]
    if method == "permutation" and n > _PERMUTATION_MAX:
        raise ValueError(f"method='permutation' enumerates 2**Q sign patterns: at most {_PERMUTATION_MAX} queries.")
    # A NaN difference makes its row NaN (scipy's default nan_policy="propagate"); the row is computed as
    # identical systems meanwhile, so that no NaN reaches the ranks and exact tails shared by the batch.
    missing = d.isnan().any(-1)
    d = torch.where(missing[:, None], 0.0, d)
    zeros = d == 0
    sign = d.sign()
    # scipy drops zeros under "wilcox" by ranking them as NaN (last, outside every count); NaN, not +inf, so that
    # they never tie with an infinite difference
    absolute = torch.where(zeros, math.nan, d.abs()) if zero_method == "wilcox" else d.abs()
    rank, ties = _average_ranks(absolute)
    counted = ~zeros if zero_method == "wilcox" else torch.ones_like(zeros)
    r_plus = (rank * (d > 0)).sum(-1)
    r_minus = (rank * (d < 0)).sum(-1)
    if zero_method == "zsplit":
        half_zero = (rank * zeros).sum(-1) / 2
        r_plus, r_minus = r_plus + half_zero, r_minus + half_zero
    count = counted.sum(-1).to(torch.float64)
    mean = count * (count + 1) / 4
    var = count * (count + 1) * (2 * count + 1)
    tie_groups = counted & ~zeros if zero_method == "pratt" else counted  # Pratt: zeros leave the tie term
    if zero_method == "pratt":
        n_zero = zeros.sum(-1).to(torch.float64)
        mean = mean - n_zero * (n_zero + 1) / 4
        var = var - n_zero * (n_zero + 1) * (2 * n_zero + 1)
    tie_term = ((ties.square() - 1) * tie_groups).sum(-1)  # a group of t adds t (t^2 - 1) = t^3 - t
    se = ((var - tie_term / 2) / 24).clamp_min(0).sqrt()
    z = (r_plus - mean) / se
    if correction:
        z = z - z.sign() * 0.5 / se
    p_normal = 2 * _ndtr(-z.abs())

    has_ties = ((ties > 1) & counted).any(-1)
    if method == "auto":
        use_exact = ~has_ties & ~zeros.any(-1) & (n <= _EXACT_MAX)
        use_perm = ~use_exact & torch.full_like(use_exact, n <= _PERMUTATION_AUTO_MAX)
    else:
        use_exact = torch.full_like(has_ties, method == "exact")
        use_perm = torch.full_like(has_ties, method == "permutation")
    p = p_normal
    if bool(use_exact.any()):
        p = torch.where(use_exact, _signed_rank_tails(count.long(), r_plus), p)
    if bool(use_perm.any()):
        # R+ after flipping signs s sums the ranks where s * sign(d) > 0 (zeros never count), plus zsplit's half
        # of the zero ranks: the negative differences' ranks, plus rank * sign(d) where s > 0
        zero_part = r_plus - (rank * (d > 0)).sum(-1)
        flipped = _sign_flip_p(rank * sign, zero_part + (rank * (d < 0)).sum(-1), r_plus)
        p = torch.where(use_perm, flipped, p)
    same = zeros.all(-1)
    p = torch.where(same, torch.ones_like(p), p)
    shape = a.shape[:-1]
    nan = torch.full_like(p, math.nan)
    return WilcoxonResult(
        torch.where(missing, nan, torch.minimum(r_plus, r_minus)).reshape(shape),
        torch.where(missing, nan, p).reshape(shape),
        torch.where(missing, nan, -z.abs()).reshape(shape),
        ((use_exact | use_perm | same) & ~missing).reshape(shape),
    )
