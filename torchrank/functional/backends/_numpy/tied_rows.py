"""The numpy backend's rows apart: the few rows whose tie order matters get a ranking of their own
(:func:`_set_rows_apart`, planned from one host read of the tied pairs), whose values ``apply_measure`` merges."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from torchrank.functional._inputs import RankingInput
from torchrank.functional._ranked import Ranking

# a tie order is worked out separately for at most this share of the rows; past it, for the whole batch
_MAX_TIED_SHARE = 0.5
# under "average", a row whose ties that matter are at most this many pairs is evaluated in each of its 2 ** pairs
# tie orders (:func:`_other_tie_orders`); more pairs, or a larger group, take the closed forms
_MAX_ENUMERATED_PAIRS = 3


class RowsApart(NamedTuple):
    """Rows of a ranking whose values come from a ranking of their own: one applying the ties, a row for each row
    (``owner`` None), or one of every other order of their tied pairs, ``owner`` ``[V]`` saying whose each of its rows
    is and ``orders`` ``[R]`` how many equally likely orders each row has (the batch's ranking holds one of them)."""

    rows: Tensor  # [R] rows of the batch's ranking
    ranking: Ranking
    first_tie: int  # no row here holds a tie that matters among its first `first_tie` positions
    owner: Tensor | None = None
    orders: Tensor | None = None


def _set_rows_apart(
    ranking: Ranking, rows: Tensor, pairs: Tensor, ties: str, exact: Callable[[Tensor], Ranking]
) -> None:
    """Fill :attr:`Ranking.apart` of ``ranking`` (ties in any order; docs/backends.md, "Rows apart"): ``rows`` hold a
    tied pair, ``pairs`` ``[R, >=S - 1]`` (0/1 or bool) says where a position of theirs holds the score of the next,
    over its first ``S`` positions (its width, or one more; any further column 0). ``exact(rows)`` ranks rows with
    ``ties`` applied; a few tied pairs under ``"average"`` are evaluated in each order (:func:`_other_tie_orders`)."""
    if rows.numel() == 0:
        return
    which, at = pairs.nonzero().unbind(1)  # each tied pair: its row among `rows`, and positions at, at + 1
    width = ranking.list_size
    if len(which) > _MAX_PLANNED_PAIRS:  # many ties: every tied row gets the closed forms, unplanned
        ranking.apart.append(RowsApart(rows, exact(rows), int(at.min())))  # the first tie of any of them
        return
    source, after = rows[which], (at + 1).clamp(max=width - 1)  # a pair across the cut-off: at is its last rank
    differs = ranking.labels[source, at] != ranking.labels[source, after]
    if ranking.judged is not None:
        differs |= ranking.judged[source, at] != ranking.judged[source, after]
    plan = _tie_plan(*torch.stack([which, at, differs.to(at.dtype)]).tolist(), width, ties == "average")  # one read
    if plan.exact:
        some = rows[torch.tensor(plan.exact, device=rows.device)]
        ranking.apart.append(RowsApart(some, exact(some), plan.exact_from))
    if plan.enumerated:
        some = rows[torch.tensor(plan.enumerated, device=rows.device)]
        own, owner, orders = _other_tie_orders(ranking, some, plan.owner, plan.swap_at)
        ranking.apart.append(RowsApart(some, own, plan.enumerated_from, owner, orders))


# the tied pairs :func:`_set_rows_apart` plans one by one on the host; past it, every tied row gets the closed forms
_MAX_PLANNED_PAIRS = 4096


class TiePlan(NamedTuple):
    """How :func:`_set_rows_apart` evaluates the rows holding a tie (indices among those rows)."""

    exact: list[int]  # rows that get a ranking applying the ties
    exact_from: int  # their first tie
    enumerated: list[int]  # rows evaluated in each order of their tied pairs
    enumerated_from: int  # their first tie that matters
    owner: list[int]  # for each of their other orders, the index of its row in `enumerated`
    swap_at: list[list[int]]  # and the positions i it swaps with i + 1


def _tie_plan(which: list[int], at: list[int], differs: list[int], width: int, enumerate_pairs: bool) -> TiePlan:
    """Plan the rows of :func:`_set_rows_apart` from their tied pairs in row-then-position order: each pair's row
    ``which``, its first position ``at`` and whether its two labels (or judged flags) differ ``differs``; with
    ``enumerate_pairs``, a row whose ties are pairs (no two touching) inside the cut-off, at most
    ``_MAX_ENUMERATED_PAIRS`` of different labels, is enumerated (docs/backends.md, "Rows apart").

    Example:
        >>> _tie_plan([0, 0, 2, 2], [3, 7, 1, 2], [1, 0, 1, 1], width=10, enumerate_pairs=True)
        TiePlan(exact=[2], exact_from=1, enumerated=[0], enumerated_from=3, owner=[0], swap_at=[[3]])
    """
    exact, exact_from, enumerated, enumerated_from, owner, swap_at = [], width, [], width, [], []
    for row, ties in itertools.groupby(zip(which, at, differs, strict=True), key=operator.itemgetter(0)):
        pairs = [(i, bool(d)) for _, i, d in ties]
        across = pairs[-1][0] >= width - 1
        swaps = [i for i, d in pairs if d and i < width - 1]
        if not (across or swaps):
            continue  # every tie group holds one label: all orders give the same values
        touching = any(b == a + 1 for (a, _), (b, _) in itertools.pairwise(pairs))  # a group of three or more
        if enumerate_pairs and not (across or touching) and len(swaps) <= _MAX_ENUMERATED_PAIRS:
            for subset in range(1, 2 ** len(swaps)):
                owner.append(len(enumerated))
                swap_at.append([i for j, i in enumerate(swaps) if subset >> j & 1])
            enumerated.append(row)
            enumerated_from = min(enumerated_from, swaps[0])
        else:
            exact.append(row)
            exact_from = min(exact_from, pairs[0][0])
    return TiePlan(exact, exact_from, enumerated, enumerated_from, owner, swap_at)


def _other_tie_orders(
    ranking: Ranking, rows: Tensor, owner: list[int], swap_at: list[list[int]]
) -> tuple[Ranking, Tensor, Tensor]:
    """The other orders of the rows ``rows`` of ``ranking`` (:class:`TiePlan`'s ``owner`` and ``swap_at``) as a ranking
    of one row per order; whose row each is ``[V]``, and each row's number of orders ``[R]``."""
    device = rows.device
    owner_t = torch.tensor(owner, device=device)
    source = rows[owner_t]
    # every (order, position i) to swap with i + 1: pairs never touch, so the swaps of one order are independent
    order_of = torch.tensor([v for v, at in enumerate(swap_at) for _ in at], device=device)
    first = torch.tensor([i for at in swap_at for i in at], device=device)

    def swapped(x: Tensor) -> Tensor:
        x = x[source]
        x[order_of, first], x[order_of, first + 1] = x[order_of, first + 1], x[order_of, first]
        return x

    valid = ranking.valid[:1].expand(len(owner), -1) if ranking.all_valid else ranking.valid[source]
    others = Ranking(
        # equal scores swapped: the same scores, read (never, as "first") from the batch's own, not from `ranking`,
        # which holds this one: a reference cycle would keep every call's tensors until the garbage collector runs
        scores=functools.partial(_rows_of_scores, ranking._scores, source), labels=swapped(ranking.labels),
        valid=valid, ideal_labels=ranking.ideal_labels[source], ties="first",
        judged=None if ranking.judged is None else swapped(ranking.judged),
        relevance_threshold=ranking.relevance_threshold, backend=ranking.backend, all_valid=ranking.all_valid,
        ranks_every_judged_item=ranking.ranks_every_judged_item,
    )
    others.averaged_over_orders = True
    orders = torch.bincount(owner_t, minlength=len(rows)).to(ranking.dtype) + 1
    return others, owner_t, orders


def _rows_of_scores(scores: Tensor | Callable[[], Tensor], rows: Tensor) -> Tensor:
    return (scores() if callable(scores) else scores)[rows]


def _select_rows(inputs: RankingInput, rows: Tensor) -> RankingInput:
    """``inputs`` restricted to the queries ``rows`` (whole lists: their ranking applies ``ties``)."""
    return dataclasses.replace(
        inputs, preds=inputs.preds[rows], target=inputs.target[rows], mask=inputs.mask[rows],
        ideal_target=inputs.ideal_target[rows], judged=None if inputs.judged is None else inputs.judged[rows],
        batch_shape=(len(rows),), exact_ties=True,
    )


def rows_any(x: Tensor) -> Tensor:
    """``x.any(1)`` of a CPU bool (or 0/1 byte) ``[Q, N]``: numpy's byte maximum, or on short rows with few nonzero
    bytes the rows of those bytes (benchmarks/notes/code_comment_timings.md)."""
    q, n = x.shape
    if n == 0:
        return torch.zeros(q, dtype=torch.bool, device=x.device)
    flags = x.view(torch.bool).numpy()
    if n < _SHORT_ROW_ITEMS and np.count_nonzero(flags) <= q:
        held = np.zeros(q, bool)
        held[np.flatnonzero(flags) // n] = True  # numpy finds nonzero bools (not bytes) fast
        return torch.from_numpy(held)
    return torch.from_numpy(flags.view(np.uint8).max(axis=1)).view(torch.bool)


# rows shorter than this are "short" to rows_any, where finding the rows of a few nonzero bytes pays against numpy's
# row maximum (benchmarks/notes/code_comment_timings.md)
_SHORT_ROW_ITEMS = 256
