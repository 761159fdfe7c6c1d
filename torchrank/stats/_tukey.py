"""Tukey's honestly significant difference over several runs, and the studentized range distribution by
Gauss-Legendre quadrature."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from torchrank.stats._distributions import _ndtr

# scipy's studentized_range switches to the infinite-df form (s = 1) from this many degrees of freedom
_RANGE_ASYMPTOTIC_DF = 100_000
_S_PANELS = 96  # Gauss-Legendre panels (16 nodes each) of the integral over s
_RANGE_CHUNK = 32  # studentized range values integrated at once


class TukeyResult(NamedTuple):
    """Result of :func:`tukey_hsd`.

    Attributes:
        statistic: ``[..., R, R]`` mean differences, row run minus column run.
        pvalue: ``[..., R, R]`` p-values of every pair (1 on the diagonal), adjusted for all pairs of one family.
        df: Degrees of freedom of the error variance, ``R (Q - 1)``.
    """

    statistic: Tensor
    pvalue: Tensor
    df: int


def _gauss_legendre(edges: Tensor, order: int) -> tuple[Tensor, Tensor]:
    """Nodes and weights ``[..., P * order]`` of Gauss-Legendre rules on the P panels between ``edges [..., P+1]``."""
    import numpy as np  # numpy's leggauss: the nodes are computed once per call, on the host

    x, w = np.polynomial.legendre.leggauss(order)
    x = torch.as_tensor(x, dtype=torch.float64, device=edges.device)
    w = torch.as_tensor(w, dtype=torch.float64, device=edges.device)
    left, width = edges[..., :-1, None], (edges[..., 1:] - edges[..., :-1])[..., None]
    nodes = left + width * (x + 1) / 2
    return nodes.flatten(-2), (width * w / 2).flatten(-2)


def _range_cdf_given_s(w: Tensor, k: Tensor) -> Tensor:
    """``P(range of k standard normals <= w)`` = ``k * int phi(z) (Phi(z) - Phi(z - w))^(k-1) dz``."""
    # phi(z) is below 1e-17 outside [-9, 9]; the integrand is smooth, so 8 panels of 24 nodes are exact to ~1e-15
    z, zw = _gauss_legendre(torch.linspace(-9, 9, 9, dtype=torch.float64, device=w.device), 24)
    phi = torch.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    inside = (_ndtr(z) - _ndtr(z - w[..., None])).clamp_min(0)
    return k[..., None].squeeze(-1) * (zw * phi * inside.pow(k[..., None] - 1)).sum(-1)


def studentized_range_sf(q: Tensor, k: Tensor | int, df: Tensor | float) -> Tensor:
    """Survival function ``P(Q > q)`` of the studentized range of ``k`` means with ``df`` degrees of freedom.

    ``Q = range(Z_1..Z_k) / S`` with standard normal ``Z`` and ``S^2 ~ chi2(df) / df``: the double integral
    over ``z`` and ``s`` by composite Gauss-Legendre rules in float64 (``scipy.stats.studentized_range.sf``
    integrates adaptively). Absolute error below 1e-11 (it is ``1 - cdf``; p-values below that read as 0).

    Example:
        >>> import torch
        >>> [round(p, 6) for p in studentized_range_sf(torch.tensor([0.0, 3.5, 10.0]), 3, 20).tolist()]
        [1.0, 0.055892, 2e-06]
    """
    q = torch.as_tensor(q, dtype=torch.float64)
    k = torch.as_tensor(k, dtype=torch.float64, device=q.device)
    df = torch.as_tensor(df, dtype=torch.float64, device=q.device)
    shape = torch.broadcast_shapes(q.shape, k.shape, df.shape)
    q, k, df = (x.reshape(-1) for x in torch.broadcast_tensors(q, k, df))
    # each value integrates over a [1536, 192] grid (2.4 MB): a few at a time keeps memory bounded
    parts = [
        _range_sf(q[i : i + _RANGE_CHUNK], k[i : i + _RANGE_CHUNK], df[i : i + _RANGE_CHUNK])
        for i in range(0, q.numel(), _RANGE_CHUNK)
    ]
    return (torch.cat(parts) if parts else q.clone()).reshape(shape)


def _range_sf(q: Tensor, k: Tensor, df: Tensor) -> Tensor:
    """:func:`studentized_range_sf` of 1-D ``q, k, df`` of equal length."""
    # s = sqrt(chi2 / df) has density df^(df/2) s^(df-1) exp(-df s^2 / 2) / (Gamma(df/2) 2^(df/2 - 1)): about 1
    # with spread 1 / sqrt(2 df), a half normal for df = 1; [lo, hi] holds all but ~1e-17 of it
    spread = 9 * (2 / df).sqrt()
    lo, hi = (1 - spread).clamp_min(0), 1 + spread
    # Where the range starts at 0 (df <= 162) the integrand in s steps from 0 to its full value near s = 3 / q,
    # which large q push towards 0: geometric panels (each 18% shorter) resolve the step wherever it falls
    unit = torch.linspace(0, 1, _S_PANELS + 1, dtype=torch.float64, device=q.device)
    linear = lo[..., None] + (hi - lo)[..., None] * unit
    geometric = hi[..., None] * torch.cat([unit[:1], 1e-8 ** (1 - unit[1:])])
    s, sw = _gauss_legendre(torch.where((lo == 0)[..., None], geometric, linear), 16)
    log_density = (
        (df / 2 * df.log() - torch.lgamma(df / 2) - (df / 2 - 1) * math.log(2))[..., None]
        + (df[..., None] - 1) * s.log()
        - df[..., None] * s * s / 2
    )
    inner = _range_cdf_given_s(q[..., None] * s, k[..., None].expand_as(s))
    cdf = (sw * log_density.exp() * inner).sum(-1)
    cdf = torch.where(df >= _RANGE_ASYMPTOTIC_DF, _range_cdf_given_s(q, k), cdf)
    return torch.where(q <= 0, torch.ones_like(cdf), (1 - cdf).clamp(0, 1))


def tukey_hsd(scores: Tensor) -> TukeyResult:
    """Tukey's honestly significant difference test over the runs of ``scores [..., R, Q]`` (``scipy.stats.tukey_hsd``).

    One-way analysis of variance: ``R`` runs (groups) of ``Q`` per-query scores each, the error variance
    ``MSE`` pooled over runs (``R (Q - 1)`` degrees of freedom); each pair's mean difference over
    ``sqrt(MSE / Q)`` is referred to the studentized range distribution of ``R`` means, so the p-values hold
    for all ``R (R - 1) / 2`` pairs together (family-wise error rate). Like scipy it treats the runs as
    independent samples: it ignores that every run answers the same queries (a paired test such as
    :func:`paired_t_test` uses that).

    Args:
        scores: ``[..., R, Q]`` per-query scores, at least two runs of at least two queries.

    Returns:
        ``TukeyResult(statistic, pvalue, df)``; ``statistic[..., i, j] = mean_i - mean_j``.

    Example:
        >>> import torch
        >>> scores = torch.tensor([[0.31, 0.52, 0.18, 0.44, 0.61],
        ...                        [0.25, 0.50, 0.20, 0.30, 0.55],
        ...                        [0.11, 0.22, 0.05, 0.19, 0.30]])
        >>> res = tukey_hsd(scores)
        >>> round(res.statistic[0, 2].item(), 4), round(res.pvalue[0, 2].item(), 4), res.df
        (0.238, 0.0559, 12)
    """
    if not isinstance(scores, Tensor):
        raise TypeError(f"Argument `scores` must be a tensor [..., runs, queries], got {type(scores).__name__}.")
    if scores.dim() < 2 or scores.shape[-2] < 2 or scores.shape[-1] < 2:
        raise ValueError(f"Argument `scores` must be [..., runs >= 2, queries >= 2], got {tuple(scores.shape)}.")
    x = scores.to(torch.float64)
    runs, n = x.shape[-2:]
    means = x.mean(-1)
    df = runs * (n - 1)
    mse = (x - means[..., None]).square().sum((-2, -1)) / df
    stand_err = (mse / n).sqrt()[..., None, None]
    diff = means[..., :, None] - means[..., None, :]
    same = diff == 0  # the diagonal, and identical runs: p = 1 also when MSE is 0
    statistic = torch.where(same, torch.zeros_like(diff), diff.abs() / stand_err)
    upper = torch.triu_indices(runs, runs, 1, device=x.device)
    p_upper = studentized_range_sf(statistic[..., upper[0], upper[1]], runs, df)
    p = torch.ones_like(diff)
    p[..., upper[0], upper[1]] = p_upper
    p[..., upper[1], upper[0]] = p_upper
    return TukeyResult(diff, torch.where(same, torch.ones_like(p), p), df)
