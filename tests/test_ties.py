"""``ties`` against brute-force enumeration of every order of the tie groups.

Averaging ``ties="first"`` over all N! input permutations weighs every order of each tie group equally,
so that mean is the expected value under uniformly random tie orders: what ``ties="average"`` claims.
All permutations go through as one batch of N! queries.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from conftest import ALL_MEASURES, CUTOFF_MEASURES

# small lists with tie groups of several sizes, graded labels, padding and cut-offs inside groups
CASES = [
    ([3.0, 3.0, 3.0, 1.0, 1.0, 0.5], [0, 2, 1, 0, 3, 0]),
    ([2.0, 2.0, 2.0, 2.0, 2.0, 2.0], [1, 0, 0, 3, 0, 1]),
    ([5.0, 4.0, 4.0, 4.0, 4.0, 1.0, 1.0], [0, 0, 1, 0, 2, 1, 0]),
    ([1.0, 1.0, 0.0, 0.0, 0.0, -1.0], [0, 0, 0, 0, 1, 0]),
    ([0.3, 0.3, 0.2, 0.2, 0.1, 0.1], [2, 2, 0, 1, 1, 0]),
]
KS = [1, 2, 3, 4, 6]


def _all_orders(preds: list[float], target: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    perms = torch.tensor(list(itertools.permutations(range(len(preds)))))
    return (
        torch.tensor(preds, dtype=torch.float64)[perms],
        torch.tensor(target, dtype=torch.float64)[perms],
    )


def _call(fn, preds, target, ties, uses_k):
    kwargs = {"k": KS} if uses_k else {}
    return fn(preds, target, ties=ties, reduction="none", **kwargs)


@pytest.mark.parametrize(("name", "fn", "higher_is_better"), ALL_MEASURES, ids=[m[0] for m in ALL_MEASURES])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_ties_match_enumeration(name, fn, higher_is_better, case):
    preds, target = CASES[case]
    uses_k = (name, fn, higher_is_better) in CUTOFF_MEASURES
    all_preds, all_target = _all_orders(preds, target)
    every_order = _call(fn, all_preds, all_target, "first", uses_k)
    one = (torch.tensor(preds, dtype=torch.float64), torch.tensor(target, dtype=torch.float64))

    torch.testing.assert_close(_call(fn, *one, "average", uses_k), every_order.mean(0))
    best, worst = every_order.max(0).values, every_order.min(0).values
    if not higher_is_better:
        best, worst = worst, best
    torch.testing.assert_close(_call(fn, *one, "optimistic", uses_k), best)
    torch.testing.assert_close(_call(fn, *one, "pessimistic", uses_k), worst)


@pytest.mark.parametrize(("name", "fn", "higher_is_better"), CUTOFF_MEASURES, ids=[m[0] for m in CUTOFF_MEASURES])
def test_ties_with_padding_and_batch(name, fn, higher_is_better):
    """Average over tie orders stays exact with padding and several queries of different tie structure."""
    preds = torch.tensor([[2.0, 2.0, 1.0, 1.0, 9.0], [0.5, 0.5, 0.5, 0.1, 0.1]], dtype=torch.float64)
    target = torch.tensor([[1, 0, 2, 0, 3], [0, 1, 0, 2, 0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, True, False], [True] * 5])
    expected = torch.stack(
        [
            _call(fn, *_all_orders(preds[0, :4].tolist(), target[0, :4].tolist()), "first", True).mean(0),
            _call(fn, *_all_orders(preds[1].tolist(), target[1].tolist()), "first", True).mean(0),
        ]
    )
    got = fn(preds, target, k=KS, mask=mask, ties="average", reduction="none")
    torch.testing.assert_close(got, expected)


def test_first_keeps_input_order():
    import torchrank.functional as F

    preds = torch.tensor([1.0, 1.0, 1.0])
    assert F.reciprocal_rank(preds, torch.tensor([0, 1, 0]), ties="first") == 0.5
    assert F.reciprocal_rank(preds, torch.tensor([0, 0, 1]), ties="first") == pytest.approx(1 / 3)
