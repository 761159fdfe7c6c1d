"""The resampling tests: the paired randomisation (sign-flip) test and the bootstrap confidence interval, drawn in
chunks of about ``torchrank.stats._CHUNK_ELEMENTS`` (resample x query) elements."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from torchrank.stats._common import _check_generator, _check_resamples, _chunk, _differences
from torchrank.stats._distributions import _ndtr


class RandomizationResult(NamedTuple):
    """Result of :func:`randomization_test`.

    Attributes:
        statistic: The observed mean difference ``mean(a - b)``.
        pvalue: Two-sided p-value.
        n_resamples: Sign patterns evaluated (``2**Q`` when exact).
        exact: True when every sign pattern was enumerated.
    """

    statistic: Tensor
    pvalue: Tensor
    n_resamples: int
    exact: bool


class BootstrapResult(NamedTuple):
    """Result of :func:`bootstrap_ci`.

    Attributes:
        low: Lower end of the confidence interval of the mean difference.
        high: Upper end.
        statistic: The observed mean difference ``mean(a - b)``.
        standard_error: Standard deviation of the bootstrap distribution (``ddof=1``, as scipy).
        distribution: The bootstrap means ``[..., n_resamples]`` when asked for, else None.
    """

    low: Tensor
    high: Tensor
    statistic: Tensor
    standard_error: Tensor
    distribution: Tensor | None


def _sign_chunks(n: int, n_resamples: int, exact: bool, generator: torch.Generator | None, device: torch.device):
    """Yield ``[chunk, Q]`` float64 matrices of +-1 sign patterns (all ``2**Q`` of them when ``exact``)."""
    step = _chunk(n)
    if exact:
        bits = torch.arange(n, device=device)
        for start in range(0, 2**n, step):
            codes = torch.arange(start, min(start + step, 2**n), device=device)
            yield ((codes[:, None] >> bits) & 1).to(torch.float64) * 2 - 1
        return
    # One random byte gives 8 signs through a [256, 8] table: a third of the time of one draw per sign on CPU.
    table = ((torch.arange(256, device=device)[:, None] >> torch.arange(8, device=device)) & 1).to(torch.float64)
    table = table * 2 - 1
    width = (n + 7) // 8
    for start in range(0, n_resamples, step):
        size = min(step, n_resamples - start)
        draws = torch.randint(0, 256, (size * width,), generator=generator, device=device)
        yield table.index_select(0, draws).view(size, width * 8)[:, :n]


def randomization_test(
    a: Tensor,
    b: Tensor,
    n_resamples: int = 10_000,
    *,
    generator: torch.Generator | None = None,
) -> RandomizationResult:
    """Two-sided paired randomisation test of the mean difference ``mean(a - b)``.

    Under the null hypothesis the labels "a" and "b" of each query are exchangeable, so every sign
    pattern of the differences is equally likely. The null distribution is the mean of ``s * d`` over
    ``n_resamples`` random sign vectors ``s`` (shared by all comparisons of a batch), or over all ``2**Q``
    of them when ``2**Q <= n_resamples`` (exact test). The p-value follows
    ``scipy.stats.permutation_test(..., permutation_type="samples")``: twice the smaller one-sided
    p-value, clipped to 1; Monte-Carlo p-values count the observed pattern (``(k + 1) / (n + 1)``), so
    they are never 0. Null means within 1e-12 times ``mean(|a - b|)`` of the observed mean count as ties,
    so that means equal in theory but not in floating point are not missed. A NaN or infinite difference makes
    the p-value of its comparison NaN, as the other tests of this package (``scipy.stats.permutation_test``
    returns 0 there, which would read as highly significant): signs flipped on an infinite difference give
    means of ``+-inf`` or NaN, no null distribution to compare with.

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.
        n_resamples: Random sign patterns to draw (chunked, so memory does not grow with it).
        generator: Random generator on the device of the scores, for reproducible p-values.

    Returns:
        ``RandomizationResult(statistic, pvalue, n_resamples, exact)``.

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55])
        >>> res = randomization_test(a, b)  # 2**5 = 32 patterns <= 10000: exact
        >>> round(res.pvalue.item(), 4), res.n_resamples, res.exact
        (0.1875, 32, True)
        >>> res = randomization_test(a.repeat(4), b.repeat(4), 2000, generator=torch.Generator().manual_seed(0))
        >>> res.exact, 0.0 < res.pvalue.item() < 0.01
        (False, True)
    """
    _check_resamples(n_resamples)
    d = _differences(a, b)
    _check_generator(generator, d.device)
    rows, n = d.shape
    observed = d.mean(-1)
    # Such a row is counted on zeros meanwhile, so that no NaN enters the sums; its p-value is NaN below.
    undefined = ~d.isfinite().all(-1)
    d = torch.where(undefined[:, None], 0.0, d)
    # Tolerance relative to the scale of the differences (not of the observed mean, which may be ~0):
    # sign-flipped sums carry rounding errors of that scale.
    gamma = 1e-12 * d.abs().mean(-1)
    exact = n < 63 and 2**n <= n_resamples
    greater = torch.zeros(rows, dtype=torch.int64, device=d.device)
    less = torch.zeros_like(greater)
    for signs in _sign_chunks(n, n_resamples, exact, generator, d.device):
        null = d @ signs.T / n  # [rows, chunk]: one matmul for every comparison and resample
        greater += (null >= (observed - gamma)[:, None]).sum(-1)
        less += (null <= (observed + gamma)[:, None]).sum(-1)
    total, extra = (2**n, 0) if exact else (n_resamples, 1)
    p = (torch.minimum(greater, less) + extra).to(torch.float64) / (total + extra) * 2
    p = torch.where(undefined, math.nan, p)
    shape = a.shape[:-1]
    return RandomizationResult(observed.reshape(shape), p.clamp(max=1).reshape(shape), total, exact)


def _bootstrap_means(d: Tensor, n_resamples: int, generator: torch.Generator | None) -> Tensor:
    """``[M, n_resamples]`` means of ``d`` over query resamples drawn with replacement (shared by all rows)."""
    rows, n = d.shape
    out = torch.empty(rows, n_resamples, dtype=torch.float64, device=d.device)
    # The chunk size depends on Q only, so a row draws the same resamples whatever else is in the batch
    # (the [rows, chunk] product is never larger than `out`).
    step = _chunk(n)
    for start in range(0, n_resamples, step):
        size = min(step, n_resamples - start)
        picks = torch.randint(0, n, (size, n), generator=generator, device=d.device)
        # Multiplicity of each query in each resample: the mean is then one matmul for all rows.
        counts = torch.zeros(size, n, dtype=torch.float64, device=d.device)
        counts.scatter_add_(1, picks, torch.ones_like(counts))
        out[:, start : start + size] = d @ counts.T / n
    return out


def _quantile_sorted(values: Tensor, q: Tensor) -> Tensor:
    """Row-wise linear-interpolation quantile (numpy's default) of row-sorted ``values`` at levels ``q``."""
    n = values.shape[-1]
    pos = (q * (n - 1)).clamp(0, n - 1)
    lo = pos.floor().long()
    hi = (lo + 1).clamp(max=n - 1)
    frac = pos - lo
    v_lo = values.gather(-1, lo[:, None])[:, 0]
    v_hi = values.gather(-1, hi[:, None])[:, 0]
    return v_lo + frac * (v_hi - v_lo)


def _bca_levels(d: Tensor, observed: Tensor, boot: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """Quantile levels of the BCa interval (Efron and Tibshirani 1993, eq. 14.9-14.15), as scipy."""
    n_boot = boot.shape[-1]
    below = (boot < observed[:, None]).sum(-1) + (boot <= observed[:, None]).sum(-1)
    # Keep the bias correction finite when the observed mean lies outside every bootstrap mean (scipy
    # returns NaN there).
    share = (below.to(torch.float64) / (2 * n_boot)).clamp(0.5 / n_boot, 1 - 0.5 / n_boot)
    z0 = torch.special.ndtri(share)
    # Jackknife acceleration; for the mean, (n-1)(mean of leave-one-out means - i-th one) = d_i - mean.
    u = d - observed[:, None]
    den = u.square().sum(-1).pow(1.5)
    accel = torch.where(den > 0, u.pow(3).sum(-1) / (6 * den), torch.zeros_like(den))
    z = torch.special.ndtri(torch.tensor(alpha, dtype=torch.float64, device=d.device))
    levels = []
    for za in (z, -z):
        num = z0 + za
        levels.append(_ndtr(z0 + num / (1 - accel * num)))
    return levels[0], levels[1]


def bootstrap_ci(
    a: Tensor,
    b: Tensor,
    n_resamples: int = 10_000,
    *,
    confidence_level: float = 0.95,
    method: str = "percentile",
    generator: torch.Generator | None = None,
    return_distribution: bool = False,
) -> BootstrapResult:
    """Two-sided bootstrap confidence interval of the mean difference ``mean(a - b)``.

    Queries are resampled with replacement (the same resamples for every comparison of a batch, which
    keeps the pairing between systems). ``method="percentile"`` takes the ``alpha/2`` and ``1 - alpha/2``
    quantiles of the bootstrap means (linear interpolation, as numpy and ``scipy.stats.bootstrap``);
    ``method="bca"`` shifts these levels by a bias correction and a jackknife acceleration, as
    ``scipy.stats.bootstrap(method="BCa")``. A distribution without spread (one query, identical
    systems, a constant difference) gives the interval ``[mean, mean]``.

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.
        n_resamples: Bootstrap resamples (drawn in chunks).
        confidence_level: Coverage of the interval, in (0, 1).
        method: ``"percentile"`` or ``"bca"``.
        generator: Random generator on the device of the scores.
        return_distribution: Also return the bootstrap means ``[..., n_resamples]``.

    Returns:
        ``BootstrapResult(low, high, statistic, standard_error, distribution)``.

    Example:
        >>> import torch
        >>> a = torch.tensor([0.31, 0.52, 0.18, 0.44, 0.61])
        >>> b = torch.tensor([0.25, 0.50, 0.20, 0.30, 0.55])
        >>> res = bootstrap_ci(a, b, 20_000, generator=torch.Generator().manual_seed(0))
        >>> [round(v.item(), 3) for v in (res.statistic, res.low, res.high)]
        [0.052, 0.012, 0.1]
        >>> bootstrap_ci(a, a).low.item(), bootstrap_ci(a, a).high.item()
        (0.0, 0.0)
    """
    _check_resamples(n_resamples)
    if not isinstance(confidence_level, (int, float)) or not 0 < confidence_level < 1:
        raise ValueError(f"Argument `confidence_level` must be in (0, 1), got {confidence_level!r}.")
    if method not in ("percentile", "bca"):
        raise ValueError(f"Argument `method` must be 'percentile' or 'bca', got {method!r}.")
    d = _differences(a, b)
    _check_generator(generator, d.device)
    observed = d.mean(-1)
    boot = _bootstrap_means(d, n_resamples, generator)
    alpha = (1 - confidence_level) / 2
    if method == "bca":
        lo_q, hi_q = _bca_levels(d, observed, boot, alpha)
    else:
        lo_q = torch.full_like(observed, alpha)
        hi_q = torch.full_like(observed, 1 - alpha)
    ordered = boot.sort(-1).values
    low, high = _quantile_sorted(ordered, lo_q), _quantile_sorted(ordered, hi_q)
    # No spread: every bootstrap mean is the same number; say so exactly rather than through rounding.
    flat = ordered[:, 0] == ordered[:, -1]
    low = torch.where(flat, ordered[:, 0], low)
    high = torch.where(flat, ordered[:, 0], high)
    se = boot.std(-1, correction=1) if n_resamples > 1 and boot.numel() else torch.zeros_like(observed)
    shape = a.shape[:-1]
    dist = boot.reshape(*shape, n_resamples) if return_distribution else None
    return BootstrapResult(low.reshape(shape), high.reshape(shape), observed.reshape(shape), se.reshape(shape), dist)
