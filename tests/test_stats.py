"""torchrank.stats against scipy (ttest_rel, permutation_test, bootstrap), mpmath and statsmodels."""

from __future__ import annotations

import math
import types
import warnings

import numpy as np
import pytest
import torch
from conftest import DEVICES

import torchrank.stats as S
from torchrank.stats import (
    adjust,
    benjamini_hochberg,
    bonferroni,
    bootstrap_ci,
    cohens_d,
    holm,
    paired_t_test,
    randomization_test,
    student_t_sf,
    studentized_range_sf,
    tukey_hsd,
    wilcoxon,
)

scipy_stats = pytest.importorskip("scipy.stats")


def _mean_diff(x, y, axis=-1):
    return np.mean(x - y, axis=axis)


def _scores(seed: int, shape: tuple[int, ...], effect: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-query scores in [0, 1] of two systems, the second a noisy shift of the first."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.rand(shape, generator=gen, dtype=torch.float64)
    b = (a + effect + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    return a, b


def _gen(seed: int, device: str = "cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


# ---------------------------------------------------------------------------------------------------- t


@pytest.mark.parametrize("df", [1, 2, 3, 7, 19, 20, 21, 50, 300, 3_000, 9_999, 10_000, 30_000, 1_000_000])
def test_student_t_sf_matches_scipy(df):
    t = np.array([-50.0, -3.0, -1.0, -0.3, 0.0, 0.01, 0.3, 1.0, 1.7, 1.75, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0])
    ours = student_t_sf(torch.from_numpy(t), df).numpy()
    ref = scipy_stats.t.sf(t, df)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=0)


@pytest.mark.parametrize("df", [1, 4, 30, 1_000, 9_999, 10_000, 100_000])
def test_student_t_sf_tails_match_mpmath(df):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for t in (1e-6, 0.5, 1.73, 4.0, 12.0, 25.0):
        x = mpmath.mpf(df) / (df + mpmath.mpf(t) ** 2)
        ref = float(mpmath.betainc(mpmath.mpf(df) / 2, mpmath.mpf(1) / 2, 0, x, regularized=True) / 2)
        ours = student_t_sf(torch.tensor(t, dtype=torch.float64), df).item()
        assert ours == pytest.approx(ref, rel=1e-11, abs=0), (df, t)


def test_student_t_sf_special_values():
    t = torch.tensor([0.0, math.inf, -math.inf, math.inf, math.nan], dtype=torch.float64)
    df = torch.tensor([5.0, 5.0, 5.0, 2e4, 5.0], dtype=torch.float64)
    out = student_t_sf(t, df)
    assert out[:4].tolist() == [0.5, 0.0, 1.0, 0.0]
    assert math.isnan(out[4])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [2, 3, 10, 50, 1_000])
def test_paired_t_test_matches_ttest_rel(seed, n):
    a, b = _scores(seed, (4, n))
    res = paired_t_test(a, b)
    ref = scipy_stats.ttest_rel(a.numpy(), b.numpy(), axis=-1)
    np.testing.assert_allclose(res.statistic.numpy(), ref.statistic, rtol=1e-10)
    np.testing.assert_allclose(res.pvalue.numpy(), ref.pvalue, rtol=1e-9)
    assert res.df == n - 1


def test_paired_t_test_batched_shapes_equal_row_by_row():
    a, b = _scores(3, (2, 3, 40))
    res = paired_t_test(a, b)
    assert res.pvalue.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            row = paired_t_test(a[i, j], b[i, j])
            assert row.pvalue.shape == ()
            assert row.pvalue.item() == pytest.approx(res.pvalue[i, j].item(), rel=1e-14)


def test_paired_t_test_float32_inputs_are_computed_in_float64():
    a, b = _scores(4, (30,))
    res = paired_t_test(a.float(), b.float())
    ref = scipy_stats.ttest_rel(a.float().double().numpy(), b.float().double().numpy())
    assert res.pvalue.dtype == torch.float64
    assert res.pvalue.item() == pytest.approx(ref.pvalue, rel=1e-9)


# ---------------------------------------------------------------------------------------------------- edge cases


def test_identical_runs_give_p_one_without_warnings():
    a, _ = _scores(5, (3, 25))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = paired_t_test(a, a)
        r = randomization_test(a, a, 500, generator=_gen(0))
        bs = bootstrap_ci(a, a, 500, generator=_gen(0), method="bca")
        adj = holm(t.pvalue)
    assert t.statistic.tolist() == [0.0] * 3 and t.pvalue.tolist() == [1.0] * 3
    assert r.pvalue.tolist() == [1.0] * 3
    assert bs.low.tolist() == [0.0] * 3 and bs.high.tolist() == [0.0] * 3
    assert adj.tolist() == [1.0] * 3


def test_single_query():
    a, b = torch.tensor([0.7]), torch.tensor([0.4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = paired_t_test(a, b)
        r = randomization_test(a, b)
        bs = bootstrap_ci(a, b, 100, generator=_gen(0), method="bca")
    assert math.isnan(t.pvalue.item()) and math.isnan(t.statistic.item()) and t.df == 0
    assert paired_t_test(a, a).pvalue.item() == 1.0
    # both sign patterns (+0.3, -0.3) are as extreme as the observed one (scipy refuses one observation)
    assert r.exact and r.n_resamples == 2 and r.pvalue.item() == 1.0
    assert bs.low.item() == bs.high.item() == pytest.approx(0.3)


def test_constant_nonzero_difference():
    a = torch.tensor([0.5, 0.25, 0.75, 0.0, 1.0, 0.5], dtype=torch.float64)
    b = a - 0.25  # exact in binary: zero variance
    t = paired_t_test(a, b)
    assert t.statistic.item() == math.inf and t.pvalue.item() == 0.0
    r = randomization_test(a, b)  # only the all-plus pattern reaches the observed mean
    assert r.exact and r.pvalue.item() == 2 / 2**6
    bs = bootstrap_ci(a, b, 200, generator=_gen(0))
    assert bs.low.item() == bs.high.item() == 0.25 and bs.standard_error.item() == 0


def test_no_comparisons():
    empty = torch.empty(0, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert paired_t_test(empty, empty).pvalue.shape == (0,)
        assert randomization_test(empty, empty, 50).pvalue.shape == (0,)
        assert bootstrap_ci(empty, empty, 50, method="bca").low.shape == (0,)
        assert holm(torch.empty(0)).shape == (0,)


# ---------------------------------------------------------------------------------------------------- randomisation


@pytest.mark.parametrize(("seed", "n"), [(0, 3), (1, 8), (2, 11), (3, 12), (4, 12)])
def test_exact_randomization_equals_scipy(seed, n):
    a, b = _scores(seed, (3, n), effect=0.1)
    res = randomization_test(a, b, 2**n)
    assert res.exact and res.n_resamples == 2**n
    ref = scipy_stats.permutation_test(
        (a.numpy(), b.numpy()), _mean_diff, permutation_type="samples", vectorized=True, n_resamples=2**n, axis=-1
    )
    np.testing.assert_allclose(res.pvalue.numpy(), ref.pvalue, rtol=1e-12)
    np.testing.assert_allclose(res.statistic.numpy(), ref.statistic, rtol=1e-12)


def test_exact_randomization_counts_theoretical_ties():
    # Differences on a 0.1 grid (as P@10): many sign patterns reach the observed mean exactly in theory,
    # but not always in floating point.
    d = torch.tensor([0.1, 0.2, -0.1, 0.3, 0.1, -0.2, 0.1, 0.1, 0.2, -0.3], dtype=torch.float64)
    b = torch.full_like(d, 0.3)
    res = randomization_test(b + d, b)
    # count by integers: the sign patterns whose sum of (10 d) reaches the observed one
    k = torch.round(d * 10).long()
    signs = ((torch.arange(2**10)[:, None] >> torch.arange(10)) & 1) * 2 - 1
    sums = signs @ k
    obs = int(k.sum())
    expected = 2 * min(int((sums >= obs).sum()), int((sums <= obs).sum())) / 2**10
    assert res.pvalue.item() == pytest.approx(min(expected, 1.0), abs=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_monte_carlo_randomization_agrees_with_exact_and_scipy(seed):
    n, draws = 14, 10_000  # 2**14 = 16384 patterns > draws: Monte-Carlo
    a, b = _scores(seed, (4, n), effect=0.08)
    res = randomization_test(a, b, draws, generator=_gen(seed))
    assert not res.exact and res.n_resamples == draws
    exact = randomization_test(a, b, 2**n).pvalue.numpy()
    mc = scipy_stats.permutation_test(
        (a.numpy(), b.numpy()),
        _mean_diff,
        permutation_type="samples",
        vectorized=True,
        n_resamples=draws,
        axis=-1,
        rng=seed,
    ).pvalue
    ref = scipy_stats.permutation_test(
        (a.numpy(), b.numpy()), _mean_diff, permutation_type="samples", vectorized=True, n_resamples=2**n, axis=-1
    ).pvalue
    np.testing.assert_allclose(exact, ref, rtol=1e-12)
    # p = 2 min(one-sided): its Monte-Carlo sd is 2 sqrt(q (1 - q) / draws) with q = p / 2
    q = np.clip(exact / 2, 1 / draws, 0.5)
    sd = 2 * np.sqrt(q * (1 - q) / draws)
    ours = res.pvalue.numpy()
    assert np.all(np.abs(ours - exact) <= 5 * sd + 2 / draws), (ours, exact)
    assert np.all(np.abs(ours - mc) <= 5 * np.sqrt(2) * sd + 2 / draws), (ours, mc)


def test_randomization_row_results_do_not_depend_on_the_batch():
    a, b = _scores(7, (5, 40))
    batch = randomization_test(a, b, 3_000, generator=_gen(11)).pvalue
    for i in range(5):
        assert randomization_test(a[i], b[i], 3_000, generator=_gen(11)).pvalue.item() == batch[i].item()


def test_randomization_is_reproducible_and_chunked(monkeypatch):
    a, b = _scores(8, (3, 12))
    whole = randomization_test(a, b, 2**12).pvalue
    first = randomization_test(a, b, 999, generator=_gen(5)).pvalue
    assert torch.equal(first, randomization_test(a, b, 999, generator=_gen(5)).pvalue)
    monkeypatch.setattr(S, "_CHUNK_ELEMENTS", 12 * 100)  # 100 sign patterns per chunk
    assert torch.equal(randomization_test(a, b, 2**12).pvalue, whole)
    chunked = randomization_test(a, b, 999, generator=_gen(5)).pvalue
    assert torch.all((chunked - first).abs() < 0.1)


def test_monte_carlo_p_is_never_zero():
    a, b = _scores(9, (60,), effect=0.5)
    res = randomization_test(a, b, 1_000, generator=_gen(0))
    assert res.pvalue.item() == pytest.approx(2 / 1001)


# ---------------------------------------------------------------------------------------------------- bootstrap


def _scipy_ci_from(dist: torch.Tensor, d: np.ndarray, method: str, level: float):
    """scipy's interval computed from our bootstrap distribution (no new resampling)."""
    given = types.SimpleNamespace(bootstrap_distribution=dist.numpy())
    return scipy_stats.bootstrap(
        (d,), np.mean, n_resamples=0, bootstrap_result=given, method=method, confidence_level=level, axis=-1
    ).confidence_interval


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize(("seed", "n", "level"), [(0, 5, 0.95), (1, 30, 0.9), (2, 200, 0.99)])
def test_bootstrap_interval_equals_scipy_on_the_same_resamples(method, seed, n, level):
    a, b = _scores(seed, (3, n))
    res = bootstrap_ci(
        a, b, 4_000, confidence_level=level, method=method, generator=_gen(seed), return_distribution=True
    )
    assert res.distribution.shape == (3, 4_000)
    ref = _scipy_ci_from(res.distribution, (a - b).numpy(), "BCa" if method == "bca" else "percentile", level)
    np.testing.assert_allclose(res.low.numpy(), ref.low, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(res.high.numpy(), ref.high, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(res.standard_error.numpy(), res.distribution.numpy().std(-1, ddof=1), rtol=1e-12)


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("seed", [0, 1])
def test_bootstrap_interval_agrees_with_scipy_within_monte_carlo_error(method, seed):
    draws = 20_000
    a, b = _scores(seed, (3, 40))
    res = bootstrap_ci(a, b, draws, method=method, generator=_gen(seed))
    ref = scipy_stats.bootstrap(
        ((a - b).numpy(),),
        np.mean,
        n_resamples=draws,
        axis=-1,
        rng=seed,
        method="BCa" if method == "bca" else "percentile",
    )
    # An endpoint (a 2.5% quantile) of B bootstrap means has a Monte-Carlo sd of about 2.7 se / sqrt(B);
    # two independent estimates differ by sqrt(2) of that: allow 5 such sds.
    tol = 5 * np.sqrt(2) * 2.7 * ref.standard_error / np.sqrt(draws)
    assert np.all(np.abs(res.low.numpy() - ref.confidence_interval.low) <= tol)
    assert np.all(np.abs(res.high.numpy() - ref.confidence_interval.high) <= tol)
    np.testing.assert_allclose(res.standard_error.numpy(), ref.standard_error, rtol=0.05)


def test_bootstrap_chunks_and_batches(monkeypatch):
    a, b = _scores(10, (4, 25))
    batch = bootstrap_ci(a, b, 2_000, generator=_gen(3))
    row = bootstrap_ci(a[2], b[2], 2_000, generator=_gen(3))
    # same resamples; only the rounding of a batched matmul may differ
    assert row.low.item() == pytest.approx(batch.low[2].item(), rel=1e-12)
    assert row.high.item() == pytest.approx(batch.high[2].item(), rel=1e-12)
    monkeypatch.setattr(S, "_CHUNK_ELEMENTS", 25 * 64)
    chunked = bootstrap_ci(a, b, 2_000, generator=_gen(3))
    assert torch.all((chunked.low - batch.low).abs() < 0.03)


# ---------------------------------------------------------------------------------------------------- Holm


def test_holm_hand_worked_example():
    # m = 5; sorted p: 0.001 (x5 = 0.005), 0.01 (x4 = 0.04), 0.012 (x3 = 0.036 -> running max 0.04),
    # 0.04 (x2 = 0.08), 0.5 (x1 = 0.5)
    p = torch.tensor([0.04, 0.001, 0.5, 0.012, 0.01], dtype=torch.float64)
    expected = torch.tensor([0.08, 0.005, 0.5, 0.04, 0.04], dtype=torch.float64)
    assert torch.allclose(holm(p), expected, rtol=0, atol=1e-15)


def test_holm_shape_clip_ties_and_nan():
    p = torch.tensor([[0.3, 0.3], [0.9, math.nan]], dtype=torch.float64)
    out = holm(p)
    assert out.shape == (2, 2)
    # m = 3 real p-values: 0.3 * 3 = 0.9, 0.3 * 2 = 0.6 -> 0.9, 0.9 * 1 = 0.9
    assert out[0].tolist() == pytest.approx([0.9, 0.9]) and out[1, 0].item() == pytest.approx(0.9)
    assert math.isnan(out[1, 1])
    assert holm(torch.tensor([0.6, 0.7])).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_holm_equals_statsmodels(seed):
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p = np.random.default_rng(seed).uniform(0, 0.2, 25)
    ref = multitest.multipletests(p, method="holm")[1]
    np.testing.assert_allclose(holm(torch.from_numpy(p)).numpy(), ref, rtol=1e-14)


# ---------------------------------------------------------------------------------------------------- devices, errors


@pytest.mark.parametrize("device", DEVICES)
def test_devices_agree_with_cpu(device):
    a, b = _scores(12, (3, 12))
    a_d, b_d = a.to(device), b.to(device)
    t = paired_t_test(a_d, b_d)
    assert t.pvalue.device.type == device
    assert torch.allclose(t.pvalue.cpu(), paired_t_test(a, b).pvalue, rtol=1e-12, atol=0)
    exact = randomization_test(a_d, b_d, 2**12).pvalue.cpu()
    assert torch.allclose(exact, randomization_test(a, b, 2**12).pvalue, rtol=1e-12, atol=0)
    mc = randomization_test(a_d, b_d, 20_000, generator=_gen(0, device)).pvalue.cpu()
    assert torch.all((mc - exact).abs() < 0.03)
    bs = bootstrap_ci(a_d, b_d, 20_000, generator=_gen(0, device), method="bca")
    ref = bootstrap_ci(a, b, 20_000, generator=_gen(0), method="bca")
    assert torch.all((bs.low.cpu() - ref.low).abs() < 0.02) and bs.low.device.type == device
    assert torch.allclose(holm(t.pvalue).cpu(), holm(t.pvalue.cpu()))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: paired_t_test(torch.ones(3), torch.ones(4)), "same shape"),
        (lambda: paired_t_test(torch.ones(0), torch.ones(0)), "at least one query"),
        (lambda: paired_t_test([1.0], [2.0]), "must be a tensor"),
        (lambda: randomization_test(torch.ones(3), torch.ones(3), 0), "n_resamples"),
        (lambda: bootstrap_ci(torch.ones(3), torch.ones(3), confidence_level=1.0), "confidence_level"),
        (lambda: bootstrap_ci(torch.ones(3), torch.ones(3), method="bc"), "method"),
        (lambda: holm([0.1]), "pvalues"),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_generator_on_another_device_is_refused():
    a = torch.ones(5, device="cuda")
    with pytest.raises(ValueError, match="generator"):
        randomization_test(a, a, 10, generator=torch.Generator())


# ---------------------------------------------------------------------------------------------------- Wilcoxon


def _wilcoxon_cases():
    """(a, b) pairs over every branch of scipy's wilcoxon: no ties, ties on a 0.2 grid, zeros, sizes 1 to 200."""
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 8, 12, 13, 14, 30, 50, 51, 120):
        yield rng.random(n), rng.random(n)  # continuous: no ties, no zeros
        a = rng.integers(0, 6, n) / 5
        yield a, rng.integers(0, 6, n) / 5  # ties and zeros
        b = a.copy()
        b[: n // 2] = rng.integers(0, 6, n // 2) / 5
        yield a, b  # many zeros


@pytest.mark.parametrize("zero_method", ["wilcox", "pratt", "zsplit"])
@pytest.mark.parametrize("correction", [False, True])
@pytest.mark.parametrize("method", ["auto", "exact", "asymptotic"])
def test_wilcoxon_equals_scipy_in_every_mode(zero_method, correction, method):
    checked = 0
    for a, b in _wilcoxon_cases():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns on zeros with "exact" and on small samples
            try:
                ref = scipy_stats.wilcoxon(a, b, zero_method=zero_method, correction=correction, method=method)
            except ValueError:  # scipy refuses some combinations (zsplit/pratt with exact in old versions)
                continue
        if np.isnan(ref.pvalue):  # every difference 0 under the normal approximation: scipy has no p-value
            continue
        res = wilcoxon(
            torch.from_numpy(a), torch.from_numpy(b), zero_method=zero_method, correction=correction, method=method
        )
        assert res.pvalue.item() == pytest.approx(ref.pvalue, rel=1e-10, abs=0), (len(a), a, b)
        assert res.statistic.item() == pytest.approx(ref.statistic, rel=1e-12, abs=0)
        if method == "asymptotic":
            assert res.zstatistic.item() == pytest.approx(ref.zstatistic, rel=1e-10)
        checked += 1
    assert checked >= 20


def test_wilcoxon_auto_picks_scipys_method_per_row():
    rng = np.random.default_rng(3)
    exact_row = rng.random(10)  # no ties: exact distribution
    tied_row = np.round(rng.random(10), 1)  # ties, 10 <= 13 queries: every sign pattern
    big_row = rng.random(10)
    a = torch.from_numpy(np.stack([exact_row, tied_row, big_row]))
    b = torch.from_numpy(np.stack([rng.random(10), np.round(rng.random(10), 1), rng.random(10)]))
    res = wilcoxon(a, b)
    assert res.exact.tolist() == [True, True, True]
    for i in range(3):
        ref = scipy_stats.wilcoxon(a[i].numpy(), b[i].numpy())
        assert res.pvalue[i].item() == pytest.approx(ref.pvalue, rel=1e-10)
    long = _scores(4, (2, 60))
    assert not wilcoxon(*long).exact.any()  # more than 50 queries: the normal approximation


def test_wilcoxon_batched_equals_row_by_row_and_identical_runs():
    a, b = _scores(8, (2, 3, 20))
    b = torch.round(b * 5) / 5  # ties
    res = wilcoxon(a, b, method="asymptotic", correction=True)
    assert res.pvalue.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            assert res.pvalue[i, j].item() == pytest.approx(
                wilcoxon(a[i, j], b[i, j], method="asymptotic", correction=True).pvalue.item(), rel=1e-14
            )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for method in ("auto", "exact", "asymptotic", "permutation"):
            assert wilcoxon(a, a, method=method).pvalue.tolist() == [[1.0] * 3] * 2


def test_wilcoxon_permutation_equals_scipys_permutation_test():
    a, b = _scores(9, (16,))
    b = torch.round(b * 4) / 4
    res = wilcoxon(a, b, method="permutation")

    ref = scipy_stats.permutation_test(
        ((a - b).numpy(),),
        lambda d, axis: _r_plus(d, axis),
        permutation_type="samples",
        n_resamples=2**16,
        vectorized=True,
    )
    assert res.exact.item() and res.pvalue.item() == pytest.approx(ref.pvalue, rel=1e-12)


def _r_plus(d, axis=-1):
    """Sum of the ranks of |d| over the positive differences (zeros dropped), for scipy's permutation test."""
    d = np.moveaxis(np.asarray(d, dtype=float), axis, -1)
    absd = np.where(d == 0, np.nan, np.abs(d))
    ranks = scipy_stats.rankdata(absd, axis=-1, nan_policy="omit")
    return np.nansum(np.where(d > 0, ranks, 0), axis=-1)


# -------------------------------------------------------------------------------------------- effect size, Tukey


def test_cohens_d_is_mean_over_sample_sd_and_the_t_statistic_over_sqrt_q():
    a, b = _scores(10, (4, 25))
    d = (a - b).numpy()
    np.testing.assert_allclose(cohens_d(a, b).numpy(), d.mean(-1) / d.std(-1, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(cohens_d(a, b).numpy() * 5, paired_t_test(a, b).statistic.numpy(), rtol=1e-12)
    assert cohens_d(a, a).tolist() == [0.0] * 4
    assert cohens_d(torch.tensor([0.5, 0.75]), torch.tensor([0.25, 0.5])).item() == math.inf
    assert math.isnan(cohens_d(torch.tensor([0.7]), torch.tensor([0.4])).item())


@pytest.mark.parametrize("k", [2, 3, 5, 10])
@pytest.mark.parametrize("df", [1, 2, 5, 30, 170, 1_000, 200_000])
def test_studentized_range_sf_equals_scipy(k, df):
    q = np.array([0.01, 0.5, 1.0, 2.0, 3.0, 4.5, 7.0, 12.0, 50.0])
    ours = studentized_range_sf(torch.from_numpy(q), k, df).numpy()
    np.testing.assert_allclose(ours, scipy_stats.studentized_range.sf(q, k, df), rtol=0, atol=1e-10)


def test_studentized_range_far_tail_against_the_range_density():
    # scipy's 1 - cdf is off by 2.5e-10 here (its quadrature's error); the tail written as
    # int g(w) P(S < w / q) dw with the density g of the range of k normals has no cancellation
    integrate = pytest.importorskip("scipy.integrate")
    k, df, q = 10, 5, 300.0
    norm = scipy_stats.norm

    def density(w):
        inner = lambda z: norm.pdf(z) * norm.pdf(z - w) * (norm.cdf(z) - norm.cdf(z - w)) ** (k - 2)  # noqa: E731
        return k * (k - 1) * integrate.quad(inner, -12, 12 + w, epsabs=1e-14, epsrel=1e-12, limit=200)[0]

    ref = integrate.quad(
        lambda w: density(w) * scipy_stats.chi2.cdf(df * (w / q) ** 2, df), 0, 15, epsabs=1e-20, epsrel=1e-10, limit=200
    )[0]
    assert studentized_range_sf(torch.tensor(q), k, df).item() == pytest.approx(ref, rel=1e-6, abs=1e-14)


@pytest.mark.parametrize(("runs", "queries", "seed"), [(2, 5, 0), (3, 10, 1), (5, 31, 2), (4, 200, 3), (8, 50, 4)])
def test_tukey_hsd_equals_scipy(runs, queries, seed):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.rand(runs, queries, generator=gen, dtype=torch.float64)
    scores += 0.04 * torch.arange(runs, dtype=torch.float64)[:, None]
    res = tukey_hsd(scores)
    ref = scipy_stats.tukey_hsd(*scores.numpy())
    np.testing.assert_allclose(res.statistic.numpy(), ref.statistic, rtol=0, atol=1e-14)
    np.testing.assert_allclose(res.pvalue.numpy(), ref.pvalue, rtol=0, atol=1e-10)
    assert res.df == runs * (queries - 1)
    batched = tukey_hsd(torch.stack([scores, scores.flip(0)]))  # [measures, runs, queries]
    np.testing.assert_allclose(batched.pvalue[0].numpy(), res.pvalue.numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(batched.pvalue[1].numpy(), res.pvalue.flip(0).flip(1).numpy(), rtol=0, atol=1e-15)


def test_tukey_hsd_identical_runs_and_bad_input():
    x = torch.rand(1, 10, dtype=torch.float64)
    assert tukey_hsd(x.expand(3, 10)).pvalue.tolist() == [[1.0] * 3] * 3  # identical runs
    with pytest.raises(ValueError, match="runs >= 2"):
        tukey_hsd(torch.rand(1, 10))
    with pytest.raises(TypeError, match="scores"):
        tukey_hsd([[0.1, 0.2], [0.3, 0.4]])


# ---------------------------------------------------------------------------------------------------- corrections


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_benjamini_hochberg_equals_scipy_and_bonferroni_by_hand(seed):
    p = np.random.default_rng(seed).uniform(0, 0.2, 25) ** 2
    p[3] = p[7]  # a tie
    ours = benjamini_hochberg(torch.from_numpy(p)).numpy()
    np.testing.assert_allclose(ours, scipy_stats.false_discovery_control(p, method="bh"), rtol=1e-14)
    np.testing.assert_allclose(bonferroni(torch.from_numpy(p)).numpy(), np.minimum(p * 25, 1), rtol=1e-15)
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    np.testing.assert_allclose(ours, multitest.multipletests(p, method="fdr_bh")[1], rtol=1e-14)


def test_corrections_keep_shape_and_nan_out_of_the_family():
    p = torch.tensor([[0.01, math.nan], [0.02, 0.04]], dtype=torch.float64)
    real = torch.tensor([0.01, 0.02, 0.04], dtype=torch.float64)
    for method in ("holm", "bonferroni", "bh"):
        out = adjust(p, method)
        assert out.shape == (2, 2) and math.isnan(out[0, 1])
        assert torch.equal(out[~p.isnan()], adjust(real, method))
    assert torch.equal(adjust(p, "none"), p) is False and adjust(p, "none") is p
    with pytest.raises(ValueError, match="method"):
        adjust(p, "fdr")


# ---------------------------------------------------------------------------------------------------- NaN, ranges


def _with_nan_row() -> tuple[torch.Tensor, torch.Tensor]:
    """Two comparisons of 6 queries: real scores, and the same scores with one NaN in ``b``."""
    a = torch.tensor([0.1, 0.5, 0.3, 0.7, 0.62, 0.44], dtype=torch.float64)
    b = torch.tensor([0.2, 0.35, 0.1, 0.4, 0.6, 0.12], dtype=torch.float64)
    nan_b = b.clone()
    nan_b[1] = math.nan
    return torch.stack([a, a]), torch.stack([b, nan_b])


@pytest.mark.parametrize("n_resamples", [10_000, 40])  # exact (2**6 patterns) and Monte-Carlo
def test_randomization_test_gives_nan_for_a_nan_or_infinite_difference(n_resamples):
    # scipy.stats.permutation_test returns p = 0 for these rows, which would read as highly significant; the
    # t-test and ttest_rel give NaN, and so does this test now. The real row keeps its own p-value.
    a, b = _with_nan_row()
    a, b = torch.cat([a, a[:1]]), torch.cat([b, b[:1]])
    b[2, 3] = -math.inf
    gen = torch.Generator().manual_seed(0)
    res = randomization_test(a, b, n_resamples, generator=gen)
    assert math.isnan(res.pvalue[1]) and math.isnan(res.pvalue[2]) and math.isnan(res.statistic[1])
    assert res.statistic[2].item() == math.inf
    alone = randomization_test(a[0], b[0], n_resamples, generator=torch.Generator().manual_seed(0))
    assert res.pvalue[0].item() == alone.pvalue.item()
    if res.exact:
        ref = scipy_stats.permutation_test(
            (a[0].numpy(), b[0].numpy()), _mean_diff, permutation_type="samples", n_resamples=np.inf
        )
        assert res.pvalue[0].item() == pytest.approx(ref.pvalue, rel=1e-12)


@pytest.mark.parametrize("zero_method", ["wilcox", "pratt", "zsplit"])
@pytest.mark.parametrize("method", ["auto", "exact", "asymptotic", "permutation"])
def test_wilcoxon_propagates_nan_as_scipy(zero_method, method):
    a, b = _with_nan_row()
    res = wilcoxon(a, b, zero_method=zero_method, method=method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_method = scipy_stats.PermutationMethod(n_resamples=np.inf) if method == "permutation" else method
        ref = scipy_stats.wilcoxon(a[1].numpy(), b[1].numpy(), zero_method=zero_method, method=ref_method)
    assert math.isnan(ref.pvalue) and math.isnan(ref.statistic)
    assert math.isnan(res.pvalue[1]) and math.isnan(res.statistic[1]) and math.isnan(res.zstatistic[1])
    assert not res.exact[1]
    alone = wilcoxon(a[0], b[0], zero_method=zero_method, method=method)
    assert res.pvalue[0].item() == alone.pvalue.item() and res.statistic[0].item() == alone.statistic.item()


@pytest.mark.parametrize("method", ["auto", "asymptotic"])
def test_wilcoxon_infinite_difference_does_not_tie_with_dropped_zeros(method):
    # Zeros dropped under "wilcox" were ranked as +inf and formed a tie group with an infinite difference,
    # which changed the tie correction of the normal approximation.
    a = np.array([0.1, 0.5, 0.3, 0.7, 0.2])
    b = np.array([0.1, -np.inf, 0.25, 0.4, 0.1])
    res = wilcoxon(torch.from_numpy(a), torch.from_numpy(b), method=method)
    assert res.pvalue.item() == pytest.approx(scipy_stats.wilcoxon(a, b, method=method).pvalue, rel=1e-10)


def test_difference_constant_up_to_rounding_gives_a_huge_t_as_scipy():
    # Documented: exact answers (t = +-inf, p = 0) are for differences that are the same float64; b + 0.1 - b
    # varies by a few ulps, so t is huge and finite and p tiny, in scipy too (its digits differ: rounding noise).
    b = np.linspace(0, 0.9, 10)
    a = b + 0.1
    assert np.ptp(a - b) > 0
    res = paired_t_test(torch.from_numpy(a), torch.from_numpy(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns of catastrophic cancellation
        ref = scipy_stats.ttest_rel(a, b)
    assert 1e14 < res.statistic.item() < math.inf and 1e14 < ref.statistic < math.inf
    assert 0 < res.pvalue.item() < 1e-100 and 0 < ref.pvalue < 1e-100
    exact = paired_t_test(torch.full((10,), 0.1, dtype=torch.float64), torch.zeros(10, dtype=torch.float64))
    assert exact.statistic.item() == math.inf and exact.pvalue.item() == 0


@pytest.mark.parametrize("method", ["holm", "bonferroni", "bh", "none"])
def test_corrections_refuse_values_outside_the_unit_interval(method):
    with pytest.raises(ValueError, match=r"2 outside it, from -0\.2 to 1\.5"):
        adjust(torch.tensor([1.5, -0.2, 0.01]), method)
    with pytest.raises(ValueError, match="from inf to inf"):
        adjust(torch.tensor([0.5, math.inf]), method)
    edges = adjust(torch.tensor([0.0, 1.0, math.nan], dtype=torch.float64), method)  # NaN: out of the family
    assert edges[:2].tolist() == [0.0, 1.0] and math.isnan(edges[2])
    function = {"holm": holm, "bonferroni": bonferroni, "bh": benjamini_hochberg}.get(method)
    if function is not None:
        with pytest.raises(ValueError, match="in \\[0, 1\\]"):
            function(torch.tensor([[0.3, -1e-9]]))
