"""``ties`` against brute-force enumeration of every order of the tie groups.

Averaging ``ties="first"`` over all N! input permutations weighs every order of each tie group equally,
so that mean is the expected value under uniformly random tie orders: what ``ties="average"`` claims.
All permutations go through as one batch of N! queries.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from conftest import ALL_MEASURES, CUTOFF_MEASURES, patch_engine

from torchrank.functional import _compact_keys, _numpy_keys, _numpy_order, _ranking

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


def _rows_whose_tie_order_matters(preds, target, depth):
    """Per row, from a reference sort and its tie groups: whether a group within ``depth`` holds different labels
    (or a group runs across the cut-off), and if so whether those groups are pairs inside the cut, at most three:
    ``{row: enumerated}``."""
    n = preds.shape[1]
    order = torch.sort(preds.double(), dim=1, descending=True, stable=True).indices
    scores, labels = preds.double().gather(1, order), target.gather(1, order)
    width = n if depth is None else min(depth, n)
    seen = min(width + 1, n)
    out = {}
    for row in range(len(preds)):
        groups = []  # runs of equal scores among the first `seen` positions: (start, size)
        for i in range(seen):
            if i and scores[row, i] == scores[row, i - 1]:
                groups[-1][1] += 1
            else:
                groups.append([i, 1])
        across = any(start < width < start + size for start, size in groups)
        mixed = [size for start, size in groups if size > 1 and labels[row, start : start + size].unique().numel() > 1]
        if across or mixed:
            out[row] = not across and set(mixed) == {2} and len(mixed) <= 3
    return out


def test_only_tied_rows_get_their_own_ranking():
    """The split the test above relies on happens: the planted tied rows whose tie order matters, and only they,
    are ranked apart, a lone pair as the batch's order with the pair swapped, other ties by a ranking of their
    own that averages them."""
    from torchrank.functional._inputs import format_inputs
    from torchrank.functional._ranking import rank

    preds, target, _ = _batch_with_some_tied_rows(padded=False)
    for depth in (None, 6, 40):  # the full sort, the top-k of a short prefix, the sort cut at 40
        ranking = rank(format_inputs(preds, target), ties="average", depth=depth)
        got = {row: a.owner is not None for a in ranking.apart for row in a.rows.tolist()}
        assert got == _rows_whose_tie_order_matters(preds, target, depth)
        assert {1, 5, 11, 17, 23} <= set(got)  # the planted groups
        assert ranking.ties == "first"
        for a in ranking.apart:
            assert a.ranking.ties == ("first" if a.owner is not None else "average")


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
def test_tied_rows_of_a_whole_sort_reuse_its_order_under_average(padded, monkeypatch):
    """Under "average" the tied rows of a whole-list sort take the batch's order (every tie group is contiguous in
    it): no sort of their own. Their values are checked against each row alone above."""
    from torchrank.functional._inputs import format_inputs

    def no_second_sort(*args, **kwargs):
        raise AssertionError("the tied rows were sorted again")

    patch_engine(monkeypatch, "_ranking_order", no_second_sort)
    preds, target, mask = _batch_with_some_tied_rows(padded)
    ranking = _ranking.rank(format_inputs(preds, target, mask=mask if padded else None), ties="average")
    (rows, exact, *_), = [a for a in ranking.apart if a.owner is None]
    assert {1, 5, 11, 17} <= set(rows.tolist()) and exact.ties == "average"  # groups of three or more


def _route_head(monkeypatch, head: str) -> None:
    """Route the CPU key sort's ranking of a head, even of short rows: ``"whole-sort"`` (every row sorted whole),
    ``"keys-partitioned"`` (every item's key built, the head selected among them) or ``"items-selected"`` (only the
    items that can make the head get keys, :func:`_head_items`)."""

    patch_engine(monkeypatch, "_PARTITION_RATIO", 1)
    patch_engine(monkeypatch, "_PARTITION_MIN_ITEMS", 10**9 if head == "whole-sort" else 1)
    selects = 1 if head == "items-selected" else 10**9
    patch_engine(monkeypatch, "_SELECTION_MIN_ITEMS", selects)
    patch_engine(monkeypatch, "_SELECTION_MIN_ITEMS_LARGE_BATCH", selects)


def _whole_sorts_only(monkeypatch) -> None:
    """Every CPU key sort sorts whole rows: no head selected, of keys or of items."""

    for name in ("_PARTITION_MIN_ITEMS", "_SELECTION_MIN_ITEMS", "_SELECTION_MIN_ITEMS_LARGE_BATCH"):
        patch_engine(monkeypatch, name, 10**9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16])
@pytest.mark.parametrize("depth", [None, 3, 9])
@pytest.mark.parametrize("block_items", [2**20, 25], ids=["one-block", "blocks-of-2-rows"])
@pytest.mark.parametrize("head", ["whole-sort", "keys-partitioned", "items-selected"])
def test_packed_key_sort_is_a_stable_descending_sort(dtype, depth, block_items, head, monkeypatch):
    """The CPU key sort orders as torch's stable descending sort (equal scores in input order, -0.0 equal to
    0.0, infinities at the ends, padding last) and flags exactly the equal neighbours, whether its keys are
    built in one block of rows or in many, and whether it sorts whole rows, selects and sorts their head of keys, or
    keys only the items that can make the head."""
    from torchrank.functional._numpy_keys import _packed_sort

    patch_engine(monkeypatch, "_ROW_BLOCK_ITEMS", block_items)
    _route_head(monkeypatch, head)

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
        assert torch.equal(tied[:, :-1].bool(), equal)
        assert not tied[:, -1].any()  # past the pairs: never a tie (the next row's first item is not a neighbour)


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
@pytest.mark.parametrize("head", ["whole-sort", "keys-partitioned", "items-selected"])
def test_label_keys_give_the_labels_in_rank_order(ties, depth, labels, block_items, head, monkeypatch):
    """Under every tie order but "first" the CPU key sort carries each item's label in place of its index: the
    ranking's labels must be those of a reference sort (descending score, padding last) with each tie group
    ordered by label as ``ties`` asks (any order under "average", which averages it whole), for labels of any sign,
    -0.0 included, in the working dtype or in the caller's (large batches), keys built in one block of rows or in
    many, whole rows sorted or their head selected and sorted (whole rows then sorted for the tied rows that
    average whole rows), or only the items that can make the head keyed (most of these rows tie too widely: they
    hand over); its scores must tie where the scores do."""
    from torchrank.functional import _inputs
    from torchrank.functional._inputs import format_inputs

    patch_engine(monkeypatch, "_ROW_BLOCK_ITEMS", block_items)
    _route_head(monkeypatch, head)
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
        ranking = _numpy_order._rank_by_label_keys(inputs, ties, 1, depth)
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
        for rows, r in [(torch.arange(40), ranking), *[(a.rows, a.ranking) for a in ranking.apart]]:
            width = r.labels.shape[1]
            assert width == (12 if depth is None or r.ties == "average" else depth)  # averaging: whole rows
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
    (apart,) = ranking.apart
    assert apart.rows.tolist() == [2, 4] and apart.first_tie == 4 and apart.owner is not None
    assert ranking.apart_for([1, 4]) == []
    assert ranking.apart_for([5]) == [apart] and ranking.apart_for([2, None]) == [apart]
    for k in ([1, 2, 3, 4], [5], [4, 6], [8], None):
        for fn in (F.ndcg, F.precision, F.average_precision, F.reciprocal_rank, F.err):
            batch = fn(preds, target, k=k, reduction="none")
            for row in (2, 4):
                alone = fn(preds[row : row + 1].double(), target[row : row + 1], k=k, reduction="none")
                torch.testing.assert_close(batch[row : row + 1].double(), alone)


# rows of tied pairs in rank order (positions i, i + 1 of 30, scores distinct otherwise): (pairs, which of them hold
# one label, how the row is evaluated under "average" over the whole list: enumerated, exact or left as ranked)
PAIR_ROWS = [
    ([], [], None),
    ([4], [], "enumerated"),
    ([1, 7], [], "enumerated"),
    ([0, 10, 20], [], "enumerated"),
    ([0, 5, 10, 20], [], "exact"),  # four pairs of different labels: 16 orders, the closed forms instead
    ([3], [3], None),  # one label: every order gives the same values
    ([3, 10], [10], "enumerated"),  # one pair to swap, the other of one label
    ([5, 6], [], "exact"),  # a group of three
    ([5, 6], [5], "exact"),  # a group of three: a pair of one label next to a mixed one
    ([28], [], "enumerated"),  # the last two items
    ([9], [], "enumerated"),  # across the cut-off k=10 (ranks 10 and 11): exact when the ranking stops there
    ([9], [9], None),
]


def _batch_with_tied_pairs(padded: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows of PAIR_ROWS, then as many untied rows (a batch mostly tied gets the closed forms throughout), items
    shuffled (input order is not rank order), graded labels; padded: a few rows hold padding after their last
    pair (scored to tie with real items)."""
    g = torch.Generator().manual_seed(13)
    queries, items = 2 * len(PAIR_ROWS), 30
    preds = torch.linspace(3, -3, items).repeat(queries, 1)
    target = torch.randint(0, 4, (queries, items), generator=g).float()
    for row, (pairs, one_label, _) in enumerate(PAIR_ROWS):  # the rows after them: distinct scores
        for i in pairs:
            preds[row, i + 1] = preds[row, i]
            if i in one_label:
                target[row, i + 1] = target[row, i]
            elif target[row, i + 1] == target[row, i]:
                target[row, i + 1] = (target[row, i] + 1) % 4
    mask = torch.ones(queries, items, dtype=torch.bool)
    if padded:
        for row in (0, 1, 2, 5, 6):
            mask[row, 25:] = False
        preds, target = preds.masked_fill(~mask, 0.0), target.masked_fill(~mask, 0)  # 0.0: a real item's score
    shuffle = torch.stack([torch.randperm(items, generator=g) for _ in range(queries)])
    return preds.gather(1, shuffle), target.gather(1, shuffle), mask.gather(1, shuffle)


def _pin_key_width(monkeypatch, preds: torch.Tensor, keys: str) -> tuple[torch.Tensor, list]:
    """Pin the CPU key sort of whole unpadded rows to ``keys``: ``"64-bit"`` (score and label halves) or ``"32-bit"``
    (:func:`_compact_keys`, on ``preds`` mapped into [0.125, 0.875] in the same order, where 32-bit keys hold every
    score whole). The scores to rank, and the compact keys built (to check that they were)."""

    if keys == "64-bit":
        patch_engine(monkeypatch, "_compact_key_ranking", lambda *args, **kwargs: None)
        return preds, []
    return (preds - preds.min()) / (preds.max() - preds.min()) * 0.75 + 0.125, _compact_spy(monkeypatch)


@pytest.mark.parametrize("keys", ["64-bit", "32-bit"])
def test_tied_pairs_are_planned_as_enumerated_orders_or_exact(keys, monkeypatch):
    """Under "average", a row whose ties of different labels are at most three pairs, none touching another tie and
    none across the cut-off, is evaluated in each of its orders; other tied rows whose ties matter get the closed
    forms; rows whose tie groups each hold one label are left as ranked. The same plan from both key sorts."""
    from torchrank.functional._inputs import format_inputs
    from torchrank.functional._ranking import rank

    preds, target, _ = _batch_with_tied_pairs(padded=False)
    preds, built = _pin_key_width(monkeypatch, preds, keys)
    whole = {row: kind for row, (_, _, kind) in enumerate(PAIR_ROWS) if kind is not None}
    # cut at 10: a pair at ranks 11 and 12 or deeper is never read; one across the cut (ranks 10 and 11) is exact
    # whatever its labels, as the ranking does not hold the second item
    cut = {**whole, 4: "enumerated", 10: "exact", 11: "exact"}
    del cut[9]
    for depth, want in ((None, whole), (10, cut)):
        ranking = rank(format_inputs(preds, target), ties="average", depth=depth)
        got = {row: "exact" if a.owner is None else "enumerated" for a in ranking.apart for row in a.rows.tolist()}
        assert got == want
        (enumerated,) = [a for a in ranking.apart if a.owner is not None]
        orders = {row: int(n) for row, n in zip(enumerated.rows.tolist(), enumerated.orders.tolist(), strict=True)}
        read = [[i for i in pairs if depth is None or i < depth - 1] for pairs, _, _ in PAIR_ROWS]
        assert orders == {row: 2 ** len(set(read[row]) - set(PAIR_ROWS[row][1])) for row in orders}
        assert enumerated.first_tie == 0  # row 3's first pair
    assert keys == "64-bit" or (built and all(b.whole for b in built))


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
@pytest.mark.parametrize(("name", "fn", "higher_is_better"), ALL_MEASURES, ids=[m[0] for m in ALL_MEASURES])
def test_rows_with_tied_pairs_equal_each_row_alone(name, fn, higher_is_better, padded):
    """Each row of the batch of tied pairs (enumerated orders, closed forms, nothing to do) equals the row alone,
    whose ties get the closed forms (a lone tied row is all the batch), at cut-offs before, at, across and past
    the pairs."""
    preds, target, mask = _batch_with_tied_pairs(padded)
    uses_k = (name, fn, higher_is_better) in CUTOFF_MEASURES
    for ks in ([1, 4, 5, 6, 10], [10], [2, 29], None) if uses_k else (None,):
        kwargs = {"k": ks} if ks is not None else {}
        batch = fn(preds, target, mask=mask, reduction="none", **kwargs)
        for row in range(len(PAIR_ROWS) + 1):
            one = slice(row, row + 1)
            alone = fn(preds[one].double(), target[one], mask=mask[one], reduction="none", **kwargs)
            torch.testing.assert_close(batch[one].double(), alone, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_enumerated_orders_average_as_every_order_does():
    """The mean over a row's enumerated orders is the brute-force mean of ``ties="first"`` over every order of the
    row's tied pairs, for the measures of one evaluate() with cut-offs before, inside and past the pairs."""
    import torchrank.functional as F

    names = ["ndcg@5", "ndcg@10", "ndcg_exp@20", "map", "map@6", "mrr", "P@10", "recall@5", "success@2", "err@10"]
    preds, target, _ = _batch_with_tied_pairs(padded=False)
    batch = F.evaluate(preds, target, names, reduction="none")
    for row in (1, 2, 3, 6, 9, 10):
        pairs = (preds[row, :, None] == preds[row, None, :]).triu(1).nonzero().tolist()  # the tied items (a, b)
        orders = []
        for subset in range(2 ** len(pairs)):  # input order decides among equal scores under "first"
            order = torch.arange(preds.shape[1])
            for j, (a, b) in enumerate(pairs):
                if subset >> j & 1:
                    order[a], order[b] = b, a
            one = (preds[row, order][None].double(), target[row, order][None])
            orders.append(F.evaluate(*one, names, ties="first", reduction="none"))
        for name in names:
            mean = torch.stack([o[name] for o in orders]).mean(0)
            torch.testing.assert_close(batch[name][row : row + 1].double(), mean, rtol=1e-5, atol=1e-6)


def test_bpref_refuses_average_ties_that_matter_whichever_way_they_are_evaluated():
    """bpref has no tie-averaged form: under ``ties="average"`` it refuses rows whose ties get the closed forms and
    rows whose orders are enumerated alike (a pair of one label, judged and unjudged, matters to it), and gives the
    values of every order where each tie holds one label and one judgment."""
    import torchrank.functional as F

    preds, target, _ = _batch_with_tied_pairs(padded=False)
    judged = torch.ones_like(preds, dtype=torch.bool)
    calm = [0, 5, 11, *range(len(PAIR_ROWS), 2 * len(PAIR_ROWS))]  # untied, or ties of one label each
    for rows in ([*calm, 1], [*calm, 7]):  # enumerated, exact
        with pytest.raises(ValueError, match="bpref has no tie-averaged form"):
            F.evaluate(preds[rows], target[rows], ["bpref"], judged=judged[rows])
    average = F.evaluate(preds[calm], target[calm], ["bpref"], judged=judged[calm], reduction="none")["bpref"]
    first = F.evaluate(preds[calm], target[calm], ["bpref"], judged=judged[calm], reduction="none", ties="first")
    assert torch.equal(average, first["bpref"])
    tied = (preds[5, :, None] == preds[5, None, :]).triu(1).nonzero()[0].tolist()  # row 5's pair, of one label
    judged[5, tied[0]] = False
    with pytest.raises(ValueError, match="bpref has no tie-averaged form"):
        F.evaluate(preds[calm], target[calm], ["bpref"], judged=judged[calm])


@pytest.mark.parametrize("keys", ["64-bit", "32-bit"])
def test_many_tied_pairs_skip_the_plan_and_give_the_same_values(keys, monkeypatch):
    """Past ``_MAX_PLANNED_PAIRS`` tied pairs every tied row gets the closed forms, unplanned (no host loop over
    the pairs): the same values as planned enumeration, from both key sorts."""
    import torchrank.functional as F
    from torchrank.functional._inputs import format_inputs

    preds, target, _ = _batch_with_tied_pairs(padded=False)
    preds, built = _pin_key_width(monkeypatch, preds, keys)
    names = ["ndcg@10", "map", "mrr", "P@5", "recall@10", "err@10", "rbp"]
    planned = F.evaluate(preds, target, names, reduction="none")
    patch_engine(monkeypatch, "_MAX_PLANNED_PAIRS", 2)
    ranking = _ranking.rank(format_inputs(preds, target), ties="average")
    (apart,) = ranking.apart
    assert apart.owner is None and set(apart.rows.tolist()) == {r for r, (p, _, _) in enumerate(PAIR_ROWS) if p}
    assert apart.first_tie == 0
    unplanned = F.evaluate(preds, target, names, reduction="none")
    for name in names:
        torch.testing.assert_close(unplanned[name], planned[name])
    assert keys == "64-bit" or (built and all(b.whole for b in built))


def test_a_ranking_and_its_rows_apart_are_freed_without_the_garbage_collector():
    """No reference cycle between a ranking and the rankings of its tied rows: each call's tensors are freed on
    return (a cycle kept them until the next garbage collection, and large calls paged fresh memory in)."""
    import gc
    import weakref

    from torchrank.functional._inputs import format_inputs
    from torchrank.functional._ranking import rank

    preds, target, _ = _batch_with_tied_pairs(padded=False)
    gc.disable()
    try:
        for depth in (None, 10):
            ranking = rank(format_inputs(preds, target), ties="average", depth=depth)
            assert {a.owner is None for a in ranking.apart} == {True, False}  # both kinds of rows apart
            refs = [weakref.ref(ranking), *(weakref.ref(a.ranking) for a in ranking.apart)]
            del ranking
            assert all(ref() is None for ref in refs)
    finally:
        gc.enable()


@pytest.mark.parametrize("width", [1, 19, 255, 256, 1000])
@pytest.mark.parametrize("density", [0.0, 0.002, 0.5])
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8])
def test_rows_any_equals_any(width, density, dtype):
    """``rows_any`` (a row maximum, or on short rows with few nonzero bytes the rows of those bytes) equals
    ``any(1)``: on contiguous rows and on the strided columns of a wider tensor, sparse and dense."""
    from torchrank.functional._ranking import rows_any

    g = torch.Generator().manual_seed(width)
    wide = (torch.rand(300, width + 3, generator=g) < density).to(dtype)
    for x in (wide[:, :width].contiguous(), wide[:, 2 : width + 2]):
        assert torch.equal(rows_any(x), x.bool().any(1))


@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
def test_mostly_tied_top_k_hands_over_to_the_whole_row_key_sort(ties, monkeypatch):
    """When the CPU top-k of a short cut-off finds most rows tied (bfloat16 scores), the ranking is redone by the
    key sort of whole rows (one exact pass) rather than the generic sorts: the values equal those of the top-k
    with every tied row ranked apart, and of the key sort alone."""
    import torchrank.functional as F

    g = torch.Generator().manual_seed(8)
    # 2,000 items on ~40 values: all tied; a small batch (a validation step), which takes the top-k
    preds = (torch.randn(9, 2000, generator=g) * 5).round().bfloat16()
    target = torch.randint(0, 4, (9, 2000), generator=g)
    measures = ["ndcg@2", "map@2", "P@1", "mrr@2", "err@2", "rbp@2"]  # depth 2: a top-k of 3 of 2,000
    calls = []
    original = _numpy_order._rank_tied_rows_apart

    def spy(*args, **kwargs):
        calls.append(kwargs.get("topk", True))
        return original(*args, **kwargs)

    patch_engine(monkeypatch, "_rank_tied_rows_apart", spy)
    got = F.evaluate(preds, target, measures, ties=ties, reduction="none")
    assert calls[:2] == [True, False]  # the top-k first, then the whole rows
    patch_engine(monkeypatch, "_MAX_TIED_SHARE", 2.0)  # never "mostly": each tied row ranked apart
    apart = F.evaluate(preds, target, measures, ties=ties, reduction="none")
    patch_engine(monkeypatch, "_SMALL_BATCH", 0)  # no top-k: the key sort straight away
    keys = F.evaluate(preds, target, measures, ties=ties, reduction="none")
    for name in measures:
        torch.testing.assert_close(got[name], apart[name], rtol=0, atol=1e-6)
        torch.testing.assert_close(got[name], keys[name], rtol=0, atol=1e-6)


@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
def test_selected_head_ranks_as_the_whole_sort(ties, padded, monkeypatch):
    """Cut-offs far inside long CPU lists select and sort only the head of each row's keys: every measure then
    equals its value from the sort of whole rows, with rows that tie inside, across and past the cut-off."""
    import torchrank.functional as F

    g = torch.Generator().manual_seed(9)
    preds = torch.rand(40, 800, generator=g)
    target = torch.randint(0, 4, (40, 800), generator=g)
    order = preds.argsort(dim=1, descending=True)
    for row, at in [(1, 4), (2, 9), (3, 19), (4, 40)]:  # ties inside, across and past the cut-offs 10 and 20
        preds[row, order[row, at + 1]] = preds[row, order[row, at]]
    preds[5:9] = (preds[5:9] * 8).round()  # rows of a few values: tied everywhere
    mask = torch.rand(40, 800, generator=g) > 0.1 if padded else None
    measures = ["ndcg@10", "ndcg@20", "map@10", "P@5", "mrr@20", "err@10", "rbp@20", "recall@20", "frp@10"]
    patch_engine(monkeypatch, "_SMALL_BATCH", 0)  # never a top-k: the key sort, head or whole
    head = F.evaluate(preds, target, measures, mask=mask, ties=ties, reduction="none")
    _whole_sorts_only(monkeypatch)
    whole = F.evaluate(preds, target, measures, mask=mask, ties=ties, reduction="none")
    for name in measures:
        torch.testing.assert_close(head[name], whole[name], rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ideal_head_selection_equals_the_sort(dtype):
    """The ideal labels' head of a cut-off far inside long CPU rows is selected by the integers of the labels' bits,
    and other heads (short rows, deep cut-offs, whole lists) sorted whole by them: each must equal the head of a
    descending sort, for rows with fewer positive labels than the cut-off and rows of zeros; labels with the sign bit
    set (negative, unvalidated, or -0.0) must take the float sort."""
    from torchrank.functional._ranking import _descending

    g = torch.Generator().manual_seed(5)
    labels = (torch.randint(0, 40, (30, 900), generator=g) / 4).to(dtype)
    labels[1] = 0
    labels[2] = 0
    labels[2, [7, 500]] = torch.tensor([3.0, 1e30], dtype=dtype)
    labels[3, 100:] = float("inf")
    for case in ("non-negative", "negative", "minus-zero"):
        if case == "negative":
            labels[4, :] = -torch.arange(900, dtype=dtype)
        elif case == "minus-zero":
            labels[4, :] = 0
            labels[4, 3] = -0.0
        for rows in (labels, labels[:, :100].contiguous()):  # rows of 100: too short to select from, sorted whole
            want = torch.sort(rows, dim=1, descending=True).values
            for depth in (1, 10, 200, 400, None):  # 400 of 900, and the whole list: sorted whole
                got = _descending(rows, depth)
                assert got.dtype == dtype and got.is_contiguous()
                assert torch.equal(got, want[:, :depth])


def test_ndcg_with_negative_unvalidated_labels_keeps_the_sorted_ideal(monkeypatch):
    """NDCG@k of long rows with negative labels (allowed unvalidated) equals its value when every ideal is sorted
    whole: the ideal's head selection must not reorder negative labels."""
    import torchrank.functional as F

    g = torch.Generator().manual_seed(6)
    preds = torch.rand(20, 600, generator=g)
    target = -torch.randint(1, 4, (20, 600), generator=g).float()
    target[:, :5] = torch.randint(0, 3, (20, 5), generator=g).float()  # a few labels >= 0: the head holds negatives
    got = F.ndcg(preds, target, k=[10, 50], reduction="none", validate_args=False)
    patch_engine(monkeypatch, "_PARTITION_MIN_ITEMS", 10**9)
    want = F.ndcg(preds, target, k=[10, 50], reduction="none", validate_args=False)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def _head_items_spy(monkeypatch):
    """Record what each call of ``_head_items`` returned (None: it handed over to the key sort of every item)."""

    found = []
    original = _numpy_keys._head_items

    def spy(*args):
        out = original(*args)
        found.append(out)
        return out

    patch_engine(monkeypatch, "_head_items", spy)
    return found


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_head_items_hold_every_item_that_can_make_the_head(dtype):
    """The items selected for the head of each row are exactly those scoring at least the head-th highest score,
    whether found by a bound on groups of items first (heads of 1 and 11 in 600) or by selecting over every item (100):
    with ties at that score, -0.0 and 0.0 there, negative and infinite scores, scores laid out column by column;
    None with a NaN, with both infinities, and with ties too many (rows past a quarter of their length)."""
    from torchrank.functional._numpy_keys import _head_items

    g = torch.Generator().manual_seed(12)
    preds = torch.randn(50, 600, generator=g).to(dtype)
    order = preds.argsort(dim=1, descending=True)
    preds[1, order[1, 9:14]] = preds[1, order[1, 9]].item()  # ties at the 11th highest: 14 items can make the head
    preds[2, order[2, 10]], preds[2, order[2, 11]] = 0.0, -0.0  # 0.0 and -0.0 as the lowest of the head
    preds[2, order[2, 12:]] = -preds[2, order[2, 12:]].abs() - 1
    preds[4] = -preds[4].abs()  # every score negative
    infinite = preds.clone()  # one infinity per batch: both sum to NaN
    preds[3, order[3, :3]] = float("inf")
    infinite[5, order[5, 150:]] = -float("inf")
    for scores, head in itertools.product((preds, infinite), (1, 11, 100)):
        chosen, real = _head_items(scores, head)
        lowest = scores.sort(dim=1, descending=True).values[:, head - 1 : head]
        expected = scores >= lowest
        got = torch.zeros_like(expected)
        rows = torch.arange(50).unsqueeze(1).expand_as(chosen)
        keep = torch.ones_like(chosen, dtype=torch.bool) if real is None else real
        got[rows[keep], chosen[keep]] = True
        assert torch.equal(got, expected)
        assert (chosen.shape[1] > head) == (real is not None) == bool((expected.sum(1) > head).any())
    transposed = preds.t().contiguous().t()  # the same scores, columns contiguous: read as they are laid out
    for head in (1, 11, 100):
        (chosen, real), (want_chosen, want_real) = _head_items(transposed, head), _head_items(preds, head)
        assert torch.equal(chosen, want_chosen) and (real is None) == (want_real is None)
    nan = preds.clone()
    nan[7, 3] = float("nan")
    both = preds.clone()
    both[7, :2] = torch.tensor([float("inf"), -float("inf")])
    tied = preds.clone()
    tied[8, :200] = 5.0  # 200 items tie for the head: past a quarter of the row
    assert _head_items(nan, 11) is None and _head_items(both, 11) is None and _head_items(tied, 11) is None
    assert _head_items(torch.randint(0, 2, (50, 600), generator=g).float(), 11) is None  # two scores: all tied


@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
@pytest.mark.parametrize("mostly_tied", [False, True], ids=["few-tied-rows", "mostly-tied"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_head_of_selected_items_ranks_as_the_whole_sort(ties, mostly_tied, dtype, monkeypatch):
    """Cut-offs far inside long unpadded lists rank only the items that can make the head: every measure equals its
    value from the sort of whole rows, with ties inside, across and past the cut-off, and with most rows tied inside
    it (the selected items then hold each tie group whole), for float32 scores and for the half-precision scores
    read as float32 (bfloat16: ties everywhere)."""
    import torchrank.functional as F

    g = torch.Generator().manual_seed(13)
    preds = torch.randn(40, 800, generator=g).to(dtype)
    target = torch.randint(0, 4, (40, 800), generator=g)
    order = preds.argsort(dim=1, descending=True)
    tied_rows = range(1, 31) if mostly_tied else range(1, 5)
    for row in tied_rows:
        at = [2, 9, 10, 40][row % 4]  # inside, across (10/11), at the selection's edge (11/12), past the cut-offs
        preds[row, order[row, at + 1]] = preds[row, order[row, at]]
    measures = ["ndcg@10", "map@10", "P@5", "mrr@10", "err@10", "rbp@10", "recall@10", "frp@10"]
    found = _head_items_spy(monkeypatch)
    patch_engine(monkeypatch, "_SMALL_BATCH", 0)  # never a top-k
    head = F.evaluate(preds, target, measures, ties=ties, reduction="none")
    assert found and all(f is not None for f in found)  # the selection ranked the batch
    assert found[0][1] is not None  # a row tied at the selection's edge holds more than the head
    if ties == "average":  # the rows averaging their ties hold the selected items, padding known as such
        from torchrank.functional._inputs import format_inputs

        ranking = _ranking.rank(format_inputs(preds, target), depth=10)
        rankings = [ranking] if ranking.averages_ties else [a.ranking for a in ranking.apart if a.owner is None]
        assert rankings
        for r in rankings:
            padding = r.scores == _numpy_keys._INT32_MAX
            assert r.labels.shape[1] > 11 and padding.any()
            assert torch.equal(r.valid, ~padding) and not r.labels[padding].any()
    _whole_sorts_only(monkeypatch)
    whole = F.evaluate(preds, target, measures, ties=ties, reduction="none")
    for name in measures:
        torch.testing.assert_close(head[name], whole[name], rtol=0, atol=1e-6)


def _compact_spy(monkeypatch) -> list:
    """Record what each call of :func:`_compact_keys` returns (None where it refused)."""

    built = []
    compact_keys = _compact_keys._compact_keys

    def spy(*args, **kwargs):
        built.append(compact_keys(*args, **kwargs))
        return built[-1]

    patch_engine(monkeypatch, "_compact_keys", spy)
    return built


def _plant_ties(preds: torch.Tensor) -> torch.Tensor:
    """``preds`` with tie groups of two to four items planted in every third row: inside a cut-off of 10, at its
    edge, across it (with members past the position after it) and past it."""
    preds = preds.clone()
    order = preds.float().argsort(dim=1, descending=True)
    for row in range(0, len(preds), 3):
        at = [2, 8, 9, 10, 20][row % 5]
        for j in range(1 + row % 3):
            preds[row, order[row, at + j + 1]] = preds[row, order[row, at]]
    return preds


COMPACT_SCORES = {  # name: (scores of 120 x 50, whether 32-bit keys hold them whole with labels 0..4)
    "float32 in [0, 1)": (lambda g: torch.rand(120, 50, generator=g), True),
    "float32 normal": (lambda g: torch.randn(120, 50, generator=g), False),
    "float32 with infinities": (
        lambda g: torch.randn(120, 50, generator=g).index_fill_(1, torch.tensor([7]), float("inf"))
        .index_fill_(1, torch.tensor([11]), -float("inf")),
        False,
    ),
    "-0.0 and 0.0": (  # 0.0, -0.0, 1e-20 and 2e-20 (a span 32-bit keys hold whole): zeros of both signs must tie
        lambda g: torch.where(
            torch.rand(120, 50, generator=g) < 0.5, torch.randint(0, 3, (120, 50), generator=g) * 1e-20, -0.0
        ),
        True,
    ),
    "bfloat16 normal": (lambda g: torch.randn(120, 50, generator=g).bfloat16(), True),
    "float16 normal": (lambda g: torch.randn(120, 50, generator=g).half(), True),
    "int8": (lambda g: torch.randint(-128, 128, (120, 50), generator=g).to(torch.int8), True),
}


@pytest.mark.parametrize("scores", list(COMPACT_SCORES))
@pytest.mark.parametrize("labels", ["int", "whole floats", "large-batch int64", "large-batch bfloat16", "bool"])
@pytest.mark.parametrize("ties", ["average", "optimistic", "pessimistic"])
@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
def test_compact_keys_rank_as_the_float64_sort(scores, labels, ties, padded, monkeypatch):
    """32-bit keys (score distance and label in one sort key, :func:`_compact_keys`) give every measure of whole
    rows, and of rows cut at 10, the values of the generic float64 sort, under every tie order: keys that hold each
    score whole, ties planted inside, at, across and past the cut-off (-0.0 tying with 0.0), keys that dropped the
    scores' last bits, whose rows with equal keys of different labels are ranked again, and rows of padding (a mask;
    padding scored as real items, which only widens the span) ending before, at or after the cut-off."""
    import torchrank.functional as F

    g = torch.Generator().manual_seed(17)
    make, whole = COMPACT_SCORES[scores]
    preds = _plant_ties(make(g))
    target = torch.randint(0, 5, preds.shape, generator=g)
    mask = None
    if padded:
        lengths = torch.randint(1, preds.shape[1] + 1, (len(preds),), generator=g)
        lengths[::3] = preds.shape[1]  # the planted ties whole
        lengths[1::9] = 10  # ending at the cut-off
        mask = torch.arange(preds.shape[1]) < lengths.unsqueeze(1)
        shuffle = torch.stack([torch.randperm(preds.shape[1], generator=g) for _ in range(len(preds))])
        preds, target, mask = preds.gather(1, shuffle), target.gather(1, shuffle), mask.gather(1, shuffle)
    if labels in ("whole floats", "large-batch bfloat16"):
        target = target.float() if labels == "whole floats" else target.bfloat16()
    elif labels == "bool":
        target = target > 2
    if labels.startswith("large-batch"):
        from torchrank.functional import _inputs

        monkeypatch.setattr(_inputs, "LARGE_BATCH_ITEMS", 8)  # labels stay in the caller's dtype, read by blocks
    built = _compact_spy(monkeypatch)
    for names in (["ndcg@10", "map@10", "P@10", "mrr@10", "err@10", "recall@10", "frp@10", "rbp@10"],
                  ["ndcg", "map", "mrr", "rprec", "mean_rank", "err", "rbp", "ndcg@5", "P@20"]):
        got = F.evaluate(preds, target, names, mask=mask, ties=ties, reduction="none")
        want = F.evaluate(preds.double(), target, names, mask=mask, ties=ties, reduction="none")  # no key sort
        for name in names:
            torch.testing.assert_close(got[name].double(), want[name], rtol=1e-5, atol=1e-6, msg=name)
    assert len(built) == 2 and all(b is not None and b.whole == whole for b in built)
    assert all((b.padding is not None) == padded for b in built)


def test_compact_keys_refuse_what_they_cannot_hold(monkeypatch):
    """Labels that are not whole numbers 0 .. 15 (fractions, 16 and up, negative or NaN ones unvalidated) and NaN
    scores take the 64-bit keys: the same values as the generic float64 sort."""
    import torchrank.functional as F

    g = torch.Generator().manual_seed(19)
    preds = _plant_ties(torch.rand(60, 40, generator=g))
    target = torch.randint(0, 5, preds.shape, generator=g).float()
    nan = preds.clone()
    nan[3, 5] = float("nan")
    nan_label = target.clone()
    nan_label[4, 2] = float("nan")
    cases = [(preds, target / 2), (preds, target * 4), (preds, target - 1), (nan, target), (preds, nan_label)]
    built = _compact_spy(monkeypatch)
    for p, t in cases:
        got = F.evaluate(p, t, ["ndcg", "map", "mrr"], reduction="none", validate_args=False)
        want = F.evaluate(p.double(), t, ["ndcg", "map", "mrr"], reduction="none", validate_args=False)
        for name, value in got.items():
            torch.testing.assert_close(value.double(), want[name], rtol=1e-5, atol=1e-6, equal_nan=True)
    assert built == [None] * len(cases)
    F.evaluate(preds, target * 3, ["map"])  # labels up to 12: held
    assert built[-1] is not None and built[-1].bits == 4


def test_compact_keys_that_drop_bits_rank_again_only_rows_where_equal_keys_hold_different_labels(monkeypatch):
    """Scores a unit in the last place apart share a 32-bit key once its last bits are dropped: the rows where such
    items have different labels (and only they) are ranked again by 64-bit keys, and every value is exact; scores
    so close that most rows need it take the 64-bit keys throughout."""
    import torchrank.functional as F

    g = torch.Generator().manual_seed(23)
    preds = torch.randn(40, 30, generator=g)
    preds[:, :2] = torch.tensor([float("inf"), -float("inf")])  # the whole span: 2 bits dropped, keys of 4 ulps
    target = torch.randint(0, 4, (40, 30), generator=g)
    for row, labels in {2: [0, 1, 2, 3], 9: [3, 1, 0, 2], 5: [2, 2, 2, 2]}.items():
        # 4 consecutive floats: two of them at least share a key; row 5's share one label, so one value
        run = torch.tensor([0.7]).view(torch.int32) - torch.arange(4, dtype=torch.int32)
        preds[row, 10:14], target[row, 10:14] = run.view(torch.float32), torch.tensor(labels)
    # row 12: ranks 10 to 12 tie, labels 1, 1 and 3: a cut at 10 sees one label, yet may hold the 3
    preds[12, 2:] = torch.linspace(3, -3, 28)
    preds[12, 2 + 8 : 2 + 11], target[12, 2 + 8 : 2 + 11] = preds[12, 2 + 8], torch.tensor([1, 3, 1])
    again = []
    rank_rows_again = _compact_keys._rank_rows_again
    patch_engine(monkeypatch, "_rank_rows_again", lambda m, i, rows, *a: again.append(rows) or rank_rows_again(
        m, i, rows, *a))
    built = _compact_spy(monkeypatch)
    names = ["ndcg", "map", "mrr@3", "P@4", "err@5"]
    got = F.evaluate(preds, target, names, reduction="none")
    want = F.evaluate(preds.double(), target, names, reduction="none")
    for name in names:
        torch.testing.assert_close(got[name].double(), want[name], rtol=1e-5, atol=1e-6)
    assert built[-1] is not None and not built[-1].whole
    assert {2, 9} <= set(again[0].tolist()) and 5 not in again[0].tolist()  # row 5: one label, one value
    cut = ["ndcg@10", "P@10", "err@10"]
    got = F.evaluate(preds, target, cut, reduction="none")
    want = F.evaluate(preds.double(), target, cut, reduction="none")
    for name in cut:
        torch.testing.assert_close(got[name].double(), want[name], rtol=1e-5, atol=1e-6)
    assert 12 in again[-1].tolist()
    clustered = 1 + 1e-6 * torch.randn(40, 30, generator=g)
    clustered[:, 0] = -1e30  # the span drops bits where most rows crowd: the 64-bit keys rank every row
    got = F.evaluate(clustered, target, names, reduction="none")
    want = F.evaluate(clustered.double(), target, names, reduction="none")
    for name in names:
        torch.testing.assert_close(got[name].double(), want[name], rtol=1e-5, atol=1e-6)
    assert not built[-1].whole and len(again) == 2


@pytest.mark.parametrize("ties", ["average", "optimistic", "pessimistic"])
def test_compact_keys_rank_flat_input_of_unequal_queries_as_the_float64_sort(ties, monkeypatch):
    """Flat ``(preds, target, indexes)`` input of unequal queries (padded rows, padding last, scored 0) takes the
    32-bit keys too: every measure equals the generic float64 sort's."""
    import torchrank.functional as F

    g = torch.Generator().manual_seed(29)
    lengths = torch.randint(1, 60, (80,), generator=g)
    indexes = torch.repeat_interleave(torch.arange(80), lengths)
    preds = torch.rand(len(indexes), generator=g) * 0.5 + 0.25
    preds[::7] = preds[1::7][: len(preds[::7])]  # ties, within and across queries
    target = torch.randint(0, 4, (len(indexes),), generator=g)
    built = _compact_spy(monkeypatch)
    names = ["ndcg", "map", "mrr", "P@10", "ndcg@10", "err@5", "rprec"]
    got = F.evaluate(preds, target, names, indexes=indexes, ties=ties, reduction="none")
    want = F.evaluate(preds.double(), target, names, indexes=indexes, ties=ties, reduction="none")
    for name in names:
        torch.testing.assert_close(got[name].double(), want[name], rtol=1e-5, atol=1e-6, msg=name)
    assert built and built[0] is not None and built[0].padding is not None


def test_compact_keys_never_give_a_real_item_the_padding_key(monkeypatch):
    """Scores whose span fills the bits left beside the labels exactly: the lowest score's distance would have every
    high bit set, as padding's key does, so one more bit is dropped; the item still counts (P of the whole list)."""
    import torchrank.functional as F

    edge = torch.tensor([0x3FFFFFFF, 0xBFFFFFFF - 2**32], dtype=torch.int32).view(torch.float32)  # +-(2 - 1 ulp)
    preds = torch.tensor([[edge[0], 0.5, edge[1], 0.0], [edge[0], 0.5, edge[1], 0.0]])
    target = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 1]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    keys = _compact_keys._compact_keys(preds, target.float(), mask, True, False)
    assert keys.bits == 1 and not keys.whole
    assert (keys.keys == keys.padding).sum() == 1  # the one padded item
    built = _compact_spy(monkeypatch)
    got = F.precision(preds, target, mask=mask, reduction="none")
    torch.testing.assert_close(got, torch.tensor([1 / 3, 3 / 4]))
    assert built[0] is not None


def test_compact_keys_see_no_tie_in_padding():
    """Padding keys are equal to one another, yet never a tie: a padded batch of distinct scores has no row apart,
    whole or cut at 10."""
    from torchrank.functional._inputs import format_inputs

    g = torch.Generator().manual_seed(31)
    preds = torch.randperm(40 * 30, generator=g).view(40, 30) / 4800 + 0.25  # distinct, and held whole
    target = torch.randint(0, 4, (40, 30), generator=g)
    mask = torch.arange(30) < torch.randint(1, 31, (40, 1), generator=g)
    for depth in (None, 10):
        ranking = _ranking.rank(format_inputs(preds, target, mask=mask), ties="average", depth=depth)
        assert ranking.apart == [] and torch.equal(ranking.valid.sum(1), mask.sum(1).clamp(max=depth or 30))


def test_compact_keys_that_would_merge_most_rows_give_way_after_one_block(monkeypatch):
    """Scores packed so close that the dropped bits merge different labels in most rows of the first block of rows:
    the 32-bit keys give way there, before the other blocks are built, and the 64-bit keys rank every row."""
    import torchrank.functional as F

    patch_engine(monkeypatch, "_ROW_BLOCK_ITEMS", 60)  # blocks of 2 rows of 30
    g = torch.Generator().manual_seed(37)
    preds = 1 + 1e-6 * torch.randn(40, 30, generator=g)
    preds[:, 0] = -1e30  # the span drops bits where the scores crowd
    target = torch.randint(0, 4, (40, 30), generator=g)
    built = _compact_spy(monkeypatch)
    names = ["ndcg", "map", "mrr", "P@5"]
    got = F.evaluate(preds, target, names, reduction="none")
    want = F.evaluate(preds.double(), target, names, reduction="none")
    for name in names:
        torch.testing.assert_close(got[name].double(), want[name], rtol=1e-5, atol=1e-6)
    assert built == [None]
    preds[:2] = torch.rand(2, 30, generator=g)  # a first block of spread scores: the keys go on
    F.evaluate(preds, target, names)
    assert built[-1] is not None and not built[-1].whole


def test_finite_scores_are_known_from_the_checks_only(monkeypatch):
    """The input checks' sum tells finite scores apart (the head selection then skips its own NaN test): never
    with an infinity, a NaN unvalidated, or the checks off; always for integer scores. Scores with both infinities
    still rank as the whole sort does on the head-selection route."""
    import torchrank.functional as F
    from torchrank.functional._inputs import format_inputs

    g = torch.Generator().manual_seed(41)
    preds, target = torch.rand(100, 300, generator=g), torch.randint(0, 3, (100, 300), generator=g)
    assert format_inputs(preds, target).finite_scores
    assert not format_inputs(preds, target, validate_args=False).finite_scores
    assert format_inputs(torch.randint(0, 9, (100, 300), dtype=torch.int16), target).finite_scores
    preds[1, 7], preds[2, 9] = float("inf"), -float("inf")
    assert not format_inputs(preds, target).finite_scores
    found = _head_items_spy(monkeypatch)
    got = F.ndcg(preds, target, k=[3, 10], reduction="none")
    assert found == [None]  # the selection saw both infinities and handed over
    torch.testing.assert_close(got.double(), F.ndcg(preds.double(), target, k=[3, 10], reduction="none"))
