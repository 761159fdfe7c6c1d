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


def _batch_with_some_tied_rows(padded: bool, items: int = 100) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float32 rows of distinct scores with the tied CASES planted in a few, some with padding."""
    g = torch.Generator().manual_seed(7)
    queries = 24
    preds = torch.randn(queries, items, generator=g)
    target = torch.randint(0, 4, (queries, items), generator=g).float()
    mask = torch.ones(queries, items, dtype=torch.bool)
    for row, (case_preds, case_target) in zip((1, 5, 11, 17, 23), CASES, strict=True):
        n = len(case_preds)
        preds[row, :n], target[row, :n] = torch.tensor(case_preds), torch.tensor(case_target, dtype=torch.float)
        preds[row, n:] = -5 - torch.rand(items - n, generator=g)  # below the tie groups
    preds[3, [2, 9]] = preds[3].min().item()  # a tie at the bottom of the list
    preds[7, 0] = float("-inf")
    preds[8] = -1 - preds[8].abs()
    preds[8, :2] = torch.tensor([0.0, -0.0])  # equal top scores with different bits
    if padded:
        lengths = torch.randint(items // 2, items + 1, (queries,), generator=g)
        lengths[[1, 5, 11, 17, 23]] = items
        mask = torch.arange(items) < lengths.unsqueeze(1)
        preds, target = preds.masked_fill(~mask, 0.25), target.masked_fill(~mask, 0)  # padding ties with them
    return preds, target, mask


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
@pytest.mark.parametrize(("name", "fn", "higher_is_better"), ALL_MEASURES, ids=[m[0] for m in ALL_MEASURES])
def test_batch_with_a_few_tied_rows_equals_each_row_alone(name, fn, higher_is_better, ties, padded):
    """On CPU only the tied rows get the tie treatment (the rest is ranked once, ties aside): every row of a
    mostly untied batch must still equal that row evaluated alone, on the short top-k path, the key sort cut at
    a depth and the whole sort (whose tied rows reuse the batch's order under "average")."""
    preds, target, mask = _batch_with_some_tied_rows(padded)
    uses_k = (name, fn, higher_is_better) in CUTOFF_MEASURES
    for ks in ([1, 2, 3, 6], [2, 10, 40], None) if uses_k else (None,):  # top-k of 100 (dense), key sort cut, all
        kwargs = {"k": ks} if ks is not None else {}
        batch = fn(preds, target, mask=mask, ties=ties, reduction="none", **kwargs)
        for row in (0, 1, 3, 5, 7, 8, 11, 17, 23):  # the tied rows and a few others
            alone = fn(
                preds[row : row + 1].double(), target[row : row + 1], mask=mask[row : row + 1], ties=ties,
                reduction="none", **kwargs,
            )
            torch.testing.assert_close(batch[row : row + 1].double(), alone, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_only_tied_rows_get_their_own_ranking():
    """The split the test above relies on happens: the planted tied rows, and only they, are ranked apart."""
    from torchrank.functional._inputs import format_inputs
    from torchrank.functional._ranking import rank

    preds, target, _ = _batch_with_some_tied_rows(padded=False)
    for depth in (None, 6, 40):  # the full sort, the top-k of a short prefix, the sort cut at 40
        ranking = rank(format_inputs(preds, target), ties="average", depth=depth)
        rows, exact = ranking.exact
        expected = {1, 5, 11, 17, 23, 8} | ({3} if depth is None else set())  # row 3's tie is at the bottom
        assert set(rows.tolist()) == expected
        assert exact.ties == "average" and ranking.ties == "first"


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
def test_tied_rows_of_a_whole_sort_reuse_its_order_under_average(padded, monkeypatch):
    """Under "average" the tied rows of a whole-list sort take the batch's order (every tie group is contiguous in
    it): no sort of their own. Their values are checked against each row alone above."""
    from torchrank.functional import _ranking
    from torchrank.functional._inputs import format_inputs

    def no_second_sort(*args, **kwargs):
        raise AssertionError("the tied rows were sorted again")

    monkeypatch.setattr(_ranking, "_ranking_order", no_second_sort)
    preds, target, mask = _batch_with_some_tied_rows(padded)
    ranking = _ranking.rank(format_inputs(preds, target, mask=mask if padded else None), ties="average")
    rows, exact = ranking.exact
    assert {1, 5, 11, 17, 23, 8} <= set(rows.tolist()) and exact.ties == "average"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16])
@pytest.mark.parametrize("depth", [None, 3, 9])
@pytest.mark.parametrize("block_items", [2**20, 25], ids=["one-block", "blocks-of-2-rows"])
def test_packed_key_sort_is_a_stable_descending_sort(dtype, depth, block_items, monkeypatch):
    """The CPU key sort orders as torch's stable descending sort (equal scores in input order, -0.0 equal to
    0.0, infinities at the ends, padding last) and flags exactly the equal neighbours, whether its keys are
    built in one block of rows or in many."""
    from torchrank.functional import _ranking
    from torchrank.functional._ranking import _packed_sort

    monkeypatch.setattr(_ranking, "_ROW_BLOCK_ITEMS", block_items)

    g = torch.Generator().manual_seed(3)
    if dtype.is_floating_point:
        preds = torch.randint(-4, 5, (40, 12), generator=g).to(dtype) / 4  # many ties
        preds[0, :4] = torch.tensor([0.0, -0.0, float("inf"), float("-inf")], dtype=dtype)
        preds[1] = torch.randn(12, generator=g).to(dtype)
    else:
        low = 0 if dtype == torch.uint8 else torch.iinfo(dtype).min
        preds = torch.randint(low, torch.iinfo(dtype).max + 1, (40, 12), generator=g, dtype=torch.int64).to(dtype)
        preds[2, :6] = torch.iinfo(dtype).max
        preds[3, :6] = low
    mask = torch.rand(40, 12, generator=g) > 0.2
    for m in (None, mask):
        lowest = torch.where(m, preds.double(), -float("inf")) if m is not None else preds.double()
        expected = torch.sort(lowest, dim=1, descending=True, stable=True).indices
        if m is not None:  # then padding last, by a stable sort on the padding flag: -inf items stay before it
            by_mask = torch.sort((~m).gather(1, expected).to(torch.int8), dim=1, stable=True).indices
            expected = expected.gather(1, by_mask)
        order, tied = _packed_sort(preds, m, depth)
        cut = expected if depth is None else expected[:, :depth]
        assert torch.equal(order, cut)
        seen = expected if depth is None else expected[:, : depth + 1]
        values = preds.double().gather(1, seen)
        equal = values[:, 1:] == values[:, :-1]
        if m is not None:
            equal &= m.gather(1, seen[:, 1:])
        assert torch.equal(tied.bool(), equal)


def _within_groups_sorted(labels: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """``labels`` sorted ascending inside each run of equal ``scores`` of a row (runs kept in place)."""
    group = torch.cumsum(torch.cat([torch.ones_like(scores[:, :1]), scores[:, 1:] != scores[:, :-1]], 1), 1)
    by_label = torch.sort(labels, dim=1, stable=True).indices
    by_group = torch.sort(group.gather(1, by_label), dim=1, stable=True).indices
    return labels.gather(1, by_label.gather(1, by_group))


@pytest.mark.parametrize("ties", ["average", "optimistic", "pessimistic"])
@pytest.mark.parametrize("depth", [None, 3, 9])
@pytest.mark.parametrize("labels", ["float", "int-large-batch"])
@pytest.mark.parametrize("block_items", [2**20, 25], ids=["one-block", "blocks-of-2-rows"])
def test_label_keys_give_the_labels_in_rank_order(ties, depth, labels, block_items, monkeypatch):
    """Under every tie order but "first" the CPU key sort carries each item's label in place of its index: the
    ranking's labels must be those of a reference sort (descending score, padding last) with each tie group
    ordered by label as ``ties`` asks (any order under "average", which averages it whole), for labels of any sign,
    -0.0 included, in the working dtype or in the caller's (large batches), keys built in one block of rows or in
    many; its scores must tie where the scores do."""
    from torchrank.functional import _inputs, _ranking
    from torchrank.functional._inputs import format_inputs

    monkeypatch.setattr(_ranking, "_ROW_BLOCK_ITEMS", block_items)
    g = torch.Generator().manual_seed(11)
    preds = torch.randint(-4, 5, (40, 12), generator=g).float() / 4  # many ties
    preds[0, :4] = torch.tensor([0.0, -0.0, float("inf"), float("-inf")])
    preds[1] = torch.randn(12, generator=g)
    if labels == "float":  # negative labels pass only unvalidated; they must still come out exact
        target = (torch.randint(-3, 8, (40, 12), generator=g) / 2).float()
        target[0, :3] = torch.tensor([-0.0, 0.0, -0.0])
    else:
        monkeypatch.setattr(_inputs, "LARGE_BATCH_ITEMS", 8)  # labels stay int64, converted by blocks
        target = torch.randint(0, 5, (40, 12), generator=g)
    mask = torch.rand(40, 12, generator=g) > 0.2
    for m in (None, mask):
        inputs = format_inputs(preds, target, mask=m, validate_args=False)
        ranking = _ranking._rank_by_label_keys(inputs, ties, 1, depth)
        valid = torch.ones_like(preds, dtype=torch.bool) if m is None else m
        scores = torch.where(valid, preds.double(), -float("inf"))
        tie_break = {"optimistic": -1.0, "pessimistic": 1.0, "average": 1.0}[ties] * target.double()
        by_label = torch.sort(tie_break, dim=1, stable=True).indices
        by_score = torch.sort(scores.gather(1, by_label), dim=1, descending=True, stable=True).indices
        order = by_label.gather(1, by_score)
        by_padding = torch.sort((~valid).gather(1, order).to(torch.int8), dim=1, stable=True).indices
        order = order.gather(1, by_padding)  # padding last, after real items scored -inf
        expected = torch.where(valid, target.float(), 0).gather(1, order)
        ranked_scores = torch.where(valid.gather(1, order), scores.gather(1, order), float("nan"))
        for rows, r in [(torch.arange(40), ranking), *([ranking.exact] if ranking.exact is not None else [])]:
            width = r.labels.shape[1]
            assert width == (12 if depth is None or r is not ranking or ranking.ties == "average" else depth)
            want, got = expected[rows, :width], r.labels
            if ties == "average":
                want = _within_groups_sorted(want, ranked_scores[rows, :width])
                got = _within_groups_sorted(got, ranked_scores[rows, :width])
            assert torch.equal(got, want)
            assert torch.equal(r.valid, valid.gather(1, order)[rows, :width])
            real = r.valid[:, 1:]
            s = ranked_scores[rows, :width]
            assert torch.equal((r.scores[:, 1:] == r.scores[:, :-1]) & real, (s[:, 1:] == s[:, :-1]) & real)


def test_cutoffs_before_every_tie_skip_the_tied_rows_own_ranking():
    """Under "average", a measure whose cut-offs all stop before each tied row's first tie reads no tie: it takes
    its values for those rows from the batch's ranking (no second pass), and they equal the row alone; a cut-off
    that reaches the tie (the positions either side of it) takes the tied rows' own ranking."""
    import torchrank.functional as F
    from torchrank.functional._inputs import format_inputs
    from torchrank.functional._ranking import rank

    g = torch.Generator().manual_seed(5)
    preds, target = torch.randn(6, 30, generator=g), torch.randint(0, 3, (6, 30), generator=g)
    preds[2] = torch.linspace(3, -3, 30)
    preds[2, 5] = preds[2, 4]  # a tie at ranks 5 and 6, between labels 0 and 2
    target[2, 4], target[2, 5] = 0, 2
    preds[4] = torch.linspace(3, -3, 30)
    preds[4, 8] = preds[4, 7]  # and one deeper, at ranks 8 and 9: the shallower decides
    target[4, 7], target[4, 8] = 2, 0
    ranking = rank(format_inputs(preds, target), ties="average")
    assert ranking.exact[0].tolist() == [2, 4] and ranking.exact_from == 4
    assert ranking.exact_for([1, 4]) is None
    assert ranking.exact_for([5]) is not None and ranking.exact_for([2, None]) is not None
    for k in ([1, 2, 3, 4], [5], [4, 6], [8], None):
        for fn in (F.ndcg, F.precision, F.average_precision, F.reciprocal_rank, F.err):
            batch = fn(preds, target, k=k, reduction="none")
            for row in (2, 4):
                alone = fn(preds[row : row + 1].double(), target[row : row + 1], k=k, reduction="none")
                torch.testing.assert_close(batch[row : row + 1].double(), alone)
