"""``ties`` against brute-force enumeration of every order of the tie groups, and every CPU ordering route against a
reference.

Averaging ``ties="first"`` over all N! input permutations weighs every order of each tie group equally,
so that mean is the expected value under uniformly random tie orders: what ``ties="average"`` claims.
All permutations go through as one batch of N! queries.

On CPU the numpy backend picks an ordering route by the input (one sort of 64-bit keys carrying the label or the item
index, of every item or of the items that can make the head of long rows, numpy's argsort for the dtypes the keys
cannot pack, rows tied within the cut-off ranked apart, blocks of rows for large batches). Each route is reached here
by inputs built to take it, and compared with the reference: the same measures of the float64 scores on the torch
backend, which sorts whole rows once (stably where the tie order is a key) and averages every tie group by its closed
form, and which itself matches the enumeration below. The ranking names the route that built it
(:attr:`Ranking.route`): :func:`test_each_cpu_route_is_taken_where_built_to_be` asserts that each route ran, so a
moved threshold fails there rather than silently stop testing a route. No test sets the engine's tuning constants.
"""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
from conftest import ALL_MEASURES, CUTOFF_MEASURES

import torchrank
import torchrank.functional as F

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


DECLARED = [d for d in F.MEASURES.values() if d.kernel is not None and d.ties != "refused"]


@pytest.mark.parametrize("declaration", DECLARED, ids=[d.name for d in DECLARED])
def test_every_declared_kernel_matches_enumeration(declaration):
    """Every kernel the registry declares, trec_eval's extra measures included (reached by the CLI through
    ``RankedLists``, not by a public function): ``"average"`` equals the mean over every order, here with a judged
    mask whose unjudged items sit inside tie groups."""
    from torchrank.functional.measures import RankedLists

    preds, target = CASES[0]
    judged = torch.tensor([True, False, True, True, False, True])
    perms = torch.tensor(list(itertools.permutations(range(len(preds)))))
    preds, target = torch.tensor(preds, dtype=torch.float64), torch.tensor(target, dtype=torch.float64)
    ks = (1, 2, 4, None) if declaration.takes_k else (None,)
    params = declaration.kernel_params()

    def values(rows, ties):
        lists = RankedLists(preds[rows], target[rows], judged=judged[rows], ties=ties)
        return lists.per_query(declaration.kernel, ks, **params)

    torch.testing.assert_close(values(torch.arange(6)[None], "average")[0], values(perms, "first").mean(0))


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
    mostly untied batch must still equal that row evaluated alone, cut at a depth and whole (whose tied rows reuse the
    batch's order under "average")."""
    preds, target, mask = _batch_with_some_tied_rows(padded)
    uses_k = (name, fn, higher_is_better) in CUTOFF_MEASURES
    for ks in ([1, 2, 3, 6], [2, 10, 40], None) if uses_k else (None,):
        kwargs = {"k": ks} if ks is not None else {}
        batch = fn(preds, target, mask=mask, ties=ties, reduction="none", **kwargs)
        for row in (0, 1, 3, 5, 7, 8, 11, 17, 23):  # the tied rows and a few others
            alone = fn(
                preds[row : row + 1].double(), target[row : row + 1], mask=mask[row : row + 1], ties=ties,
                reduction="none", **kwargs,
            )
            torch.testing.assert_close(batch[row : row + 1].double(), alone, rtol=1e-5, atol=1e-6, equal_nan=True)


# ---------------------------------------------------------------------------------------------------- CPU routes


def _evaluate(preds, target, names, backend="numpy", **kwargs):
    with torchrank.use_backend(backend):
        return F.evaluate(preds, target, names, reduction="none", **kwargs)


def _assert_matches_reference(preds, target, names, **kwargs):
    """Every measure of ``names`` on the numpy backend equals its value for the float64 scores on the torch backend
    (one torch.sort of whole rows, closed forms for every tie group: none of the numpy backend's routes)."""
    got = _evaluate(preds, target, names, **kwargs)
    want = _evaluate(preds.double(), target, names, backend="torch", **kwargs)
    for name in names:
        message = functools.partial("{}: {}".format, name)
        torch.testing.assert_close(got[name].double(), want[name].double(), rtol=1e-5, atol=1e-6, equal_nan=True,
                                   msg=message)  # fmt: skip


def _at(depth: int | None, err: bool = True) -> list[str]:
    """Measures reading the first ``depth`` positions (None: whole lists), whose values change with the order of
    different labels anywhere in them; ``err``: ERR too (its tie-averaged form costs the square of a tie group's
    size: short rows only)."""
    names = ["ndcg", "map", "mrr", "rbp", "rprec", "mean_rank"] if depth is None else [
        f"ndcg@{depth}", f"P@{depth}", f"map@{depth}", f"mrr@{depth}", f"rbp@{depth}"
    ]  # fmt: skip
    return names + (["err" if depth is None else f"err@{depth}"] if err else [])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_reference_backend_and_the_numpy_backend_match_enumeration(backend, case):
    """The reference of the route tests below (the torch backend on float64 scores) and the numpy backend both give
    the brute-force values of every tie order (the mean for "average", the best and worst for the others), for the
    measures the route tests read."""
    preds, target = CASES[case]
    all_preds, all_target = _all_orders(preds, target)
    one = (torch.tensor(preds, dtype=torch.float64), torch.tensor(target, dtype=torch.float64))
    names = _at(None) + _at(3)
    every_order = _evaluate(all_preds, all_target, names, backend=backend, ties="first")
    for ties in ("average", "optimistic", "pessimistic"):
        got = _evaluate(*one, names, backend=backend, ties=ties)
        for name in names:
            values = every_order[name]
            best, worst = values.max(0).values, values.min(0).values
            if name == "mean_rank":  # the one measure here where lower is better
                best, worst = worst, best
            want = {"average": values.mean(0), "optimistic": best, "pessimistic": worst}[ties]
            message = functools.partial("{} {}: {}".format, name, ties)
            torch.testing.assert_close(got[name].double(), want.double(), msg=message)


def _short_rows(dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """40 rows of 12 scores in ``dtype``, tied everywhere (9 values), with -0.0 and 0.0, both infinities, a row of
    distinct scores, and (integer dtypes) rows of the dtype's extremes."""
    if dtype.is_floating_point:
        preds = (torch.randint(-4, 5, (40, 12), generator=g) / 4).to(dtype)
        preds[0, :4] = torch.tensor([0.0, -0.0, float("inf"), float("-inf")], dtype=dtype)
        preds[1] = torch.randn(12, generator=g).to(dtype)
        return preds
    info = torch.iinfo(dtype)
    low = max(info.min, -(2**40))  # int64: scores no float32 holds, past 2**24
    high = min(info.max, 2**40)
    preds = torch.randint(low, high + 1, (40, 12), generator=g, dtype=torch.int64).to(dtype)
    preds[2, :6] = info.max
    preds[3, :6] = info.min
    preds[4] = torch.randint(0, 3, (12,), generator=g).to(dtype)  # ties
    return preds


def _long_rows(dtype: torch.dtype, rows: int, items: int, g: torch.Generator) -> torch.Tensor:
    """Distinct float32 scores (then in ``dtype``) with tie groups of two to four planted at ranks 1 to 20 in every
    third row, two infinities tied at the top of one row, -0.0 and 0.0 tied inside the head of another, and three
    rows of a few values (tied everywhere)."""
    preds = torch.randn(rows, items, generator=g)
    order = preds.argsort(dim=1, descending=True)
    for row in range(0, rows, 3):
        at = [0, 1, 2, 3, 7, 8, 9, 10, 20][row % 9]
        for j in range(1 + row % 3):
            preds[row, order[row, at + j + 1]] = preds[row, order[row, at]]
    preds[1, order[1, :2]] = float("inf")
    preds[2] = -preds[2].abs() - 1
    preds[2, order[2, :4]] = torch.tensor([1.0, 0.0, -0.0, 0.0])
    preds[4:7] = (preds[4:7] * 2).round()
    return preds.to(dtype)


# name: (rows, items, padded); the scores of short rows tie everywhere, those of long rows are mostly distinct
ROUTE_SHAPES = {
    "short rows": (40, 12, False),  # whole rows keyed at every cut-off
    "short rows, padded": (40, 12, True),  # padding anywhere in the row: padding keys sorted last
    "rows of 240": (90, 240, False),  # the keys of only the items that can make a head of 4 or 10
    "rows of 480": (44, 480, False),
    "rows of 480, padded": (44, 480, True),  # padding: every item keyed
}
SHORT_DTYPES = [
    *(torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16),  # packed into sort keys
    *(torch.float64, torch.int32),  # numpy's argsort of the (negated) scores
    torch.int64,  # no float holds them: torch's sort
]
LONG_SHAPES = ("rows of 240", "rows of 480", "rows of 480, padded")
ROUTE_CASES = [(shape, dtype) for shape in ("short rows", "short rows, padded") for dtype in SHORT_DTYPES]
ROUTE_CASES += [(shape, torch.float32) for shape in LONG_SHAPES] + [("rows of 480", torch.bfloat16)]


@pytest.mark.parametrize("ties", ["first", "average", "optimistic", "pessimistic"])
@pytest.mark.parametrize(("shape", "dtype"), ROUTE_CASES, ids=[f"{s}-{str(d)[6:]}" for s, d in ROUTE_CASES])
def test_every_cpu_route_ranks_as_the_reference(shape, dtype, ties):
    """Every score dtype, list length, padding and cut-off, with labels that ride in the keys (0 .. 4; halves, negative
    ones unvalidated), or that cannot ride (a ``judged`` mask: the keys carry the item indices, and the rows tied
    within the cut-off are ranked apart): every measure equals the reference's. Under
    ``"first"`` that is a stable sort (equal scores in input order, -0.0 equal to 0.0, padding last). Long rows take
    each kind of labels under one tie order (the keys are the same under the others)."""
    rows, items, padded = ROUTE_SHAPES[shape]
    g = torch.Generator().manual_seed(3)
    preds = _short_rows(dtype, g) if items < 200 else _long_rows(dtype, rows, items, g)
    target = torch.randint(0, 5, (rows, items), generator=g)
    mask = torch.rand(rows, items, generator=g) > 0.2 if padded else None
    halves = (torch.randint(-3, 8, (rows, items), generator=g) / 2).float()
    halves[0, :3] = torch.tensor([-0.0, 0.0, -0.0])
    judged = torch.rand(rows, items, generator=g) > 0.3
    labels = [("int", target, {})]
    if ties != "first" and (items < 200 or ties == "optimistic"):
        labels.append(("halves", halves, {"validate_args": False}))
    if ties != "first" and (items < 200 or ties == "average"):
        labels.append(("judged", target, {"judged": judged}))
    depths = (None, 1, 3, 9) if items < 200 else (None, 3, 9)
    for (_, labels_, kwargs), depth in itertools.product(labels, depths):
        _assert_matches_reference(preds, labels_, _at(depth, err=items < 200), mask=mask, ties=ties, **kwargs)


def _few_tied_rows(preds: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``preds`` with a pair of different labels tied at ranks 3-4 in rows 1 and 2, and a group of three at ranks 5-7
    in row 3: a few rows whose tie order matters, inside a cut-off of 10."""
    preds, target = preds.clone(), target.clone()
    order = preds.float().argsort(dim=1, descending=True)
    for row, at, size in ((1, 2, 2), (2, 2, 2), (3, 4, 3)):
        items = order[row, at : at + size]
        preds[row, items] = preds[row, items[0]].item()
        target[row, items] = torch.arange(size)
    return preds, target


def _route_case(name: str) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The inputs of one case of :data:`ROUTES_BUILT`: 30 rows of distinct normal scores (a few rows with ties of
    different labels), labels 0 .. 4; rows of 50 items (every item keyed), of 150 (a top-k of a head of 2, too short a
    row to select it from) or of 800 (only a head's items keyed)."""
    g = torch.Generator().manual_seed(53)
    items = 800 if "long" in name else 150 if "mid" in name else 100 if "large batch" in name else 50
    rows = 10_500 if "large batch" in name else 30  # a large batch: over 2**20 items
    preds, target = _few_tied_rows(torch.randn(rows, items, generator=g),
                                   torch.randint(0, 5, (rows, items), generator=g))
    kwargs: dict = {}
    if "bfloat16" in name:
        preds = preds.bfloat16()
    if "wide labels" in name:  # labels of 7 bits: more than a 32-bit key's low bits hold
        target = target * 25
    if "float64" in name:
        preds = preds.double()
    if "int64" in name:
        preds = (preds * 1e6).long()
    if "padded" in name:
        kwargs["mask"] = torch.rand(rows, items, generator=g) > 0.2
    if "judged" in name:
        kwargs["judged"] = torch.rand(rows, items, generator=g) > 0.3
    if "mostly tied" in name:  # ties of different labels inside the cut-off in most rows
        preds, target = _few_tied_rows(preds, target)
        preds[:, :3] = 9.0
        target[:, :3] = torch.tensor([0, 1, 2])
    return preds, target, kwargs


# case: (ties, depth, the route that must rank it, how its tied rows are ranked: None (no row apart), "enumerated"
# (pairs, in each order), "exact" (a ranking of their own), "both", or "whole batch" (mostly tied: every row's ties
# applied in the one ranking, none apart))
ROUTES_BUILT = {
    "short": ("average", 10, "compact keys", "both"),  # labels 0 .. 4 fit the low bits of 32-bit keys
    "short, whole rows": ("optimistic", None, "compact keys", None),  # every tie group ordered by label in the sort
    "short, padded": ("average", None, "compact keys", "both"),
    "short, mostly tied": ("average", 10, "label keys", "whole batch"),
    "short, bfloat16": ("pessimistic", 10, "compact keys", None),
    "short, wide labels": ("average", 10, "label keys", "both"),  # labels of 7 bits: 64-bit keys
    "short, whole rows, wide labels": ("optimistic", None, "label keys", None),
    "short, padded, wide labels": ("average", None, "label keys", "both"),
    "short, bfloat16, wide labels": ("pessimistic", 10, "label keys", None),
    "long": ("average", 10, "label keys, head items", "both"),
    "long, bfloat16": ("average", 10, "label keys, head items", "whole batch"),  # ties in most heads
    "long, padded": ("average", 10, "compact keys", "both"),  # padding: every item keyed
    "long, whole rows": ("average", None, "compact keys", "both"),
    "long, padded, wide labels": ("average", 10, "label keys", "both"),
    "long, whole rows, wide labels": ("average", None, "label keys", "both"),
    "large batch": ("average", 10, "label keys, head items", "both"),  # rows of 100 select a head past 2**20 items
    "large batch, bfloat16": ("average", 10, "label keys, head items", "exact"),
    "large batch, first": ("first", 10, "index keys, head items", None),
    "short, first": ("first", 10, "index keys", None),  # a stable sort: "first" as it stands
    "short, judged": ("average", 10, "index keys", "both"),  # labels cannot ride beside a judged mask
    "long, first": ("first", 10, "index keys, head items", None),
    "long, judged": ("optimistic", 10, "index keys, head items", "exact"),
    "short, float64": ("average", 10, "argsort", "both"),  # no key holds float64 scores
    "short, float64, first": ("first", 10, "argsort", "exact"),  # an unstable sort: tied rows ranked apart
    "short, float64, mostly tied": ("average", 10, "sort", "whole batch"),  # torch's sort of every row
    "short, int64": ("average", 10, "sort", "whole batch"),  # no float holds them
    "mid": ("average", 1, "top-k", None),  # the ties at ranks 3 to 7: past the top 2
    "mid, first": ("first", 1, "top-k", None),
    "mid, padded": ("average", 1, "compact keys", None),  # padding: keys
    "mid, padded, wide labels": ("average", 1, "label keys", None),
    "mid, mostly tied": ("average", 1, "label keys", "whole batch"),  # the top-k finds ties: the keys of whole rows
}


@pytest.mark.parametrize("case", list(ROUTES_BUILT))
def test_each_cpu_route_is_taken_where_built_to_be(case):
    """Each ordering route of the numpy backend ranks the inputs built to take it, by name (:attr:`Ranking.route`),
    with its tied rows ranked apart (or the whole batch's ties applied at once) as built; the values are the
    reference's. A moved threshold fails here rather than silently send these inputs down another route."""
    from torchrank.functional._pipeline import format_on_backend as format_inputs
    from torchrank.functional._ranked import rank

    ties, depth, route, apart = ROUTES_BUILT[case]
    preds, target, kwargs = _route_case(case)
    ranking = rank(format_inputs(preds, target, **kwargs), ties=ties, depth=depth)
    assert ranking.route == route
    kinds = {"enumerated" if a.owner is not None else "exact" for a in ranking.apart}
    if apart == "whole batch":
        assert not kinds and ranking.ties == "average"
    else:
        assert kinds == ({"enumerated", "exact"} if apart == "both" else {apart} if apart else set())
    _assert_matches_reference(preds, target, _at(depth), ties=ties, **kwargs)


def test_labels_of_a_large_batch_in_the_callers_dtype_rank_as_the_reference():
    """Batches of 2**20 items or more keep the labels in the caller's dtype (int64, bfloat16), read by blocks of
    rows: the head selection of a cut-off of 10 (by blocks of rows) and the label keys of whole rows give the
    reference's values."""
    g = torch.Generator().manual_seed(43)
    preds = _plant_ties(torch.rand(4097, 256, generator=g))  # 1,048,832 items
    target = torch.randint(0, 5, preds.shape, generator=g)
    _assert_matches_reference(preds, target, ["ndcg@10", "P@10", "mrr@10"], ties="average")  # 16 blocks of rows
    _assert_matches_reference(preds, target.bfloat16(), ["ndcg", "map"], ties="optimistic")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_err_cutoffs_inside_a_large_tie_group_equal_the_whole_recurrence(backend):
    """ERR@k of rows whose tie groups run past k (one of 40 items from rank 3, every item of the last row) equals
    the value read from the recurrence over the whole group (a cut-off past every group), and enumeration's where
    a group is small enough to enumerate."""
    g = torch.Generator().manual_seed(11)
    preds, target = torch.randn(4, 60, generator=g, dtype=torch.float64), torch.randint(0, 5, (4, 60), generator=g)
    preds[0, 2:42] = preds[0, 2]  # 40 tied items from rank 3
    preds[1, :5] = 7.0  # 5 tied items at the top, enumerable
    preds[3] = 0.0  # every item tied
    with torchrank.use_backend(backend):
        for k in (1, 3, 4, 10):
            capped = F.err(preds, target, k=k, reduction="none")
            whole = F.err(preds, target, k=[k, 60], reduction="none")[:, 0]
            torch.testing.assert_close(capped, whole, rtol=1e-10, atol=1e-12)
    orders = torch.tensor(list(itertools.permutations(range(5))))  # row 1's tie group, each order equally likely
    row_preds = preds[1].expand(len(orders), -1).clone()
    row_preds[torch.arange(len(orders)).unsqueeze(1), orders] = torch.arange(12.0, 7.0, -1, dtype=torch.float64)
    enumerated = F.err(row_preds, target[1].expand_as(row_preds), k=3, ties="first", reduction="none").mean()
    torch.testing.assert_close(F.err(preds[1], target[1], k=3), enumerated, rtol=1e-10, atol=1e-12)


def test_cutoffs_before_at_and_past_a_deep_tie_equal_each_row_alone():
    """Under "average", a tied pair deep in a row matters only to the cut-offs that reach it: every cut-off, before,
    at, across and past the pairs (ranks 5-6 and 8-9), gives each tied row the value it has alone."""
    g = torch.Generator().manual_seed(5)
    preds, target = torch.randn(6, 30, generator=g), torch.randint(0, 3, (6, 30), generator=g)
    preds[2] = torch.linspace(3, -3, 30)
    preds[2, 5] = preds[2, 4]  # a tie at ranks 5 and 6, between labels 0 and 2
    target[2, 4], target[2, 5] = 0, 2
    preds[4] = torch.linspace(3, -3, 30)
    preds[4, 8] = preds[4, 7]  # and one deeper, at ranks 8 and 9
    target[4, 7], target[4, 8] = 2, 0
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


@pytest.mark.parametrize("labels", ["0 .. 3", "0 .. 48"])
def test_tied_pairs_average_as_every_order_does(labels):
    """Under "average", rows whose ties of different labels are at most three pairs, rows with more pairs or larger
    groups, and rows whose ties each hold one label, for labels 0 .. 3 and 0, 16, 32, 48: the rows of pairs equal the
    brute-force mean of ``ties="first"`` over every order of their tied pairs, for the measures of one evaluate() with
    cut-offs before, inside and past the pairs; every row equals the reference, whole and cut at 10 (a pair across
    it)."""
    names = ["ndcg@5", "ndcg@10", "ndcg_exp@20", "map", "map@6", "mrr", "P@10", "recall@5", "success@2", "err@10"]
    preds, target, _ = _batch_with_tied_pairs(padded=False)
    target = target if labels == "0 .. 3" else target * 16
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
    _assert_matches_reference(preds, target, names)
    _assert_matches_reference(preds, target, ["ndcg@10", "map@10", "P@10", "err@10", "mrr@10"])


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


def test_thousands_of_tied_pairs_give_the_reference_values():
    """Past 4,096 tied pairs of different labels in a batch (half of its 1,040 rows hold eight each, shuffled), every
    tied row gets the closed forms with no plan per pair: the values are the reference's."""
    g = torch.Generator().manual_seed(47)
    rows, items = 1040, 30
    preds = torch.linspace(3, -3, items).repeat(rows, 1)
    target = torch.randint(0, 4, (rows, items), generator=g)
    tied = torch.arange(0, rows, 2)
    for at in range(0, 16, 2):  # ranks 1-2, 3-4, ..., 15-16, labels apart
        preds[tied, at + 1] = preds[tied, at]
        target[tied, at + 1] = (target[tied, at] + 1) % 4
    shuffle = torch.rand(rows, items, generator=g).argsort(dim=1)
    preds, target = preds.gather(1, shuffle), target.gather(1, shuffle)
    _assert_matches_reference(preds, target, ["ndcg@10", "map", "mrr", "P@5", "recall@10", "rbp"])


def test_a_ranking_and_its_rows_apart_are_freed_without_the_garbage_collector():
    """No reference cycle between a ranking and the rankings of its tied rows: each call's tensors are freed on
    return (a cycle kept them until the next garbage collection, and large calls paged fresh memory in)."""
    import gc
    import weakref

    from torchrank.functional._pipeline import format_on_backend as format_inputs
    from torchrank.functional._ranked import rank

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
    from torchrank.functional.backends._numpy.tied_rows import rows_any

    g = torch.Generator().manual_seed(width)
    wide = (torch.rand(300, width + 3, generator=g) < density).to(dtype)
    for x in (wide[:, :width].contiguous(), wide[:, 2 : width + 2]):
        assert torch.equal(rows_any(x), x.bool().any(1))


@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_mostly_tied_short_cutoff_ranks_as_the_reference(ties, dtype):
    """A small batch (a validation step, 9 x 2,000) with a short cut-off (2) whose scores, on ~40 values, tie in every
    row (too many items tie for the head to select them): the key sort of whole rows (bfloat16), or torch's sort
    (float64, which no key holds). The values are the reference's."""
    g = torch.Generator().manual_seed(8)
    preds = (torch.randn(9, 2000, generator=g) * 5).round().to(dtype)
    target = torch.randint(0, 4, (9, 2000), generator=g)
    _assert_matches_reference(preds, target, ["ndcg@2", "map@2", "P@1", "mrr@2", "rbp@2"], ties=ties)


@pytest.mark.parametrize("ties", ["average", "first", "optimistic", "pessimistic"])
@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
def test_selected_head_ranks_as_the_reference(ties, padded):
    """Cut-offs far inside long CPU lists (40 x 800) rank the keys of only the items that can make each row's head
    (unpadded), or of every item (padded). Every measure equals the reference's, with
    rows that tie inside, across and past the cut-offs 10 and 20, and rows of a few values, tied everywhere."""
    g = torch.Generator().manual_seed(9)
    preds = torch.rand(40, 800, generator=g)
    target = torch.randint(0, 4, (40, 800), generator=g)
    order = preds.argsort(dim=1, descending=True)
    for row, at in [(1, 4), (2, 9), (3, 19), (4, 40)]:  # ties inside, across and past the cut-offs 10 and 20
        preds[row, order[row, at + 1]] = preds[row, order[row, at]]
    preds[5:9] = (preds[5:9] * 8).round()  # rows of a few values: tied everywhere
    mask = torch.rand(40, 800, generator=g) > 0.1 if padded else None
    measures = ["ndcg@10", "ndcg@20", "map@10", "P@5", "mrr@20", "err@10", "rbp@20", "recall@20", "frp@10"]
    _assert_matches_reference(preds, target, measures, mask=mask, ties=ties)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ideal_rows_sorted_descending_equal_the_sort(dtype):
    """The ideal labels' head of every cut-off (short and long rows, deep cut-offs, whole lists) equals the head of a
    descending sort, for rows with fewer positive labels than the cut-off, rows of zeros, infinite labels, and
    labels with the sign bit set (negative, unvalidated, or -0.0)."""
    from torchrank.functional._descending import descending_rows

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
                got = descending_rows(rows, depth)
                assert got.dtype == dtype and got.is_contiguous()
                assert torch.equal(got, want[:, :depth])


def test_ndcg_with_negative_unvalidated_labels_keeps_the_sorted_ideal():
    """NDCG@k of long rows (600 items) with negative labels (allowed unvalidated) equals the reference's: the ideal
    labels' head must not reorder negative labels."""
    g = torch.Generator().manual_seed(6)
    preds = torch.rand(20, 600, generator=g)
    target = -torch.randint(1, 4, (20, 600), generator=g).float()
    target[:, :5] = torch.randint(0, 3, (20, 5), generator=g).float()  # a few labels >= 0: the head holds negatives
    got = F.ndcg(preds, target, k=[10, 50], reduction="none", validate_args=False)
    with torchrank.use_backend("torch"):
        want = F.ndcg(preds.double(), target, k=[10, 50], reduction="none", validate_args=False)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_head_items_hold_every_item_that_can_make_the_head(dtype):
    """The items selected for the head of each row are exactly those scoring at least the head-th highest score
    (heads of 1, 11 and 100 in 600): with ties at that score, -0.0 and 0.0 there, negative and infinite scores, scores
    laid out column by column; None with a NaN, with both infinities, and with ties too many (rows past a quarter of
    their length)."""
    from torchrank.functional.backends._numpy.keys import _head_items

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
def test_head_of_selected_items_ranks_as_the_reference(ties, mostly_tied, dtype):
    """Cut-offs far inside long unpadded lists (40 x 800, a cut-off of 10) rank only the items that can make the head:
    every measure equals the reference's, with ties inside, across and past the cut-off, at the selection's edge (a
    row holding more than the head), and with most rows tied inside it (the selected items then hold each tie group
    whole, averaged in one ranking padded after them), for float32 scores and half-precision ones read as float32
    (bfloat16: ties everywhere)."""
    g = torch.Generator().manual_seed(13)
    preds = torch.randn(40, 800, generator=g).to(dtype)
    target = torch.randint(0, 4, (40, 800), generator=g)
    order = preds.argsort(dim=1, descending=True)
    tied_rows = range(1, 31) if mostly_tied else range(1, 5)
    for row in tied_rows:
        at = [2, 9, 10, 40][row % 4]  # inside, across (10/11), at the selection's edge (11/12), past the cut-offs
        preds[row, order[row, at + 1]] = preds[row, order[row, at]]
    measures = ["ndcg@10", "map@10", "P@5", "mrr@10", "err@10", "rbp@10", "recall@10", "frp@10"]
    _assert_matches_reference(preds, target, measures, ties=ties)


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


WHOLE_ROW_SCORES = {  # name: scores of 120 x 50
    "float32 in [0, 1)": lambda g: torch.rand(120, 50, generator=g),
    "float32 normal": lambda g: torch.randn(120, 50, generator=g),
    "float32 with infinities": (
        lambda g: torch.randn(120, 50, generator=g).index_fill_(1, torch.tensor([7]), float("inf"))
        .index_fill_(1, torch.tensor([11]), -float("inf"))
    ),
    "-0.0 and 0.0": (  # 0.0, -0.0, 1e-20 and 2e-20: zeros of both signs must tie
        lambda g: torch.where(
            torch.rand(120, 50, generator=g) < 0.5, torch.randint(0, 3, (120, 50), generator=g) * 1e-20, -0.0
        )
    ),
    "bfloat16 normal": lambda g: torch.randn(120, 50, generator=g).bfloat16(),
    "float16 normal": lambda g: torch.randn(120, 50, generator=g).half(),
    "int8": lambda g: torch.randint(-128, 128, (120, 50), generator=g).to(torch.int8),
}


@pytest.mark.parametrize("scores", list(WHOLE_ROW_SCORES))
@pytest.mark.parametrize("labels", ["int", "whole floats", "bool"])
@pytest.mark.parametrize("ties", ["average", "optimistic", "pessimistic"])
@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
def test_label_keys_of_whole_rows_rank_as_the_reference(scores, labels, ties, padded):
    """Rows sorted whole (120 x 50) with labels 0 .. 4 (integers, whole floats, bools) riding in the keys: every
    measure of whole rows, and of rows cut at 10, equals the reference's under every tie order, for scores of every
    packable kind (infinities, -0.0 tying with 0.0, half precisions, int8) with ties planted inside, at, across and
    past the cut-off, and rows of padding (a mask; padding scored as real items) ending before, at or after the
    cut-off."""
    g = torch.Generator().manual_seed(17)
    make = WHOLE_ROW_SCORES[scores]
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
    if labels == "whole floats":
        target = target.float()
    elif labels == "bool":
        target = target > 2
    whole = ["ndcg", "map", "mrr", "rprec", "mean_rank", "rbp", "ndcg@5", "P@20"]
    for names in (["ndcg@10", "map@10", "P@10", "mrr@10", "err@10", "recall@10", "frp@10", "rbp@10"], whole):
        _assert_matches_reference(preds, target, names, mask=mask, ties=ties)


def test_labels_past_small_whole_numbers_and_nan_scores_rank_as_the_reference():
    """Labels that are not whole numbers 0 .. 15 (fractions, 16 and up, negative or NaN ones unvalidated), labels up
    to 12, and NaN scores: the reference's values."""
    g = torch.Generator().manual_seed(19)
    preds = _plant_ties(torch.rand(60, 40, generator=g))
    target = torch.randint(0, 5, preds.shape, generator=g).float()
    nan = preds.clone()
    nan[3, 5] = float("nan")
    nan_label = target.clone()
    nan_label[4, 2] = float("nan")
    cases = [(preds, target / 2), (preds, target * 4), (preds, target - 1), (preds, nan_label)]
    cases.append((preds, target * 3))  # labels up to 12: held
    for p, t in cases:
        _assert_matches_reference(p, t, ["ndcg", "map", "mrr"], validate_args=False)
    # a NaN score (unvalidated) ranks where numpy's sort of the float64 scores puts it (torch's sort puts it elsewhere)
    got = _evaluate(nan, target, ["ndcg", "map", "mrr"], validate_args=False)
    want = _evaluate(nan.double(), target, ["ndcg", "map", "mrr"], validate_args=False)
    for name, value in got.items():
        torch.testing.assert_close(value.double(), want[name], rtol=1e-5, atol=1e-6, equal_nan=True)


def test_scores_a_unit_in_the_last_place_apart_rank_as_the_reference():
    """Scores a unit in the last place apart, in a batch spanning both infinities, with different labels, whole and
    cut (a group across the cut-off at 10): every value is the reference's; so are rows of scores crowded that close."""
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
    for ties in ("average", "optimistic", "pessimistic"):
        _assert_matches_reference(preds, target, ["ndcg", "map", "mrr@3", "P@4", "err@5"], ties=ties)
        _assert_matches_reference(preds, target, ["ndcg@10", "P@10", "err@10"], ties=ties)
    clustered = 1 + 1e-6 * torch.randn(40, 30, generator=g)
    clustered[:, 0] = -1e30
    _assert_matches_reference(clustered, target, ["ndcg", "map", "mrr@3", "P@4", "err@5"])


@pytest.mark.parametrize("ties", ["average", "optimistic", "pessimistic"])
def test_label_keys_rank_flat_input_of_unequal_queries_as_the_reference(ties):
    """Flat ``(preds, target, indexes)`` input of unequal queries (padded rows, padding last, scored 0): every measure
    equals the reference's."""
    g = torch.Generator().manual_seed(29)
    lengths = torch.randint(1, 60, (80,), generator=g)
    indexes = torch.repeat_interleave(torch.arange(80), lengths)
    preds = torch.rand(len(indexes), generator=g) * 0.5 + 0.25
    preds[::7] = preds[1::7][: len(preds[::7])]  # ties, within and across queries
    target = torch.randint(0, 4, (len(indexes),), generator=g)
    _assert_matches_reference(preds, target, ["ndcg", "map", "mrr", "P@10", "ndcg@10", "err@5", "rprec"],
                              indexes=indexes, ties=ties)  # fmt: skip


def test_scores_next_to_the_largest_never_take_the_padding_key():
    """Scores of +-(2 - 1 ulp) beside padding: the lowest real item still counts (P of the whole list)."""
    edge = torch.tensor([0x3FFFFFFF, 0xBFFFFFFF - 2**32], dtype=torch.int32).view(torch.float32)  # +-(2 - 1 ulp)
    preds = torch.tensor([[edge[0], 0.5, edge[1], 0.0], [edge[0], 0.5, edge[1], 0.0]])
    target = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 1]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    got = F.precision(preds, target, mask=mask, reduction="none")
    torch.testing.assert_close(got, torch.tensor([1 / 3, 3 / 4]))
    _assert_matches_reference(preds, target, ["P", "ndcg", "map"], mask=mask)


def test_label_keys_see_no_tie_in_padding():
    """Padding keys are equal to one another, yet never a tie: a padded batch of distinct scores ranks as the
    reference, whole or cut at 10."""
    g = torch.Generator().manual_seed(31)
    preds = torch.randperm(40 * 30, generator=g).view(40, 30) / 4800 + 0.25  # distinct, and held whole
    target = torch.randint(0, 4, (40, 30), generator=g)
    mask = torch.arange(30) < torch.randint(1, 31, (40, 1), generator=g)
    for depth in (None, 10):
        _assert_matches_reference(preds, target, _at(depth), mask=mask)


def test_finite_scores_are_known_from_the_checks_only():
    """The input checks' sum tells finite scores apart (the head selection then skips its own NaN test): never
    with an infinity, a NaN unvalidated, or the checks off; always for integer scores. Long rows cut far inside (the
    head selection's input, 30,000 items) rank as the reference, with distinct scores and with both infinities."""
    from torchrank.functional._pipeline import format_on_backend as format_inputs

    g = torch.Generator().manual_seed(41)
    preds, target = torch.rand(100, 300, generator=g), torch.randint(0, 3, (100, 300), generator=g)
    assert format_inputs(preds, target).finite_scores
    assert not format_inputs(preds, target, validate_args=False).finite_scores
    assert format_inputs(torch.randint(0, 9, (100, 300), dtype=torch.int16), target).finite_scores
    _assert_matches_reference(preds, target, ["ndcg@3", "ndcg@10"])  # distinct scores: each head exactly 4 or 11 items
    preds[1, 7], preds[2, 9] = float("inf"), -float("inf")
    assert not format_inputs(preds, target).finite_scores
    _assert_matches_reference(preds, target, ["ndcg@3", "ndcg@10"])
