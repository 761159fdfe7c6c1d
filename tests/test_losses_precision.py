"""Every loss in float32 against itself in float64 (the reference, on the same float32-representable inputs) on
the scores a ranker meets when it starts on raw web-search features: heavy-tailed, tied, up to 1e8 in
magnitude, lists up to 1,024 items (issue 21). Tolerances: loss 1e-3 relative, gradient 1e-2 in relative norm;
no exactly-zero gradient where float64's is not negligible; finite loss and gradients up to 1e30 and in bfloat16.
"""

from __future__ import annotations

import functools

import pytest
import torch

import torchrank.losses as L

# each loss at its defaults (the temperature 1 a user starts with), plus the cut-off and transposed variants
LOSSES = {
    "neural_ndcg": functools.partial(L.neural_ndcg),
    "neural_ndcg_transposed_k": functools.partial(L.neural_ndcg, transposed=True, k=10),
    "neural_ndcg_k": functools.partial(L.neural_ndcg, k=10),
    "approx_ndcg": functools.partial(L.approx_ndcg),
    "approx_ndcg_k": functools.partial(L.approx_ndcg, k=10),
    "lambda_loss": functools.partial(L.lambda_loss),
    "lambdarank_k": functools.partial(L.lambda_loss, weighting="lambdarank", k=10),
    "soft_err": functools.partial(L.soft_err),
    "soft_err_k": functools.partial(L.soft_err, k=10, max_label=4),
    "listnet": functools.partial(L.listnet),
    "listmle": functools.partial(L.listmle, ties="first"),
    "ranknet": functools.partial(L.ranknet),
}

# gradients are compared in norm to 1e-2 of float64's plus this floor: a gradient of norm 1e-4 moves an NDCG or
# ERR (in [0, 1]) by 1e-4 per unit of score at temperature 1, a flat loss. Where the float64 gradient is that flat
# (hard sorts far from any tie: norms of 1e-15 at k=10 on 1e8 scores), float32 resolves it only to its own
# round-off, ~1e-5 in lists of 1,024 (the NeuralSort gradient weighs ranks by up to N)
FLAT = 1e-4


def raw_feature_scores(n: int, scale: float, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two lists scored by a raw feature: log-normal (sigma 4) up to ``scale``, rounded (ties), 30% zeros, 20%
    negated, 10% padding; labels 0..4. Returned as float32 (the float64 reference reads the same values)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.exp(torch.randn(2, n, generator=g, dtype=torch.float64) * 4)
    x = (x / x.amax(1, keepdim=True) * scale).round()
    x = torch.where(torch.rand(2, n, generator=g) < 0.3, 0.0, x)
    x = torch.where(torch.rand(2, n, generator=g) < 0.2, -x, x)
    labels = torch.randint(0, 5, (2, n), generator=g)
    mask = torch.rand(2, n, generator=g) > 0.1
    mask[:, 0] = True
    return x.float(), labels, mask


def count_scores(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Integer counts (0..1000, heavy-tailed, many ties) as scores: gaps of 17-40 temperatures, where a float32
    sigmoid rounds to 1 and its autograd slope to 0."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.exp(torch.randn(2, n, generator=g) * 2) * 10).round().clamp(max=1000)
    return x, torch.randint(0, 5, (2, n), generator=g), torch.ones(2, n, dtype=torch.bool)


def value_and_grad(fn, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype):
    scores = scores.to(dtype).requires_grad_(True)
    value = fn(scores, labels, mask)
    (grad,) = torch.autograd.grad(value, scores)
    return value.detach().double(), grad.double()


def assert_close_to_float64(fn, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> None:
    v64, g64 = value_and_grad(fn, scores, labels, mask, torch.float64)
    v32, g32 = value_and_grad(fn, scores, labels, mask, torch.float32)
    assert torch.isfinite(v32) and torch.isfinite(g32).all()
    assert (v32 - v64).abs() <= 1e-3 * v64.abs(), (v32.item(), v64.item())
    error, norm = (g32 - g64).norm().item(), g64.norm().item()
    assert error <= 1e-2 * norm + FLAT, (error, norm)
    if norm > FLAT:  # every item whose float64 gradient matters gets a nonzero float32 one
        matters = g64.abs() > 1e-6 * norm
        assert not (matters & (g32 == 0)).any(), int((matters & (g32 == 0)).sum())


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("n", [16, 256, 1024])
@pytest.mark.parametrize("scale", [1e3, 1e8])
def test_float32_matches_float64_on_raw_feature_scores(name: str, n: int, scale: float) -> None:
    assert_close_to_float64(LOSSES[name], *raw_feature_scores(n, scale, seed=n))


@pytest.mark.parametrize("name", list(LOSSES))
def test_float32_matches_float64_on_count_scores(name: str) -> None:
    assert_close_to_float64(LOSSES[name], *count_scores(512, seed=1))


def test_approx_ndcg_gives_gradient_to_items_far_from_their_neighbours() -> None:
    # three items 20 temperatures apart: float32's sigmoid is 1 there, its true slope e^-20 = 2e-9 is not 0
    scores = torch.tensor([[40.0, 20.0, 0.0]], requires_grad=True)
    L.approx_ndcg(scores, torch.tensor([[0, 1, 2]])).backward()
    reference = torch.tensor([[40.0, 20.0, 0.0]], dtype=torch.float64, requires_grad=True)
    L.approx_ndcg(reference, torch.tensor([[0, 1, 2]])).backward()
    assert (scores.grad != 0).all()
    torch.testing.assert_close(scores.grad.double(), reference.grad, rtol=1e-4, atol=0)


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scale", [1e8, 1e30])
def test_finite_up_to_1e30_and_in_bfloat16(name: str, dtype: torch.dtype, scale: float) -> None:
    scores, labels, mask = raw_feature_scores(256, scale, seed=3)
    scores = scores.to(dtype).requires_grad_(True)
    value = LOSSES[name](scores, labels, mask)
    (grad,) = torch.autograd.grad(value, scores)
    assert torch.isfinite(value), value
    assert torch.isfinite(grad).all()
    assert grad.dtype == dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_listmle_gradient_is_accurate_while_scores_stay_below_1e10(dtype: torch.dtype) -> None:
    """docs/losses.md's bound: the log-cumsum-exp backward is off by about 1e-16 |s| relative, under 1e-6 below 1e10
    (the worst order of three items has the gradient [2, -1, -1] at any scale); the value 3s holds at any scale."""
    for scale in (1e2, 1e6, 1e9, 1e30):
        scores = torch.tensor([[scale, 0.0, -scale]], dtype=dtype, requires_grad=True)
        value = L.listmle(scores, torch.tensor([[0, 1, 2]]), ties="first")
        assert value.item() == pytest.approx(3 * scale, rel=1e-6)
        if scale < 1e10:
            value.backward()
            torch.testing.assert_close(scores.grad, torch.tensor([[2.0, -1.0, -1.0]], dtype=dtype), rtol=1e-6, atol=0)
