"""Paired significance tests for comparing per-query scores of two systems, in torch.

Every test takes two tensors ``a`` and ``b`` of per-query scores with the queries on the last dimension
(``[Q]``, or ``[..., Q]`` to run many comparisons at once, e.g. ``[measures, Q]`` or
``[run_pairs, measures, Q]``) and tests the mean of the paired differences ``d = a - b``. All work is
vectorised over queries, comparisons and resamples on the device of the inputs, in float64.

* :func:`paired_t_test`: Student's paired t-test, two-sided (``scipy.stats.ttest_rel``).
* :func:`randomization_test`: paired randomisation (sign-flip permutation) test of the mean difference
  (``scipy.stats.permutation_test(..., permutation_type="samples")``); exact when ``2**Q <= n_resamples``.
* :func:`bootstrap_ci`: bootstrap confidence interval of the mean difference, percentile or BCa
  (``scipy.stats.bootstrap``).
* :func:`holm`: Holm-Bonferroni adjusted p-values (``statsmodels`` ``multipletests(method="holm")``).

Degenerate inputs have exact answers instead of NaNs and warnings: identical systems (every ``d`` is 0)
give p = 1 and the interval ``[0, 0]``; a constant non-zero difference gives t-test p = 0; a single query
gives t-test p = NaN (no variance estimate; unless the difference is 0) and a randomisation p of 1.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "BootstrapResult",
    "RandomizationResult",
    "TTestResult",
    "bootstrap_ci",
    "holm",
    "paired_t_test",
    "randomization_test",
    "student_t_sf",
]

# Resamples are drawn in chunks of about this many (resample x query) elements, so memory stays bounded
# (~32 MB of float64 per chunk) whatever n_resamples and Q are.
_CHUNK_ELEMENTS = 1 << 22
# From this many degrees of freedom on, the t tail uses Hill's expansion instead of the continued fraction.
_HILL_DF = 10_000


class TTestResult(NamedTuple):
    """Result of :func:`paired_t_test`: t statistic, two-sided p-value, degrees of freedom (``Q - 1``)."""

    statistic: Tensor
    pvalue: Tensor
    df: int


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


# ----------------------------------------------------------------------------------------------------
# Student t distribution (torch has no betainc, so the regularised incomplete beta is computed here)
# ----------------------------------------------------------------------------------------------------


def _nonzero(x: Tensor) -> Tensor:
    # Lentz's method replaces exact zeros by a tiny number so that no division by zero happens.
    return torch.where(x.abs() < 1e-300, torch.full_like(x, 1e-300), x)


def _beta_continued_fraction(a: Tensor, b: Tensor, x: Tensor, max_iter: int) -> Tensor:
    """Continued fraction of I_x(a, b) (Numerical Recipes ``betacf``, modified Lentz), elementwise."""
    qab, qap, qam = a + b, a + 1, a - 1
    c = torch.ones_like(x)
    d = _nonzero(1 - qab * x / qap).reciprocal()
    h = d
    for m in range(1, max_iter + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = _nonzero(1 + aa * d).reciprocal()
        c = _nonzero(1 + aa / c)
        h = h * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = _nonzero(1 + aa * d).reciprocal()
        c = _nonzero(1 + aa / c)
        delta = d * c
        h = h * delta
        # One host sync every 8 steps; NaN entries compare False and so never hold the loop up.
        if m % 8 == 0 and not bool(((delta - 1).abs() > 1e-15).any()):
            break
    return h


def _lgamma_ratio(a: Tensor, b: Tensor) -> Tensor:
    """``lgamma(a + b) - lgamma(a)`` without the cancellation of two large lgammas when ``a`` is large."""
    # Stirling: lgamma(x) = (x - 1/2) log x - x + log(2 pi) / 2 + c(x); the series c is exact to ~1e-16
    # for x >= 20. For 10^5 queries, plain lgamma differences lose 6 digits of the p-value.
    big = a >= 20
    x = torch.where(big, a, torch.full_like(a, 20.0))

    def c(z: Tensor) -> Tensor:
        z2 = z * z
        return (1 / 12 - (1 / 360 - (1 / 1260 - 1 / (1680 * z2)) / z2) / z2) / z

    stirling = (x - 0.5) * torch.log1p(b / x) + b * torch.log(x + b) - b + c(x + b) - c(x)
    return torch.where(big, stirling, torch.lgamma(a + b) - torch.lgamma(a))


def _betainc(a: Tensor, b: Tensor, x: Tensor, y: Tensor, log_x: Tensor, log_y: Tensor) -> Tensor:
    """Regularised incomplete beta I_x(a, b), given ``y = 1 - x`` and both logarithms at full precision."""
    log_front = _lgamma_ratio(a, b) - torch.lgamma(b) + a * log_x + b * log_y
    front = torch.exp(log_front)
    # The fraction converges fast for x < (a + 1) / (a + b + 2); otherwise use I_x(a, b) = 1 - I_y(b, a).
    direct = x < (a + 1) / (a + b + 2)
    pa, pb, px = torch.where(direct, a, b), torch.where(direct, b, a), torch.where(direct, x, y)
    # The fraction needs O(sqrt(max(a, b))) terms.
    largest = int(torch.maximum(a, b).max().clamp(max=1e12)) if a.numel() else 0
    max_iter = 64 + 8 * math.isqrt(largest + 1)
    part = front * _beta_continued_fraction(pa, pb, px, max_iter) / pa
    return torch.where(direct, part, 1 - part)


def student_t_sf(t: Tensor, df: Tensor | float) -> Tensor:
    """Survival function ``P(T > t)`` of Student's t distribution with ``df`` degrees of freedom.

    Computed in float64 through the regularised incomplete beta function (no scipy); small tail
    probabilities keep their relative precision (``1e-300`` is not rounded to 0).

    Example:
        >>> import torch
        >>> student_t_sf(torch.tensor([0.0, 2.0, -2.0, float("inf")]), 10)
        tensor([0.5000, 0.0367, 0.9633, 0.0000], dtype=torch.float64)
    """
    t = torch.as_tensor(t, dtype=torch.float64)
    df = torch.as_tensor(df, dtype=torch.float64, device=t.device)
    t, df = torch.broadcast_tensors(t, df)
    ratio = t * t / df
    # P(|T| > |t|) = I_x(df/2, 1/2) with x = df / (df + t^2) = 1 / (1 + ratio) and y = 1 - x; x, y and
    # their logs are written so that t = 0 and t = inf give exact 0s and 1s and x near 1 keeps its digits.
    x, y = 1 / (1 + ratio), 1 / (1 + 1 / ratio)
    log_x, log_y = -torch.log1p(ratio), -torch.log1p(1 / ratio)
    large = df >= _HILL_DF
    half_df = torch.where(large, torch.ones_like(df), df / 2)  # large df never reach the fraction
    tail = 0.5 * _betainc(half_df, torch.full_like(df, 0.5), x, y, log_x, log_y)  # P(T > |t|)
    tail = torch.where(large, _hill_tail(ratio, df), tail)
    return torch.where(t >= 0, tail, 1 - tail)


def _hill_tail(ratio: Tensor, df: Tensor) -> Tensor:
    """``P(T > |t|)`` for large ``df`` by Hill's normal expansion (CACM algorithm 395, 1970).

    Relative error below 1e-12 for df >= 10^4 (checked against mpmath), where the continued fraction
    needs thousands of terms.
    """
    a = df - 0.5
    b = 48 * a * a
    y = a * torch.log1p(ratio)
    z = (((((-0.4 * y - 3.3) * y - 24.0) * y - 85.5) / (0.8 * y * y + 100.0 + b) + y + 3.0) / b + 1.0) * y.sqrt()
    return torch.where(ratio.isinf(), torch.zeros_like(z), _ndtr(-z))


def _ndtr(x: Tensor) -> Tensor:
    # torch.special.ndtr flushes lower tails below ~1e-17 to 0; erfc keeps them.
    return 0.5 * torch.special.erfc(-x / math.sqrt(2))


# ----------------------------------------------------------------------------------------------------
# input handling
# ----------------------------------------------------------------------------------------------------


def _differences(a: Tensor, b: Tensor) -> Tensor:
    """Validate two score tensors and return ``a - b`` in float64 with shape ``[M, Q]``."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Tensor):
            raise TypeError(f"Argument `{name}` must be a tensor of per-query scores, got {type(x).__name__}.")
        if x.dim() == 0 or x.shape[-1] == 0:
            raise ValueError(f"Argument `{name}` must hold at least one query on its last dim, got {tuple(x.shape)}.")
    if a.shape != b.shape:
        raise ValueError(f"Arguments `a` and `b` must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}.")
    if a.device != b.device:
        raise ValueError(f"Arguments `a` and `b` must be on the same device, got {a.device} and {b.device}.")
    # float64 throughout: sums of ~10^4 sign-flipped differences must not lose the ties that decide p.
    return (a.to(torch.float64) - b.to(torch.float64)).reshape(-1, a.shape[-1])


def _check_resamples(n_resamples: int) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"Argument `n_resamples` must be a positive int, got {n_resamples!r}.")


def _check_generator(generator: torch.Generator | None, device: torch.device) -> None:
    if generator is not None and generator.device.type != device.type:
        raise ValueError(
            f"Argument `generator` must be on the device of the scores ({device.type}), got {generator.device.type}."
        )


def _chunk(n_queries: int) -> int:
    """Resamples per chunk: about _CHUNK_ELEMENTS (resample x query) elements."""
    return max(1, _CHUNK_ELEMENTS // n_queries)


# ----------------------------------------------------------------------------------------------------
# tests
# ----------------------------------------------------------------------------------------------------


def paired_t_test(a: Tensor, b: Tensor) -> TTestResult:
    """Two-sided paired t-test of ``mean(a - b) = 0`` over the last dimension (``scipy.stats.ttest_rel``).

    Args:
        a: Per-query scores ``[..., Q]`` of the first system.
        b: Per-query scores of the second system, same shape.

    Returns:
        ``TTestResult(statistic, pvalue, df)``; ``statistic`` and ``pvalue`` have shape ``a.shape[:-1]``.
        Identical systems give ``t = 0, p = 1``; a constant non-zero difference gives ``t = +-inf,
        p = 0``; one query gives ``p = NaN`` unless its difference is 0.

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
    so that means equal in theory but not in floating point are not missed.

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
    if not isinstance(pvalues, Tensor):
        raise TypeError(f"Argument `pvalues` must be a tensor, got {type(pvalues).__name__}.")
    flat = pvalues.reshape(-1)
    missing = flat.isnan()
    m = flat.numel() - missing.sum()
    # NaNs sort last (as +inf) so they never lower the running maximum of the real p-values.
    order = torch.where(missing, torch.full_like(flat, math.inf), flat).argsort(stable=True)
    ranked = flat[order] * (m - torch.arange(flat.numel(), device=flat.device)).to(flat.dtype)
    adjusted = torch.empty_like(flat)
    adjusted[order] = ranked.cummax(0).values.clamp(max=1)
    return torch.where(missing, flat, adjusted).reshape(pvalues.shape)
