"""The shared core (torchrank.functional.core): its formulas against written-out references, and exponential gains
of labels whose 2^label the working dtype cannot hold (float32: labels above 127), in the measures and the losses:
computed exactly, or refused with a clear error; never a silent inf or NaN."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

import torchrank
import torchrank.functional as F
import torchrank.losses as L
import torchrank.metrics as M
from torchrank.functional import backends, core

BIG = torch.tensor([[150.0, 0.0, 300.0, 149.0, 2.0], [1.0, 3.0, 0.0, 2.0, 0.0]])  # 2^300 is inf in float32
SCORES = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5], [0.5, 0.4, 0.3, 0.2, 0.1]])  # rank order = column order


def exact_ndcg(labels: list[int], k: int | None = None) -> float:
    """NDCG with gain 2^label - 1 in exact rational arithmetic (labels in rank order, log2 discount in float64)."""
    def dcg(row: list[int]) -> Fraction:
        return sum(Fraction(2**g - 1) / Fraction(math.log2(i + 2)) for i, g in enumerate(row[:k]))

    ideal = dcg(sorted(labels, reverse=True))
    return float(dcg(labels) / ideal) if ideal else 0.0


def exact_err(labels: list[int], top: int) -> float:
    """ERR (Chapelle et al., 2009) with R = (2^g - 1) / 2^top, exact rationals (labels in rank order)."""
    value, reach = Fraction(0), Fraction(1)
    for i, g in enumerate(labels, start=1):
        stop = Fraction(2**g - 1, 2**top)
        value += reach * stop / i
        reach *= 1 - stop
    return float(value)


def unscaled(labels: torch.Tensor) -> torch.Tensor:
    """2^label - 1 as a callable gain: the core leaves callables as they are (no division by 2^top)."""
    return torch.pow(2.0, labels) - 1


# ------------------------------------------------------------------------------------------------ the formulas
def test_discount_weights_are_the_documented_divisors():
    ranks = torch.arange(1, 6, dtype=torch.float64)
    log3 = torch.log(ranks + 1) / math.log(3)
    torch.testing.assert_close(core.discount_weights("log", ranks, log_base=3.0), 1 / log3)
    torch.testing.assert_close(core.discount_weights("power", ranks, power=2.0), 1 / ranks**2)
    torch.testing.assert_close(core.discount_weights("linear", ranks), 1 / ranks)
    torch.testing.assert_close(core.discount_weights(lambda r: r + 1, ranks), 1 / (ranks + 1))
    with pytest.raises(ValueError, match="`discount`"):
        core.discount_weights("cubic", ranks)


@pytest.mark.parametrize("top", [None, 3.0, 7.0])
def test_exponential_gain_is_two_to_the_label_minus_one_over_two_to_top(top):
    labels = torch.tensor([0.0, 1.0, 2.0, 3.0, 2.5], dtype=torch.float64)
    expected = torch.tensor([2.0**g - 1 for g in labels.tolist()], dtype=torch.float64) / 2.0 ** (top or 0)
    torch.testing.assert_close(core.exponential_gain(labels, top), expected)


def test_gain_values_names_and_callables():
    labels = torch.tensor([[0.0, 1.0, 4.0]])
    assert torch.equal(core.gain_values(labels, "linear"), labels)
    assert torch.equal(core.gain_values(labels, "exponential"), torch.tensor([[0.0, 1.0, 15.0]]))
    assert torch.equal(core.gain_values(labels, lambda y: y * 3), labels * 3)
    assert torch.equal(core.gain_values(labels, lambda y: y + 1), torch.tensor([[0.0, 2.0, 5.0]]))  # label 0: 0


@pytest.mark.parametrize("ties", ["average", "first"])
def test_a_callable_gain_counts_no_padding_and_no_label_zero(ties):
    """A gain map with gain(0) != 0: masked items, the 0-padding of ideal_target and label-0 items add nothing, so a
    query's value does not depend on how much padding the batch gave it (it did: 0.84 for a list whose value is 1)."""
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 2]])
    plus_one = {"gain": lambda y: y + 1, "ties": ties}
    alone = F.ndcg(preds[:, :2], target[:, :2], **plus_one)
    assert alone.item() == 1.0
    torch.testing.assert_close(F.ndcg(preds, target, mask=torch.tensor([[True, True, False]]), **plus_one), alone)
    by_hand = {"gain": lambda y: torch.where(y > 0, y + 1, 0), "ties": ties}
    for padding in range(3):
        ideal = torch.nn.functional.pad(target, (0, padding))
        torch.testing.assert_close(F.ndcg(preds, target, ideal_target=ideal, **plus_one),
                                   F.ndcg(preds, target, **by_hand))


def test_negative_gains_count_zero_in_the_ideal_as_trec_eval_counts_them():
    """trec_eval's ``ndcg.1=-1``: the ideal DCG sums the positive gains only (m_ndcg.c), the DCG every gain."""
    gains = {1.0: -1.0}
    preds, target = torch.tensor([[0.9, 0.8]]), torch.tensor([[1, 2]])
    value = F.ndcg(preds, target, gain=lambda y: torch.where(y == 1, -1.0, y.double()).to(y.dtype))
    dcg = gains[1.0] / math.log2(2) + 2 / math.log2(3)
    ideal = 2 / math.log2(2)  # the label-2 item alone: gain -1 adds nothing to the ideal ranking
    assert value.item() == pytest.approx(dcg / ideal, abs=1e-6)


def test_ideal_dcg_sorts_the_real_items_and_cuts_at_k():
    gains = torch.tensor([[1.0, 5.0, 3.0, 9.0]])
    mask = torch.tensor([[True, True, True, False]])  # the 9 is padding
    weights = core.rank_weights("log", 4, dtype=torch.float32, device="cpu")
    expected = 5 + 3 / math.log2(3)
    torch.testing.assert_close(core.ideal_dcg(gains, weights, k=2, mask=mask), torch.tensor([expected]))
    torch.testing.assert_close(core.ideal_dcg(gains, weights, mask=mask), torch.tensor([expected + 1 / math.log2(4)]))


def test_largest_exponent_is_the_last_finite_power_of_two():
    for dtype in (torch.float32, torch.float64):
        e = core.largest_exponent(dtype)
        assert math.isfinite(torch.tensor(2.0, dtype=dtype).pow(e).item())
        assert math.isinf(torch.tensor(2.0, dtype=dtype).pow(e + 1).item())


# ------------------------------------------------------------------------------------------------ the measures
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("k", [None, 3])
def test_ndcg_exp_of_labels_past_float32_is_exact(dtype, k):
    preds = SCORES.to(dtype)
    values = F.ndcg(preds, BIG, k=k, gain="exponential", reduction="none")
    expected = torch.tensor([exact_ndcg([int(g) for g in row], k) for row in BIG.tolist()], dtype=values.dtype)
    assert torch.isfinite(values).all()
    torch.testing.assert_close(values, expected)
    via_evaluate = F.evaluate(preds, BIG, ["ndcg_exp" if k is None else f"ndcg_exp@{k}"], reduction="none")
    torch.testing.assert_close(next(iter(via_evaluate.values())), expected)


@pytest.mark.parametrize("ties", ["average", "first"])
def test_ndcg_exp_with_ideal_target_and_ties_equals_the_float64_callable_gain(ties):
    preds = torch.tensor([[0.9, 0.9, 0.5, 0.1], [0.3, 0.3, 0.3, 0.2]])
    target = torch.tensor([[200, 0, 201, 3], [1, 128, 0, 0]])
    ideal = torch.tensor([[201, 200, 205, 3, 0], [128, 1, 0, 0, 0]])  # 205 judged but not retrieved
    ours = F.ndcg(preds, target, ideal_target=ideal, gain="exponential", ties=ties, reduction="none")
    reference = F.ndcg(preds.double(), target, ideal_target=ideal, gain=unscaled, ties=ties, reduction="none")
    assert torch.isfinite(ours).all() and ours.dtype == torch.float32
    torch.testing.assert_close(ours, reference.float())


@pytest.mark.parametrize("max_label", [None, 300])
def test_err_of_labels_past_float32_is_exact(max_label):
    values = F.err(SCORES, BIG, max_label=max_label, reduction="none")
    rows = [[int(g) for g in row] for row in BIG.tolist()]
    expected = torch.tensor([exact_err(row, max_label or max(row)) for row in rows])
    assert torch.isfinite(values).all()
    torch.testing.assert_close(values, expected)


@pytest.mark.parametrize("backend", ["numpy", "torch", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_dcg_exp_past_the_working_dtype_raises_a_clear_error(dtype, backend):
    """On every backend, through the function, ``evaluate`` and a metric's update (which, on a device backend, reads
    nothing and raises at compute)."""
    if backend == "triton" and not (torch.cuda.is_available() or backends.triton_interprets()):
        pytest.skip("no CUDA device and no Triton interpreter")
    overflow = r"holds a label whose exponential gain 2\^label - 1 overflows.*127 in float32.*float64 scores.*"
    scores, ideal = SCORES.to(dtype), torch.cat([BIG, torch.full((2, 1), 500.0)], 1)
    with torchrank.use_backend(backend):
        with pytest.raises(ValueError, match="`target` " + overflow):
            F.dcg(scores, BIG, gain="exponential")
        with pytest.raises(ValueError, match="`target` " + overflow):
            F.evaluate(scores, BIG, ["ndcg@3", "dcg_exp@3"])
        with pytest.raises(ValueError, match="`target` " + overflow):
            F.dcg(scores, BIG, ideal_target=ideal, gain="exponential")
        with pytest.raises(ValueError, match="`ideal_target` " + overflow):
            F.dcg(scores, BIG.clamp_max(127), ideal_target=torch.full((2, 1), 200.0), gain="exponential")
        assert F.dcg(scores, BIG.clamp_max(127), gain="exponential").isfinite()  # up to 127: summed, finite
        assert F.ndcg(scores, BIG, gain="exponential").isfinite()  # a ratio: no limit
        metric = M.DCG(gain="exponential")
        metric.update(scores, BIG.clamp_max(127))
        if backend == "numpy":  # the CPU path reads values at once
            with pytest.raises(ValueError, match="`target` " + overflow):
                metric.update(scores, BIG)
        else:
            metric.update(scores, BIG)
            with pytest.raises(ValueError, match="`target` " + overflow + " in update 2"):
                metric.compute()


def test_dcg_exp_computes_in_float64_and_refuses_past_it():
    values = F.dcg(SCORES.double(), BIG, gain="exponential", reduction="none")
    expected = [sum((2.0**g - 1) / math.log2(i + 2) for i, g in enumerate(row)) for row in BIG.tolist()]
    torch.testing.assert_close(values, torch.tensor(expected, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"exponential gain 2\^label - 1 overflows"):
        F.dcg(SCORES.double(), torch.full((2, 5), 1024.0), gain="exponential")
    # the linear gain has nothing to overflow, and the check reads values only with validate_args
    assert torch.isfinite(F.dcg(SCORES, BIG))
    assert F.dcg(SCORES, torch.full((2, 5), 100.0), gain="exponential").isfinite()


# ------------------------------------------------------------------------------------------------ the losses
LOSSES = {
    "neural_ndcg": lambda s, y, **kw: L.neural_ndcg(s, y, temperature=0.3, **kw),
    "approx_ndcg": lambda s, y, **kw: L.approx_ndcg(s, y, temperature=0.3, **kw),
    "lambda_loss": lambda s, y, **kw: L.lambda_loss(s, y, **kw),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_exponential_loss_of_labels_past_float32_equals_the_float64_callable_gain(name):
    scores = torch.tensor([[0.3, 1.2, -0.5, 0.8, 0.1], [2.0, -1.0, 0.5, 0.0, 0.7]], requires_grad=True)
    loss = LOSSES[name](scores, BIG, gain="exponential")
    loss.backward()
    reference = LOSSES[name](scores.detach().double(), BIG.double(), gain=unscaled)
    assert torch.isfinite(loss) and torch.isfinite(scores.grad).all() and scores.grad.abs().sum() > 0
    torch.testing.assert_close(loss, reference.float())


def test_soft_err_of_labels_past_float32_is_finite_and_tends_to_exact_err():
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5]], requires_grad=True)
    labels = BIG[:1]
    loss = L.soft_err(scores, labels, temperature=1e-3)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(scores.grad).all()
    expected = exact_err([int(g) for g in labels[0].tolist()], 300)
    torch.testing.assert_close(loss, torch.tensor(-expected), rtol=1e-4, atol=1e-5)


def test_small_labels_keep_their_exponential_values():
    # dividing by 2^top changes nothing but overflow: the values of ordinary 0-4 labels are those of 2^label - 1
    labels = torch.tensor([[3.0, 2.0, 0.0, 4.0, 1.0]])
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5]])
    expected = torch.tensor(exact_ndcg([3, 2, 0, 4, 1]))
    torch.testing.assert_close(F.ndcg(scores, labels, gain="exponential"), expected)
    torch.testing.assert_close(L.approx_ndcg(scores, labels, temperature=1e-4), -expected)
