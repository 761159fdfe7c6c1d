"""Worked examples from the literature, recomputed by hand in each test."""

from __future__ import annotations

import math

import pytest
import torch

import torchrank.functional as F


def _ranked(labels):
    """Labels already in rank order: strictly decreasing scores."""
    labels = torch.as_tensor(labels, dtype=torch.float64)
    return torch.arange(labels.numel(), 0, -1, dtype=torch.float64), labels


def test_average_precision_textbook():
    # relevant at ranks 1, 2, 4, 5, 7, 9 of 10; 6 relevant: (1 + 1 + 3/4 + 4/5 + 5/7 + 6/9) / 6 = 0.822
    preds, target = _ranked([1, 1, 0, 1, 1, 0, 1, 0, 1, 0])
    value = F.average_precision(preds, target)
    assert value.item() == pytest.approx((1 + 1 + 3 / 4 + 4 / 5 + 5 / 7 + 6 / 9) / 6)
    assert round(value.item(), 3) == 0.822


def test_map_three_queries():
    # the query above, one with relevant at ranks 2, 5, 7 of 3 relevant, one with relevant at ranks 1, 3
    # of 4 relevant (two never retrieved): MAP = mean of the three APs
    ap = [(1 + 1 + 3 / 4 + 4 / 5 + 5 / 7 + 6 / 9) / 6, (1 / 2 + 2 / 5 + 3 / 7) / 3, (1 + 2 / 3) / 4]
    preds = torch.arange(10, 0, -1.0).repeat(3, 1)
    target = torch.zeros(3, 10)
    target[0, [0, 1, 3, 4, 6, 8]] = 1
    target[1, [1, 4, 6]] = 1
    target[2, [0, 2]] = 1
    ideal = torch.cat([target, torch.tensor([[0, 0], [0, 0], [1, 1]])], 1)
    torch.testing.assert_close(F.average_precision(preds, target, ideal_target=ideal, reduction="none"),
                               torch.tensor(ap))
    assert F.average_precision(preds, target, ideal_target=ideal).item() == pytest.approx(sum(ap) / 3)


def test_dcg_ndcg_wikipedia_style():
    # labels [3, 3, 0, 3, 2] in rank order: DCG@5 = 3 + 3/log2(3) + 0 + 3/log2(5) + 2/log2(6) = 6.958;
    # the ideal order [3, 3, 3, 2, 0] gives 7.254; NDCG = 0.959
    preds, target = _ranked([3, 3, 0, 3, 2])
    dcg = 3 + 3 / math.log2(3) + 3 / math.log2(5) + 2 / math.log2(6)
    idcg = 3 + 3 / math.log2(3) + 3 / math.log2(4) + 2 / math.log2(5)
    assert F.dcg(preds, target, k=5).item() == pytest.approx(dcg)
    assert F.ndcg(preds, target, k=5).item() == pytest.approx(dcg / idcg)
    # the published figures are truncated (6.9585, 7.2542, 0.9592)
    assert F.dcg(preds, target, k=5).item() == pytest.approx(6.958, abs=2e-3)
    assert idcg == pytest.approx(7.253, abs=2e-3)
    assert F.ndcg(preds, target, k=5).item() == pytest.approx(0.959, abs=1e-3)


def test_err_chapelle_exponential_utility():
    # R_g = (2^g - 1) / 2^3 for labels [3, 2, 3, 1, 0]: R = [7/8, 3/8, 7/8, 1/8, 0];
    # ERR = R1 + (1-R1) R2 / 2 + (1-R1)(1-R2) R3 / 3 + (1-R1)(1-R2)(1-R3) R4 / 4 = 0.9215.
    # (The issue quoted 0.936, which no order of these labels reaches under this definition.)
    preds, target = _ranked([3, 2, 3, 1, 0])
    r = [7 / 8, 3 / 8, 7 / 8, 1 / 8, 0]
    expected, reach = 0.0, 1.0
    for i, ri in enumerate(r, 1):
        expected += reach * ri / i
        reach *= 1 - ri
    assert F.err(preds, target, max_label=3).item() == pytest.approx(expected)
    assert round(expected, 4) == 0.9215


def test_err_sigmoid_and_callable_transform():
    preds, target = _ranked([2, 0, 1])
    r = [2 * (1 / (1 + math.exp(-g))) - 1 for g in (2, 0, 1)]
    expected = r[0] + (1 - r[0]) * r[1] / 2 + (1 - r[0]) * (1 - r[1]) * r[2] / 3
    assert F.err(preds, target, transform="sigmoid").item() == pytest.approx(expected)
    assert F.err(preds, target, transform=lambda g: g / 2).item() == pytest.approx(1.0)


def test_rbp_moffat_zobel():
    # binary relevance at ranks 1, 3, 4 with p = 0.8: (1 - p)(1 + p^2 + p^3); residual p^5 at depth 5
    preds, target = _ranked([1, 0, 1, 1, 0])
    assert F.rbp(preds, target, p=0.8).item() == pytest.approx(0.2 * (1 + 0.64 + 0.512))
    assert F.rbp(preds, target, p=0.8, residual=True).item() == pytest.approx(0.8**5)
    judged = torch.tensor([True, False, True, True, True])
    assert F.rbp(preds, target, p=0.8, residual=True, judged=judged).item() == pytest.approx(0.8**5 + 0.2 * 0.8)
    assert F.rbp(preds, target, p=0.8, k=2, residual=True, judged=judged).item() == pytest.approx(0.64 + 0.16)


def test_graded_rbp_scales_by_top_label():
    preds, target = _ranked([4, 0, 2])
    assert F.rbp(preds, target, p=0.5, max_label=4).item() == pytest.approx(0.5 * (1 + 0.5 * 0.25))


def test_reciprocal_rank_hit_frp():
    preds, target = _ranked([0, 0, 1, 0, 1])
    assert F.reciprocal_rank(preds, target).item() == pytest.approx(1 / 3)
    assert F.hit_rate(preds, target, k=[2, 3]).tolist() == [0.0, 1.0]
    assert F.first_relevant_position(preds, target, k=[2, 3]).tolist() == [3.0, 3.0]


def test_average_recall_and_mean_rank():
    # relevant at ranks 2 and 3 of 3 relevant (one not retrieved)
    preds, target = _ranked([0, 1, 1, 0])
    ideal = torch.tensor([1.0, 1.0, 1.0])
    assert F.average_recall(preds, target, ideal_target=ideal).item() == pytest.approx((1 / 3 + 2 / 3) / 3)
    # positions 2, 3 and the missing one at list length + 1 = 5
    assert F.mean_rank(preds, target, ideal_target=ideal).item() == pytest.approx((2 + 3 + 5) / 3)


def test_f1_and_r_precision():
    preds, target = _ranked([1, 0, 1, 0, 0, 1])
    p, r = 2 / 4, 2 / 3
    assert F.f1(preds, target, k=4).item() == pytest.approx(2 * p * r / (p + r))
    assert F.r_precision(preds, target).item() == pytest.approx(2 / 3)
