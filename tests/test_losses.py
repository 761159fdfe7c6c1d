"""torchrank.losses against independent references: allRank 1.4.3 and TF-Ranking values, the NeuralSort paper's
example, exact metrics of torchrank.functional as the temperature goes to 0, and float64 gradcheck; plus padding
invariance, extreme inputs, reductions, module == function and torch.compile."""

from __future__ import annotations

import functools
import inspect

import pytest
import torch

import torchrank.functional as F
import torchrank.losses as L
from torchrank.losses._neuralsort import soft_sort

# allRank's example (its tests and the issue): -1 marks padding, exponential gain
SCORES = torch.tensor([[0.5, 0.2, 0.1, 0.01, 0.65, 0.3], [1.0, -0.5, 2.0, 0.3, 0.0, 0.0]])
LABELS = torch.tensor([[4, 2, 1, 0, 4, 3], [0, 1, 2, 0, -1, -1]])
MASK = LABELS >= 0
CONVERGED = 50  # allRank runs Sinkhorn to tol 1e-6 or 50 iterations; 50 reaches its values to 1e-6 here

# name -> (function, module class, kwargs for a small deterministic case)
LOSSES = {
    "neural_ndcg": (L.neural_ndcg, L.NeuralNDCGLoss, {"sinkhorn_iterations": 3}),
    "neural_ndcg_transposed": (L.neural_ndcg, L.NeuralNDCGLoss, {"sinkhorn_iterations": 3, "transposed": True}),
    "neural_ndcg_k": (L.neural_ndcg, L.NeuralNDCGLoss, {"sinkhorn_iterations": 0, "k": 3}),
    "approx_ndcg": (L.approx_ndcg, L.ApproxNDCGLoss, {"temperature": 0.5}),
    "approx_ndcg_k": (L.approx_ndcg, L.ApproxNDCGLoss, {"k": 3}),
    "lambda_ndcg_loss2pp": (L.lambda_loss, L.LambdaLoss, {}),
    "lambda_ndcg_loss2_k": (L.lambda_loss, L.LambdaLoss, {"weighting": "ndcg_loss2", "k": 3}),
    "lambdarank": (L.lambda_loss, L.LambdaLoss, {"weighting": "lambdarank", "sigma": 2.0}),
    "soft_err": (L.soft_err, L.SoftERRLoss, {"sinkhorn_iterations": 2, "max_label": 4}),
    "soft_err_k": (L.soft_err, L.SoftERRLoss, {"sinkhorn_iterations": 0, "k": 2, "transposed": True}),
    "listnet": (L.listnet, L.ListNetLoss, {}),
    "listmle": (L.listmle, L.ListMLELoss, {"ties": "first"}),
    "ranknet": (L.ranknet, L.RankNetLoss, {"sigma": 0.5}),
}
SURROGATES = ["neural_ndcg", "neural_ndcg_transposed", "neural_ndcg_k", "approx_ndcg", "approx_ndcg_k", "soft_err"]


def loss_fn(name: str) -> functools.partial:
    fn, _, kwargs = LOSSES[name]
    return functools.partial(fn, **kwargs)


def random_case(b: int = 3, n: int = 7, seed: int = 0, dtype: torch.dtype = torch.float64, device: str = "cpu"):
    """Distinct scores, graded labels 0..4, a padding mask with one fully real and one 1-item list."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(b, n, generator=g, dtype=dtype)
    labels = torch.randint(0, 5, (b, n), generator=g)
    mask = torch.rand(b, n, generator=g) > 0.3
    mask[0] = True
    mask[-1] = False
    mask[-1, 2] = True
    labels[0, 0] = 3  # list 0 has a positive label and two distinct labels
    labels[0, 1] = 0
    return scores.to(device), labels.to(device), mask.to(device)


# ----------------------------------------------------------------------------------------------- references
@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"temperature": 1.0}, -0.888043),
        ({"temperature": 0.1}, -0.968940),
        ({"temperature": 1.0, "k": 3}, -0.792016),
        ({"temperature": 1.0, "transposed": True}, -0.888043),
        ({"temperature": 0.1, "k": 3}, -0.902469),  # allRank neuralNDCG(k=3, temperature=0.1)
        ({"temperature": 1.0, "k": 3, "transposed": True}, -0.792016),  # allRank neuralNDCG_transposed(k=3)
        ({"gain": "linear"}, -0.897985),  # allRank neuralNDCG(powered_relevancies=False)
    ],
)
def test_neural_ndcg_matches_allrank(kwargs: dict, expected: float, device: str) -> None:
    scores, labels, mask = SCORES.to(device), LABELS.to(device), MASK.to(device)
    value = L.neural_ndcg(scores, labels, mask, sinkhorn_iterations=CONVERGED, **kwargs)
    assert value.item() == pytest.approx(expected, abs=2e-6)


def test_neural_ndcg_transposed_linear_gain_differs_from_allrank_by_design() -> None:
    # allRank's neuralNDCG_transposed computes the ideal DCG with the exponential gain whatever
    # `powered_relevancies` says, so with linear gains it returns -0.458382 (DCG of linear gains over an
    # exponential ideal). torchrank uses one gain for both: the value of the untransposed variant, which
    # allRank's own neuralNDCG(powered_relevancies=False) gives (-0.897985), as the two coincide at convergence.
    value = L.neural_ndcg(SCORES, LABELS, MASK, sinkhorn_iterations=CONVERGED, transposed=True, gain="linear")
    assert value.item() == pytest.approx(-0.897985, abs=2e-6)
    assert value.item() != pytest.approx(-0.458382, abs=1e-3)


def test_empty_lists_allrank_conventions() -> None:
    # a third list with no positive label: allRank's neuralNDCG leaves it out of the mean (-0.888043, our
    # default "skip"); its approxNDCGLoss counts it with NDCG 0 (-0.473946, our "neg"). Same inputs, by design.
    scores = torch.cat([SCORES, torch.tensor([[0.3, 0.1, -0.2, 0.4, 0.0, 0.0]])])
    labels = torch.cat([LABELS, torch.tensor([[0, 0, 0, 0, -1, -1]])])
    mask = labels >= 0
    assert L.neural_ndcg(scores, labels, mask, sinkhorn_iterations=CONVERGED).item() == pytest.approx(
        -0.888043, abs=2e-6
    )
    assert L.approx_ndcg(scores, labels, mask).item() == pytest.approx(-0.710919, abs=2e-6)
    assert L.approx_ndcg(scores, labels, mask, empty_target_action="neg").item() == pytest.approx(-0.473946, abs=2e-6)


@pytest.mark.parametrize(("temperature", "expected"), [(1.0, -0.710919), (0.1, -0.934830)])
def test_approx_ndcg_matches_allrank(temperature: float, expected: float) -> None:
    # allRank's alpha is 1 / temperature
    assert L.approx_ndcg(SCORES, LABELS, MASK, temperature=temperature).item() == pytest.approx(expected, abs=2e-6)


def test_approx_ndcg_matches_tf_ranking_docstring() -> None:
    value = L.approx_ndcg(torch.tensor([[0.6, 0.8]]), torch.tensor([[1.0, 0.0]]), temperature=0.1)
    assert value.item() == pytest.approx(-0.655107, abs=1e-6)


def test_listnet_matches_allrank() -> None:
    assert L.listnet(SCORES, LABELS, MASK).item() == pytest.approx(1.441052, abs=2e-6)


@pytest.mark.parametrize(
    ("weighting", "k", "expected"),
    [
        ("ndcg_loss2", None, 0.795386),
        ("ndcg_loss2pp", None, 9.394766),
        ("lambdarank", None, 1.440901),
        ("ndcg_loss2", 3, 0.283936),
        ("ndcg_loss2pp", 3, 3.219570),
        ("lambdarank", 3, 0.380209),
    ],
)
def test_lambda_loss_matches_allrank(weighting: str, k: int | None, expected: float) -> None:
    # allRank lambdaLoss(weighing_scheme=..._scheme, k=k) with its defaults: sum over the batch, log2
    value = L.lambda_loss(SCORES, LABELS, MASK, weighting=weighting, k=k, reduction="sum")
    assert value.item() == pytest.approx(expected, rel=2e-6)


def test_ranknet_matches_allrank_per_list() -> None:
    # allRank's rankNet averages over the pairs of its whole batch; per list (batch of one) the two agree
    per_list = L.ranknet(SCORES, LABELS, MASK, reduction="none")
    assert per_list.tolist() == pytest.approx([0.553312, 0.686490], abs=2e-6)
    assert L.ranknet(SCORES, LABELS, MASK).item() == pytest.approx((0.553312 + 0.686490) / 2, abs=2e-6)


def test_listmle_matches_allrank_without_ties() -> None:
    # distinct labels in each list: allRank's random tie order cannot matter
    labels = torch.tensor([[4, 2, 1, 0, 5, 3], [0, 1, 2, 3, -1, -1]])
    for ties in ("first", "random"):
        assert L.listmle(SCORES, labels, labels >= 0, ties=ties).item() == pytest.approx(4.984191, abs=2e-6)


def test_neural_sort_matches_paper_example() -> None:
    # NeuralSort paper's example, tau = 1, no Sinkhorn: P_hat @ labels
    expected = torch.tensor([3.3893, 2.9820, 2.4965, 2.0191, 1.6097, 1.2815])
    scores = torch.tensor([[0.5, 0.2, 0.1, 0.01, 0.65, 0.3]])
    labels = torch.tensor([[4.0, 2, 1, 0, 4, 3]])
    p_hat = L.neural_sort(scores, temperature=1.0)
    torch.testing.assert_close((p_hat[0] @ labels[0])[None], expected[None], atol=1e-4, rtol=0)
    assert torch.allclose(p_hat.sum(2), torch.ones(1, 6))  # row-stochastic
    fused = soft_sort(scores, labels, torch.ones_like(labels, dtype=torch.bool), temperature=1.0, sinkhorn_iterations=0)
    torch.testing.assert_close(fused, expected[None], atol=1e-4, rtol=0)


# ----------------------------------------------------------------------------------------------- the fused kernel
@pytest.mark.parametrize("iterations", [0, 1, 4])
@pytest.mark.parametrize("transposed", [False, True])
def test_fused_soft_sort_equals_dense_log_domain_sinkhorn(iterations: int, transposed: bool, device: str) -> None:
    """The hand-written backward against autograd through the dense log-domain (logsumexp) Sinkhorn."""
    scores, labels, mask = random_case(b=4, n=9, seed=1, device=device)
    scores.requires_grad_(True)
    values = (2.0 ** labels.double() - 1) * mask
    weights = torch.randn(4, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).to(device)
    fused = soft_sort(scores, values, mask, temperature=0.7, sinkhorn_iterations=iterations, transposed=transposed)
    p = L.neural_sort(scores, mask, temperature=0.7, sinkhorn_iterations=iterations, transposed=transposed)
    dense = (p @ values.unsqueeze(2)).squeeze(2)
    torch.testing.assert_close(fused, dense, atol=1e-12, rtol=1e-10)
    (g_fused,) = torch.autograd.grad((fused * weights).sum(), scores)
    (g_dense,) = torch.autograd.grad((dense * weights).sum(), scores)
    torch.testing.assert_close(g_fused, g_dense, atol=1e-12, rtol=1e-10)
    if iterations:  # the scaled matrix is (nearly) doubly stochastic on the real block
        n = mask.sum(1)
        for b in range(4):
            block = p[b, : n[b]][:, mask[b]]
            last = block.sum(0) if transposed else block.sum(1)
            torch.testing.assert_close(last, torch.ones_like(last))


def long_lists_case(dtype: torch.dtype = torch.float64):
    """Lists of 300: spread scores (a banded kernel), near-ties (dense), heavy tails with ties, and a padded list."""
    g = torch.Generator().manual_seed(5)
    n = 300
    scores = torch.stack(
        [
            torch.randn(n, generator=g, dtype=dtype) * 3,
            torch.randn(n, generator=g, dtype=dtype) * 1e-3,
            torch.exp(torch.randn(n, generator=g, dtype=dtype) * 3).round(),
            torch.randn(n, generator=g, dtype=dtype) * 5,
        ]
    )
    labels = torch.randint(0, 5, (4, n), generator=g)
    mask = torch.ones(4, n, dtype=torch.bool)
    mask[3, 170:] = False
    return scores, labels, mask


def test_kernel_blocks_cover_every_nonzero_entry(monkeypatch) -> None:
    from torchrank.losses import _neuralsort as ns

    monkeypatch.setattr(ns, "PER_LIST_ITEMS", 128)  # list by list from 128 items
    scores, _, mask = long_lists_case()
    x, _, _, rank_valid = ns._logits_parts(scores, mask, 1.0)
    kernel = ns._kernel(x.gather(1, ns._descending(x, mask)), rank_valid, padded=True)
    assert kernel.blocks[0] is not None and kernel.blocks[1] is None  # spread scores: a band; near-ties: dense
    assert [m.shape[0] for m in kernel.lists] == [300, 300, 300, 170]  # each list over its real items
    for matrix, spans in zip(kernel.lists, kernel.blocks, strict=True):
        if spans is not None:
            covered = torch.zeros_like(matrix, dtype=torch.bool)
            for r0, r1, c0, c1 in spans:
                covered[r0:r1, c0:c1] = True
            assert not matrix[~covered].any() and matrix[covered].any()


@pytest.mark.parametrize("transposed", [False, True])
def test_list_by_list_products_equal_batched_ones(transposed: bool, monkeypatch) -> None:
    """On a CPU long lists are multiplied list by list, banded ones by blocks of rows over their nonzero
    columns: the same values and gradients as the batched products (float64, 1e-12)."""
    from torchrank.losses import _neuralsort as ns

    scores, labels, mask = long_lists_case()
    values = (2.0 ** labels.double() - 1) * mask
    weights = torch.randn(scores.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(6))

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        s = scores.clone().requires_grad_(True)
        out = soft_sort(s, values, mask, temperature=1.0, sinkhorn_iterations=5, transposed=transposed)
        (grad,) = torch.autograd.grad((out * weights).sum(), s)
        return out.detach(), grad

    monkeypatch.setattr(ns, "PER_LIST_ITEMS", 128)  # list by list from 128 items
    assert ns._per_list(scores, mask)
    per_list = run()
    monkeypatch.setattr(ns, "PER_LIST_ITEMS", 10**9)
    assert not ns._per_list(scores, mask)  # 3 of 4 lists unpadded: batched
    batched = run()
    # mostly padding (lengths 150, 40, 0, 170: groups {170, 150}, {40}; an empty list), vs batched
    mask = mask & (torch.arange(300) < torch.tensor([[150], [40], [0], [300]]))
    assert ns._per_list(scores, mask)
    grouped = run()
    monkeypatch.setattr(ns, "PER_LIST_PADDED_ITEMS", 10**9)
    assert not ns._per_list(scores, mask)
    padded_batched = run()
    for fast, reference in ((per_list, batched), (grouped, padded_batched)):
        torch.testing.assert_close(fast[0], reference[0], atol=1e-12, rtol=1e-10)
        scale = float(reference[1].abs().max())  # summation order: round-off relative to the largest gradient
        torch.testing.assert_close(fast[1], reference[1], atol=1e-12 * scale, rtol=1e-10)


@pytest.mark.parametrize("n", [200, 600])  # grouped (padded, under 512 items) and list by list
def test_long_padded_batches_with_empty_lists(n: int) -> None:
    scores = torch.randn(3, n, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    labels = torch.randint(0, 5, (3, n), generator=torch.Generator().manual_seed(8))
    mask = torch.zeros(3, n, dtype=torch.bool)
    s = scores.clone().requires_grad_(True)
    L.neural_ndcg(s, labels, mask).backward()  # no real item anywhere: skipped lists, zero gradient
    assert not s.grad.any()
    mask[1, :5] = True
    s = scores.clone().requires_grad_(True)
    loss = L.neural_ndcg(s, labels, mask, sinkhorn_iterations=3)
    loss.backward()
    alone = L.neural_ndcg(scores[1:2, :5], labels[1:2, :5], sinkhorn_iterations=3)  # the one real list by itself
    torch.testing.assert_close(loss, alone, atol=1e-12, rtol=0)
    assert not s.grad[[0, 2]].any() and not s.grad[1, 5:].any() and s.grad[1, :5].any()


def test_memory_saved_for_backward_does_not_grow_with_iterations() -> None:
    """One [B, N, N] kernel is kept for backward, plus O(iterations * B * N) vectors."""
    scores = torch.randn(2, 64, requires_grad=True)
    labels = torch.randint(0, 5, (2, 64))

    def saved_bytes(iterations: int) -> int:
        total = 0

        def pack(t: torch.Tensor) -> torch.Tensor:
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            L.neural_ndcg(scores, labels, sinkhorn_iterations=iterations)
        return total

    matrix = 2 * 64 * 64 * 4
    vectors = 2 * 64 * 4  # one [B, N] float32 vector
    assert saved_bytes(1) < 1.25 * matrix
    # each iteration adds two scaling vectors (and nothing of size N^2)
    assert saved_bytes(50) - saved_bytes(10) <= 40 * 2 * vectors


# ----------------------------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("name", list(LOSSES))
def test_gradcheck_float64(name: str, device: str) -> None:
    scores, labels, mask = random_case(device=device)
    scores.requires_grad_(True)
    fn = loss_fn(name)
    assert torch.autograd.gradcheck(lambda s: fn(s, labels, mask, reduction="none").nan_to_num(), (scores,))
    assert torch.autograd.gradcheck(lambda s: fn(s, labels), (scores,))  # no mask


@pytest.mark.parametrize("name", list(LOSSES))
def test_padding_columns_change_nothing(name: str, device: str) -> None:
    scores, labels, mask = random_case(dtype=torch.float32, device=device)
    fn = loss_fn(name)
    base = scores.clone().requires_grad_(True)
    value = fn(base, labels, mask, reduction="none")
    (grad,) = torch.autograd.grad(value.nansum(), base)
    # three padded columns holding garbage (huge scores, -1 and NaN labels) inserted between the real ones (whose
    # order is kept: ListMLE's ties="first" reads it)
    perm = torch.tensor([0, 7, 1, 2, 8, 3, 4, 5, 9, 6], device=device)
    garbage = torch.tensor([[1e30, -5.0, float("nan")]], device=device).expand(3, 3)
    wide = torch.cat([scores, garbage], 1)[:, perm]
    garbage_labels = torch.tensor([[-1.0, 7.0, float("nan")]], device=device).expand(3, 3)
    wide_labels = torch.cat([labels.float(), garbage_labels], 1)[:, perm]
    wide_mask = torch.cat([mask, torch.zeros(3, 3, dtype=torch.bool, device=device)], 1)[:, perm]
    wide.requires_grad_(True)
    wide_value = fn(wide, wide_labels, wide_mask, reduction="none")
    (wide_grad,) = torch.autograd.grad(wide_value.nansum(), wide)
    torch.testing.assert_close(wide_value, value, equal_nan=True, atol=2e-6, rtol=2e-6)
    inverse = perm.argsort()
    torch.testing.assert_close(wide_grad[:, inverse][:, :7], grad, atol=2e-6, rtol=2e-5)
    assert (wide_grad[~wide_mask] == 0).all()


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize(
    "case", ["huge_scores", "all_zero_labels", "fully_padded_row", "bfloat16", "float16", "all_tied_scores"]
)
def test_extreme_inputs_give_finite_values_and_gradients(name: str, case: str, device: str) -> None:
    scores, labels, mask = random_case(dtype=torch.float32, device=device)
    if case == "huge_scores":
        scores = torch.sign(scores) * 1e4
        scores[0, :3] = torch.tensor([1e4, -1e4, 9999.0], device=device)
    elif case == "all_zero_labels":
        labels = torch.zeros_like(labels)
    elif case == "fully_padded_row":
        mask[1] = False
    elif case in ("bfloat16", "float16"):
        scores = scores.to(getattr(torch, case))
    else:
        scores = torch.zeros_like(scores)
    scores.requires_grad_(True)
    value = loss_fn(name)(scores, labels, mask)
    (grad,) = torch.autograd.grad(value, scores)
    assert torch.isfinite(value).all(), value
    assert torch.isfinite(grad).all(), grad
    assert grad.dtype == scores.dtype


# ----------------------------------------------------------------------------------------------- limits
def _exact_case(seed: int, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    scores, labels, mask = random_case(b=4, n=8, seed=seed, device=device)
    order = torch.randperm(8, generator=torch.Generator().manual_seed(seed))
    scores = (torch.arange(32, dtype=torch.float64).reshape(4, 8)[:, order] / 4).to(device)  # gaps of 0.25
    return scores, labels, mask


@pytest.mark.parametrize("k", [None, 3])
@pytest.mark.parametrize("name", ["neural_ndcg", "neural_ndcg_transposed", "approx_ndcg"])
def test_ndcg_surrogates_tend_to_exact_ndcg(name: str, k: int | None, device: str) -> None:
    scores, labels, mask = _exact_case(seed=4, device=device)
    exact = F.ndcg(
        scores, labels, mask=mask, k=k, gain="exponential", ties="first", empty_target_action="skip", reduction="none"
    )
    fn = loss_fn(name)
    errors = [
        (fn(scores, labels, mask, k=k, temperature=t, reduction="none") + exact).nan_to_num().abs().max()
        for t in (1.0, 0.1, 0.01, 0.001)
    ]
    assert errors[-1] < 1e-5, errors
    assert errors[0] > 1e-3  # the smoothing is real at tau = 1


@pytest.mark.parametrize("k", [None, 2])
@pytest.mark.parametrize("max_label", [None, 4])
@pytest.mark.parametrize("transposed", [False, True])
def test_soft_err_tends_to_exact_err(k: int | None, max_label: float | None, transposed: bool, device: str) -> None:
    scores, labels, mask = _exact_case(seed=5, device=device)
    exact = F.err(
        scores, labels, mask=mask, k=k, max_label=max_label, ties="first", empty_target_action="skip", reduction="none"
    )
    errors = [
        (
            L.soft_err(
                scores, labels, mask, k=k, temperature=t, max_label=max_label, transposed=transposed, reduction="none"
            )
            + exact
        )
        .nan_to_num()
        .abs()
        .max()
        for t in (1.0, 0.1, 0.001)
    ]
    assert errors[-1] < 1e-6, errors
    assert errors[0] > 1e-3


def test_soft_err_is_the_cascade_over_expected_stop_probabilities() -> None:
    """Soft ERR = C(P R) computed by hand (plain products) from the dense matrix; rows of P are distributions, so
    each rho_i <= max R and 0 <= C(rho) <= 1 - prod(1 - rho) <= 1."""
    scores, labels, mask = random_case(b=6, n=12, seed=6)
    soft = -L.soft_err(scores, labels, mask, max_label=4, sinkhorn_iterations=7, reduction="none")
    p = L.neural_sort(scores, mask, sinkhorn_iterations=7)
    stop = torch.where(mask, (2.0 ** labels.double() - 1) / 2**4, 0)
    rho = (p @ stop.unsqueeze(2)).squeeze(2)
    assert (rho <= stop.amax(1, keepdim=True) + 1e-12).all()
    for b in range(6):
        if not (labels[b][mask[b]] > 0).any():
            assert torch.isnan(soft[b])
            continue
        reach, expected = 1.0, 0.0
        for i, r in enumerate(rho[b].tolist()):
            expected += reach * r / (i + 1)
            reach *= 1 - r
        assert soft[b].item() == pytest.approx(expected, rel=1e-12)
        assert 0 <= expected <= 1 - reach <= 1


def test_lambda_loss_sums_pairwise_terms_by_brute_force() -> None:
    """NDCG-Loss2++ on a 4-item list from its definition, pair by pair (Wang et al. 2018, eq. 13 and 14)."""
    scores = torch.tensor([[0.3, 1.2, -0.4, 0.9]], dtype=torch.float64)
    labels = torch.tensor([[2, 0, 3, 1]])
    order = torch.argsort(scores[0], descending=True)
    s, y = scores[0, order], labels[0, order].double()
    d = lambda r: 1 / torch.log2(torch.tensor(r + 1.0, dtype=torch.float64))  # noqa: E731  (1-based rank r)
    g = (2**y - 1) / sum((2**v - 1) * d(i + 1) for i, v in enumerate(sorted(y, reverse=True)))
    total = 0.0
    for i in range(4):
        for j in range(4):
            if y[i] > y[j]:
                gap = abs(g[i] - g[j])
                loss2 = abs(d(abs(i - j)) - d(abs(i - j) + 1)) * gap
                lambdarank = abs(d(i + 1) - d(j + 1)) * gap
                total += (10 * loss2 + lambdarank) * torch.log2(1 + torch.exp(-(s[i] - s[j])))
    assert L.lambda_loss(scores, labels).item() == pytest.approx(float(total), rel=1e-12)


def test_listmle_is_plackett_luce_negative_log_likelihood() -> None:
    scores = torch.tensor([[0.3, 1.2, -0.4, 0.9]], dtype=torch.float64)
    labels = torch.tensor([[2, 0, 3, 1]])
    s = scores[0, [2, 0, 3, 1]]  # label order
    expected = -sum(torch.log(torch.exp(s[i]) / torch.exp(s[i:]).sum()) for i in range(4))
    assert L.listmle(scores, labels, ties="first").item() == pytest.approx(float(expected), rel=1e-12)


def test_listmle_tie_handling() -> None:
    scores = torch.tensor([[0.3, 1.2, -0.4, 0.9]], dtype=torch.float64)
    labels = torch.tensor([[1, 1, 0, 1]])
    first = [L.listmle(scores, labels, ties="first").item() for _ in range(3)]
    assert len(set(first)) == 1  # deterministic: input order among equal labels
    s = scores[0, [0, 1, 3, 2]]
    assert first[0] == pytest.approx(float(-sum(s[i] - torch.logsumexp(s[i:], 0) for i in range(4))), rel=1e-12)
    seeded = [L.listmle(scores, labels, generator=torch.Generator().manual_seed(7)).item() for _ in range(2)]
    assert seeded[0] == seeded[1]
    drawn = {round(L.listmle(scores, labels).item(), 9) for _ in range(60)}
    assert len(drawn) > 1  # random order of ties, as allRank


# ----------------------------------------------------------------------------------------------- reduction
def test_reductions_and_empty_target_action() -> None:
    scores, labels, mask = random_case(b=4, n=6, seed=8)
    labels[1] = 0  # no positive label
    labels[3, 2] = 2  # the 1-item list
    per_list = L.neural_ndcg(scores, labels, mask, reduction="none")
    assert per_list.shape == (4,) and torch.isnan(per_list[1]) and not torch.isnan(per_list[[0, 2, 3]]).any()
    assert L.neural_ndcg(scores, labels, mask).item() == pytest.approx(per_list.nanmean().item())
    assert L.neural_ndcg(scores, labels, mask, reduction="sum").item() == pytest.approx(per_list.nansum().item())
    neg = L.neural_ndcg(scores, labels, mask, empty_target_action="neg", reduction="none")
    pos = L.neural_ndcg(scores, labels, mask, empty_target_action="pos", reduction="none")
    assert neg[1].item() == 0 and pos[1].item() == -1
    assert L.neural_ndcg(scores, labels, mask, empty_target_action="neg").item() == pytest.approx(neg.mean().item())
    with pytest.raises(ValueError, match="empty_target_action='error'"):
        L.neural_ndcg(scores, labels, mask, empty_target_action="error")
    # nothing counts: a zero loss with a zero gradient, not NaN
    s = scores.clone().requires_grad_(True)
    value = L.soft_err(s, torch.zeros_like(labels), mask)
    value.backward()
    assert value.item() == 0 and (s.grad == 0).all()
    # pairwise losses: a list with no ordered pair (all labels equal; a single item) does not count
    labels[2] = 1
    per_pair = L.ranknet(scores, labels, mask, reduction="none")
    assert torch.isnan(per_pair[1:]).all() and not torch.isnan(per_pair[0])


# ----------------------------------------------------------------------------------------------- API
@pytest.mark.parametrize("name", list(LOSSES))
def test_module_equals_function(name: str) -> None:
    fn, module_cls, kwargs = LOSSES[name]
    scores, labels, mask = random_case(dtype=torch.float32)
    module = module_cls(**kwargs, reduction="sum")
    assert isinstance(module, torch.nn.Module) and "reduction='sum'" in repr(module)
    torch.testing.assert_close(module(scores, labels, mask), fn(scores, labels, mask, **kwargs, reduction="sum"))
    torch.testing.assert_close(module(scores, labels), fn(scores, labels, **kwargs, reduction="sum"))
    with pytest.raises(TypeError):
        module_cls(0.5)  # keyword-only hyperparameters


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: L.neural_ndcg(SCORES[0], LABELS[0]), "`scores` must have shape \\[B, N\\]"),
        (lambda: L.neural_ndcg(SCORES, LABELS[:, :3]), "`labels` must have the shape"),
        (lambda: L.neural_ndcg(SCORES, LABELS, MASK.int()), "`mask` must be a bool tensor"),
        (lambda: L.neural_ndcg(SCORES.long(), LABELS), "`scores` must be a floating tensor"),
        (lambda: L.neural_ndcg(SCORES, LABELS, temperature=0), "`temperature` must be a finite number > 0"),
        (lambda: L.neural_ndcg(SCORES, LABELS, sinkhorn_iterations=-1), "`sinkhorn_iterations`"),
        (lambda: L.neural_ndcg(SCORES, LABELS, k=0), "`k` must be a positive int"),
        (lambda: L.approx_ndcg(SCORES, LABELS, gain="power"), "`gain` must be one of"),
        (lambda: L.approx_ndcg(SCORES, LABELS, reduction="avg"), "`reduction` must be one of"),
        (lambda: L.soft_err(SCORES, LABELS, empty_target_action="drop"), "`empty_target_action` must be one of"),
        (lambda: L.soft_err(SCORES, LABELS, max_label=0), "`max_label` must be a finite number > 0"),
        (lambda: L.lambda_loss(SCORES, LABELS, weighting="ndcg_loss1"), "`weighting` must be one of"),
        (lambda: L.lambda_loss(SCORES, LABELS, sigma=-1.0), "`sigma` must be a finite number > 0"),
        (lambda: L.listmle(SCORES, LABELS, ties="average"), "`ties` must be one of"),
        (lambda: L.listnet(SCORES, LABELS, validate_args=True), "mark padding with `mask`"),
        (lambda: L.ranknet(SCORES.clone().fill_(float("nan")), LABELS.abs(), validate_args=True), "NaN"),
        # None is no empty_target_action (torchrank.functional refuses it too); it used to pass as "neg"
        (lambda: L.neural_ndcg(SCORES, LABELS, empty_target_action=None), "`empty_target_action` must be one of"),
        (lambda: L.approx_ndcg(SCORES, LABELS, empty_target_action=None), "`empty_target_action` must be one of"),
        (lambda: L.soft_err(SCORES, LABELS, empty_target_action=None), "`empty_target_action` must be one of"),
        # non-finite options gave a silent NaN loss
        (lambda: L.lambda_loss(SCORES, LABELS, sigma=float("inf")), "`sigma` must be a finite number > 0"),
        (lambda: L.ranknet(SCORES, LABELS, sigma=float("inf")), "`sigma` must be a finite number > 0"),
        (lambda: L.ranknet(SCORES, LABELS, sigma=float("nan")), "`sigma` must be a finite number > 0"),
        (lambda: L.lambda_loss(SCORES, LABELS, mu=float("nan")), "`mu` must be a finite number >= 0"),
        (lambda: L.lambda_loss(SCORES, LABELS, mu=float("inf")), "`mu` must be a finite number >= 0"),
        (lambda: L.soft_err(SCORES, LABELS, max_label=float("inf")), "`max_label` must be a finite number > 0"),
        (lambda: L.neural_ndcg(SCORES, LABELS, temperature=float("inf")), "`temperature` must be a finite number"),
        (lambda: L.approx_ndcg(SCORES, LABELS, temperature=float("inf")), "`temperature` must be a finite number"),
        (lambda: L.soft_err(SCORES, LABELS, temperature=float("inf")), "`temperature` must be a finite number"),
        (lambda: L.neural_sort(SCORES, temperature=float("inf")), "`temperature` must be a finite number"),
        (lambda: L.approx_ndcg(SCORES, LABELS, log_base=float("inf")), "`log_base` must be a finite number > 1"),
        # a label above max_label: a stop probability above 1 (torchrank.functional.err refuses it too)
        (lambda: L.soft_err(SCORES, LABELS.abs(), max_label=2, validate_args=True), "label above `max_label=2`"),
    ],
)
def test_bad_arguments_are_rejected_with_their_name(call, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@pytest.mark.parametrize(
    ("module_cls", "options", "match"),
    [
        (L.NeuralNDCGLoss, {"temperature": 0}, "`temperature` must be a finite number > 0"),
        (L.NeuralNDCGLoss, {"sinkhorn_iterations": -1}, "`sinkhorn_iterations`"),
        (L.ApproxNDCGLoss, {"k": 0}, "`k` must be a positive int"),
        (L.ApproxNDCGLoss, {"discount": "cubic"}, "`discount` must be one of"),
        (L.SoftERRLoss, {"transform": "linear"}, "`transform` must be one of"),
        (L.SoftERRLoss, {"max_label": 0}, "`max_label` must be a finite number > 0"),
        (L.SoftERRLoss, {"empty_target_action": "drop"}, "`empty_target_action` must be one of"),
        (L.LambdaLoss, {"weighting": "ndcg_loss1"}, "`weighting` must be one of"),
        (L.LambdaLoss, {"mu": -1.0}, "`mu` must be a finite number >= 0"),
        (L.RankNetLoss, {"sigma": 0}, "`sigma` must be a finite number > 0"),
        (L.ListMLELoss, {"ties": "average"}, "`ties` must be one of"),
        (L.ListNetLoss, {"reduction": "avg"}, "`reduction` must be one of"),
        (L.NeuralNDCGLoss, {"empty_target_action": None}, "`empty_target_action` must be one of"),
        (L.ApproxNDCGLoss, {"temperature": float("inf")}, "`temperature` must be a finite number > 0"),
        (L.SoftERRLoss, {"max_label": float("inf")}, "`max_label` must be a finite number > 0"),
        (L.LambdaLoss, {"mu": float("inf")}, "`mu` must be a finite number >= 0"),
        (L.LambdaLoss, {"sigma": float("inf")}, "`sigma` must be a finite number > 0"),
        (L.RankNetLoss, {"sigma": float("inf")}, "`sigma` must be a finite number > 0"),
    ],
)
def test_modules_refuse_at_construction_what_their_function_refuses(module_cls, options, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        module_cls(**options)
    with pytest.raises(ValueError, match=match):
        module_cls._function(SCORES, LABELS, **options)


# one case per loss function (the variants of LOSSES share their function's checks)
EACH_FUNCTION = ["neural_ndcg", "approx_ndcg", "lambda_ndcg_loss2pp", "soft_err", "listnet", "listmle", "ranknet"]


@pytest.mark.parametrize("name", EACH_FUNCTION)
@pytest.mark.parametrize("bad", [float("inf"), -float("inf")])
def test_validate_args_refuses_infinite_scores_at_real_items(name: str, bad: float) -> None:
    scores, labels, mask = random_case(dtype=torch.float32)
    fn = loss_fn(name)
    padded = scores.clone()
    padded[~mask] = bad  # padding may hold anything
    assert torch.isfinite(fn(padded, labels, mask, validate_args=True))
    scores[0, 2] = bad  # every loss is NaN here unchecked (differences inf - inf)
    with pytest.raises(ValueError, match="`scores` contains NaN or an infinity at a real"):
        fn(scores, labels, mask, validate_args=True)


def test_soft_err_validate_args_accepts_labels_up_to_max_label() -> None:
    scores, labels, mask = random_case()  # labels 0..4
    labels[~mask] = 9  # padding's labels are not read
    value = L.soft_err(scores, labels, mask, max_label=4, validate_args=True)
    assert value == L.soft_err(scores, labels, mask, max_label=4)
    with pytest.raises(ValueError, match="label above `max_label=3`"):
        L.soft_err(scores, labels, mask, max_label=3, validate_args=True)


def test_module_signature_is_its_function_options():
    for _, module_cls, _ in LOSSES.values():
        function = inspect.signature(module_cls._function).parameters.values()
        options = [(p.name, p.default) for p in function if p.kind is p.KEYWORD_ONLY]
        module = [(p.name, p.default) for p in inspect.signature(module_cls).parameters.values()]
        assert module == options
        assert all(p.kind is p.KEYWORD_ONLY for p in inspect.signature(module_cls).parameters.values())


def test_callable_gain_and_discount_follow_functional() -> None:
    scores, labels, mask = _exact_case(seed=9)
    kwargs = {"gain": lambda y: y**2, "discount": lambda r: r**0.5, "k": 4}
    exact = F.ndcg(scores, labels, mask=mask, ties="first", empty_target_action="skip", reduction="none", **kwargs)
    value = L.neural_ndcg(scores, labels, mask, temperature=1e-3, reduction="none", **kwargs)
    torch.testing.assert_close(-value, exact, equal_nan=True, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------------------------- torch.compile
@pytest.mark.parametrize("name", ["neural_ndcg", "lambda_ndcg_loss2pp", "listmle"])
def test_torch_compile(name: str) -> None:
    """Captured whole (fullgraph) by dynamo, the custom autograd Functions through AOTAutograd; small shapes, and
    the aot_eager backend, so that no C++ compilation runs in the test suite."""
    pytest.importorskip("torch._dynamo")
    scores, labels, mask = random_case(b=2, n=5, dtype=torch.float32)
    fn = functools.partial(loss_fn(name), sinkhorn_iterations=1) if "neural" in name else loss_fn(name)
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    s1, s2 = scores.clone().requires_grad_(True), scores.clone().requires_grad_(True)
    expected, value = fn(s1, labels, mask), compiled(s2, labels, mask)
    expected.backward()
    value.backward()
    torch.testing.assert_close(value, expected)
    torch.testing.assert_close(s2.grad, s1.grad)
