"""The one sort every ranking metric builds on.

:func:`rank` orders each list once and returns a :class:`Ranking`: labels in rank order, the validity mask,
the number of relevant items and, lazily and cached, everything the metrics share (tie groups, cumulative
hits, the distribution of the first relevant position, ideal gains). A metric is then a few tensor
operations over these, and several metrics over the same input share one sort.

Ties (DESIGN section 4). ``"first"`` keeps input order among equal scores; ``"optimistic"`` /
``"pessimistic"`` put higher / lower labels first. ``"average"`` gives the exact expected value of a
metric when each group of equal scores is ordered uniformly at random: every position of a tie group then
holds each of the group's items with equal probability, so a metric linear in per-position values uses
the group mean; the non-linear ones (AP, RR, ERR, Kendall tau, ...) use the closed forms below, or, in a row
whose ties are a few pairs, the mean over each order of the pairs (:func:`_set_rows_apart`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import operator
import sys
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import NamedTuple

import torch
from torch import Tensor

from torchrank.functional._inputs import RankingInput, read_by_blocks, working_dtype
from torchrank.functional.backends import uses_numpy

try:  # numpy's SIMD sort ranks on CPU several times faster than torch.sort; torch runs without it
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

Gain = str | Callable[[Tensor], Tensor]
Discount = str | Callable[[Tensor], Tensor]


def rank(
    inputs: RankingInput, *, ties: str = "average", relevance_threshold: float = 1, depth: int | None = None
) -> Ranking:
    """Sort each list of ``inputs`` by descending score once, ordering ties as ``ties`` says.

    Padded items go last (after real items scored ``-inf``) and never count. ``depth``: the deepest
    position any measure will read (None: the whole list); the ranking may then stop there.

    On the numpy backend (:mod:`torchrank.functional.backends`) the tie order only matters for the rows that hold a
    tie within ``depth`` between items of different labels (or judged flags): every other row is ranked once, ties
    aside, and those few rows get a ranking of their own that applies ``ties`` exactly (:attr:`Ranking.apart`;
    :func:`apply_measure` merges them); finding and planning them reads small tensors on the host. The device
    backends sort whole rows once (stably where the tie order is a key) and never read the host: every measure then
    applies ``"average"`` by its closed form per tie group.

    Example:
        >>> import torch
        >>> from torchrank.functional._inputs import format_inputs
        >>> r = rank(format_inputs(torch.tensor([0.1, 0.9, 0.5]), torch.tensor([0, 2, 1])), ties="first")
        >>> r.labels
        tensor([[2., 1., 0.]])
    """
    if uses_numpy(inputs.preds):
        ranked = _rank_tied_rows_apart(inputs, ties, relevance_threshold, depth)
        if ranked is not None:
            return ranked
    mask = inputs.mask if inputs.padded else None
    order = _ranking_order(inputs.preds, inputs.target, mask, ties, inputs.padding_last)
    return _gather_ranking(inputs, order, ties, relevance_threshold)


def _gather_ranking(
    inputs: RankingInput,
    order: Tensor,
    ties: str,
    relevance_threshold: float,
    scores: Tensor | Callable[[], Tensor] | None = None,
) -> Ranking:
    """The :class:`Ranking` of ``inputs`` in ``order`` (``[Q, <=N]`` indices into each row); ``scores``: the
    scores in that order when already gathered, or a function gathering them when first read."""
    return Ranking(
        scores=inputs.preds.gather(1, order) if scores is None else scores,
        labels=_ranked_labels(inputs.target, order, working_dtype(inputs.preds)),
        valid=inputs.mask.gather(1, order) if inputs.padded else inputs.mask[:, : order.shape[1]],  # all True
        ideal_labels=inputs.ideal_target,
        judged=None if inputs.judged is None else inputs.judged.gather(1, order),
        ties=ties,
        relevance_threshold=relevance_threshold,
        all_valid=not inputs.padded,
        ranks_every_judged_item=_ranks_every_judged_item(inputs, order.shape[1]),
    )


def _ranks_every_judged_item(inputs: RankingInput, width: int) -> bool:
    """Whether a ranking of ``width`` positions holds every judged item of each row: no separate ideal labels,
    no cut-off (:attr:`Ranking.ranks_every_judged_item`)."""
    return inputs.ideal_target is inputs.target and width == inputs.target.shape[1]


def _ranked_labels(target: Tensor, order: Tensor, dtype: torch.dtype) -> Tensor:
    """The labels of each row in ``order`` ``[Q, <=N]``, in ``dtype``.

    Labels kept in the caller's dtype (large CPU batches) are gathered, then converted, when few positions are
    read; when most are, each block of rows is converted, then gathered into the output: no whole-batch
    temporary (nor a gather of 8-byte labels) to page in.
    """
    if target.dtype == dtype:
        return target.gather(1, order)
    q, n = target.shape
    if order.shape[1] * 4 <= n:
        return target.gather(1, order).to(dtype)
    out = torch.empty(order.shape, dtype=dtype, device=order.device)
    for block in row_blocks(q, n, _ROW_BLOCK_ITEMS):
        torch.gather(target[block].to(dtype), 1, order[block], out=out[block])
    return out


def row_blocks(num_rows: int, row_items: int, block_items: int) -> list[slice]:
    """Slices of ``num_rows`` rows of ``row_items`` items each, of about ``block_items`` items (one row at least)."""
    rows = max(1, block_items // max(row_items, 1))
    return [slice(start, min(start + rows, num_rows)) for start in range(0, num_rows, rows)]


# a tie order is worked out separately for at most this share of the rows; past it, for the whole batch
_MAX_TIED_SHARE = 0.5


def _rank_tied_rows_apart(
    inputs: RankingInput, ties: str, relevance_threshold: float, depth: int | None, topk: bool = True
) -> Ranking | None:
    """A ranking that orders ties only in the rows holding one within ``depth``; None where it can't.

    A row with no tie among the positions read has the same values under every tie order, so one fast sort
    (or top-k) of any stability ranks it. The rows with a tie are ranked again with ``ties`` applied exactly
    (:func:`_set_rows_apart`), unless the fast sort already kept input order among equal scores and
    ``ties="first"`` asks for just that, or its keys carried the labels (:func:`_rank_by_label_keys`: every tie
    group is then ordered by label already). ``topk``: whether a top-k may stand for the sort.
    """
    if ties != "first" and _labels_ride_in_keys(inputs, depth, topk):
        return _rank_by_label_keys(inputs, ties, relevance_threshold, depth)
    fast = _fast_order(inputs, depth, topk)
    if fast is None:
        return None
    order, scores, pairs, stable = fast
    if stable and ties == "first":  # equal scores already in input order, as "first" asks, in every row
        return _gather_ranking(inputs, order, "first", relevance_threshold, scores)
    rows = rows_any(pairs).nonzero().squeeze(1)
    if rows.numel() > _MAX_TIED_SHARE * len(pairs):  # mostly tied: one exact pass over all rows beats two passes
        if topk and _takes_topk(inputs, depth) and _packs(inputs.preds):
            # the key sort of whole rows is that pass (several times faster than the generic one on CPU): labels
            # riding in its keys order every tie group, or it keeps input order as "first" asks
            return _rank_tied_rows_apart(inputs, ties, relevance_threshold, depth, topk=False)
        return None
    ranking = _gather_ranking(inputs, order, "first", relevance_threshold, scores)

    def exact(tied: Tensor) -> Ranking:
        if ties == "average" and order.shape[1] == inputs.preds.shape[1]:
            # whole rows in descending order, padding last: every tie group is already contiguous, and "average"
            # averages each group whatever order it holds, so these rows need no sort of their own
            return _gather_ranking(_select_rows(inputs, tied), order[tied], ties, relevance_threshold)
        return rank(_select_rows(inputs, tied), ties=ties, relevance_threshold=relevance_threshold)

    _set_rows_apart(ranking, rows, pairs[rows], ties, exact)
    return ranking


# under "average", a row whose ties that matter are at most this many pairs is evaluated in each of its 2 ** pairs
# tie orders (:func:`_other_tie_orders`); more pairs, or a larger group, take the closed forms
_MAX_ENUMERATED_PAIRS = 3


class RowsApart(NamedTuple):
    """Rows of a ranking whose values come from a ranking of their own (see :func:`apply_measure`).

    Either ``ranking`` applies the ties itself, a row for each row (``owner`` None), or it holds every other
    order of the rows' tied pairs: ``owner`` ``[V]`` says whose each of its rows is and ``orders`` ``[R]`` how many
    equally likely orders each row has (the batch's ranking holds one of them), and a row's expected value is the
    mean over its orders.
    """

    rows: Tensor  # [R] rows of the batch's ranking
    ranking: Ranking
    first_tie: int  # no row here holds a tie that matters among its first `first_tie` positions
    owner: Tensor | None = None
    orders: Tensor | None = None


def _set_rows_apart(
    ranking: Ranking, rows: Tensor, pairs: Tensor, ties: str, exact: Callable[[Tensor], Ranking]
) -> None:
    """Fill :attr:`Ranking.apart` of ``ranking`` (ties in any order): ``rows`` are the rows holding a tied pair, and
    ``pairs`` ``[R, >=S - 1]`` (0/1 or bool, one row for each of ``rows``) says where a position of theirs holds the
    score of the one after it, over its first ``S`` positions (its width, or one more to see a tie across the
    cut-off; any further column is 0).

    Only a tie group holding items of different labels (or judged flags) depends on the tie order, so the other
    rows are left as they are. Under ``"average"`` a row whose such groups are a few pairs inside the ranking is
    evaluated in each of its tie orders (:func:`_other_tie_orders`: the few cheap passes of untied rankings,
    against the closed forms' dozens); every other row gets ``exact(rows)``, a ranking that applies ``ties``.
    """
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
    ``which``, its first position ``at`` and whether its two labels (or judged flags) differ ``differs``.

    A row matters when one of its tie groups holds different labels, or runs across the cut-off (a pair at the
    last ranked position, ``width - 1``). With ``enumerate_pairs``, a row whose ties are pairs (no two touching)
    inside the cut, at most ``_MAX_ENUMERATED_PAIRS`` of them holding different labels, is evaluated in each order
    of those: each nonempty subset of them, swapped, is one of its other orders. Every other row that matters is
    exact.

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
    """The other orders of the rows ``rows`` of ``ranking`` (:class:`TiePlan`'s ``owner`` and ``swap_at``; each
    row's own order is the one ``ranking`` holds), as a ranking of one row per order; whose row each is ``[V]``, and
    each row's number of orders ``[R]``."""
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

    others = Ranking(
        # equal scores swapped: the same scores, read (never, as "first") from the batch's own, not from `ranking`,
        # which holds this one: a reference cycle would keep every call's tensors until the garbage collector runs
        scores=functools.partial(_rows_of_scores, ranking._scores, source),
        labels=swapped(ranking.labels),
        valid=ranking.valid[:1].expand(len(owner), -1) if ranking.all_valid else ranking.valid[source],
        ideal_labels=ranking.ideal_labels[source],
        judged=None if ranking.judged is None else swapped(ranking.judged),
        ties="first",
        relevance_threshold=ranking.relevance_threshold,
        all_valid=ranking.all_valid,
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
        inputs,
        preds=inputs.preds[rows],
        target=inputs.target[rows],
        mask=inputs.mask[rows],
        ideal_target=inputs.ideal_target[rows],
        judged=None if inputs.judged is None else inputs.judged[rows],
        batch_shape=(len(rows),),
        exact_ties=True,
    )


# the low half of a label key per tie order: None keeps the label's bits (any order within a tie group will do:
# "average" averages it whole); else an ordered int32 xor this, read unsigned: ascending labels (pessimistic,
# lower labels first) or descending (optimistic)
_LABEL_FLIP = {"average": None, "pessimistic": -(2**31), "optimistic": 2**31 - 1}


def _labels_ride_in_keys(inputs: RankingInput, depth: int | None, topk: bool = True) -> bool:
    """Whether the key sort can carry the labels in place of the item indices (:func:`_rank_by_label_keys`):
    CPU scores it packs, no per-item tensor but the labels to put in rank order, no short top-k instead (where
    ``topk`` allows one)."""
    return (
        _packs(inputs.preds) and inputs.judged is None and not inputs.exact_ties
        and not (topk and _takes_topk(inputs, depth))
    )


def _packs(preds: Tensor) -> bool:
    """Whether the CPU key sort (:func:`_sorted_keys`) can rank ``preds``."""
    return preds.device.type == "cpu" and np is not None and preds.dtype in _PACKABLE


def _rank_by_label_keys(inputs: RankingInput, ties: str, relevance_threshold: float, depth: int | None) -> Ranking:
    """The ranking of one key sort whose keys hold each item's label in their low half: the sorted keys are the
    labels in rank order, with no order to gather them by, and every tie group already ordered by label.

    ``"optimistic"`` / ``"pessimistic"`` rank each tie group by descending / ascending label in that one sort,
    every row exactly. Under ``"average"`` the rows with a tie within ``depth`` get a ranking of their own
    (:func:`_set_rows_apart`): each order of a few tied pairs, or one that averages each group, on whole rows (a
    group may run past the depth). Rows sorted whole take 32-bit keys where those hold the labels
    (:func:`_compact_key_ranking`).
    """
    mask = inputs.mask if inputs.padded else None
    flip = _LABEL_FLIP[ties]
    n = inputs.preds.shape[1]
    width = n if depth is None or depth >= n else depth
    seen = None if width == n else width + 1  # one past the cut-off, to see a tie across it
    if not _sorts_head_only(seen, n, inputs.preds.numel(), inputs.padded):
        ranking = _compact_key_ranking(inputs, ties, relevance_threshold, width, seen)
        if ranking is not None:
            return ranking
    write = functools.partial(_write_label_halves, inputs.target, flip)
    keys = _sorted_keys(inputs.preds, mask, write, seen, finite=inputs.finite_scores)
    if ties != "average":
        return _key_ranking(inputs, keys[:, :width], flip, ties, relevance_threshold)
    pairs = _tied_neighbours(keys, mask, seen)
    rows = rows_any(pairs).nonzero().squeeze(1)
    # the keys of only the items that can make the head (:func:`_head_items`) are sorted whole, and every tie group
    # reaching into the head is whole among them; but a row may end in padding keys
    selected = keys.shape[1] < n

    def whole_groups(some: Tensor) -> Tensor:  # the keys of rows averaging ties: whole groups, so whole rows sorted
        return some if selected else _sort_whole_rows(some, seen)

    if rows.numel() > _MAX_TIED_SHARE * len(pairs):  # mostly tied: every row's groups averaged, in one ranking
        return _key_ranking(inputs, whole_groups(keys), flip, "average", relevance_threshold, padded=selected)
    ranking = _key_ranking(inputs, keys[:, :width], flip, "first", relevance_threshold)  # untied: any order

    def exact(tied: Tensor) -> Ranking:
        own = whole_groups(keys[tied])
        return _key_ranking(_select_rows(inputs, tied), own, flip, "average", relevance_threshold, padded=selected)

    _set_rows_apart(ranking, rows, pairs[rows], ties, exact)
    return ranking


def _sorts_head_only(head: int | None, n: int, items: int, padded: bool) -> bool:
    """Whether :func:`_sorted_keys` ranks only a head of ``head`` positions of rows of ``n`` (batches of ``items``),
    rather than sorting whole rows: by the items' selection (unpadded rows) or the keys' (:func:`_partitioned`)."""
    return (not padded and _selects_head(head, n, items)) or _partitioned(head, n)


# labels of at most this many bits (0 .. 15) ride in the low bits of 32-bit keys (:func:`_compact_key_ranking`)
_COMPACT_LABEL_BITS = 4
# the low bits that are zero in the float32 of every score of these dtypes: dropped from a 32-bit key, they lose nothing
_ZERO_LOW_BITS = {
    torch.float32: 0, torch.float16: 13, torch.bfloat16: 16, torch.int16: 8, torch.int8: 16, torch.uint8: 16
}


class CompactKeys(NamedTuple):
    """Each row of 32-bit sort keys sorted ascending (:func:`_compact_keys`): ``keys`` uint32 ``[Q, N]``, the label
    bits ``bits`` in the low end, whether every key kept its score whole (``whole``) or equal keys may hold scores a
    few units in the last place apart, and the key of padding (above every real item's; None: no padding)."""

    keys: np.ndarray
    bits: int
    whole: bool
    padding: int | None = None


def _compact_keys(
    preds: Tensor, target: Tensor, mask: Tensor | None, integer_labels: bool, optimistic: bool
) -> CompactKeys | None:
    """Sort keys of 32 bits for CPU ``preds`` (a packable dtype) whose labels ``target`` are integers 0 .. 15: the
    distance of each score below the batch's highest, as an ordered integer, in the high bits and the label in the
    ``bits`` low ones (its complement to ``2 ** bits - 1`` when ``optimistic``: higher labels first within a tie);
    where ``mask`` is False, a padding key whose high bits are all set, which no real item's reaches, and whose label
    reads as 0. None where the labels are not such integers or a score is NaN (padding's scores count in the span:
    they can only widen it).

    numpy sorts 32-bit integers with SIMD twice as fast as 64-bit ones (1,000 x 1,000: 1.0 against 2.2 ms), and one
    pass builds a key with no index or label half to interleave. The distance fits whole in ``32 - bits`` bits when
    the scores span a few binades (bfloat16 and float16 scores always; a million float32 scores drawn in [0, 1) reach
    down to about 1e-6, a span of 28 bits); otherwise its lowest bits are dropped, and the rows where equal keys
    hold different labels are ranked again (:func:`_compact_key_ranking`); where they are most rows of the first
    block of rows, the keys give way there (None). Each block is sorted as soon as it is built, while in cache.
    """
    low, high = _extremes(preds)
    lowest_label, top_label = _extremes(target)
    if not (low <= high and 0 <= lowest_label <= top_label < 2**_COMPACT_LABEL_BITS):  # False with a NaN
        return None
    bits = max(1, int(top_label).bit_length())
    top = _ordered_float32(high + 0.0)
    span = (top - _ordered_float32(low + 0.0)) >> _ZERO_LOW_BITS[preds.dtype]
    extra = max(0, span.bit_length() - (32 - bits))
    if span >> extra == 2 ** (32 - bits) - 1:  # high bits all set: kept for padding
        extra += 1
    drop = _ZERO_LOW_BITS[preds.dtype] + extra
    padding = None if mask is None else (2 ** (32 - bits) - 1 << bits) | (2**bits - 1 if optimistic else 0)
    q, n = preds.shape
    # allocated by torch, as the other large temporaries are: with np.empty, the 64-bit keys ranking 1,000 x 1,000
    # crowded scores after these gave way took 24-31 ms instead of 20 (measured, cause not pinned down)
    keys = torch.empty((q, n), dtype=torch.int32).numpy().view(np.uint32)
    blocks = row_blocks(q, n, _ROW_BLOCK_ITEMS)
    scores = np.empty((blocks[0].stop, n), np.float32)
    codes = np.empty((blocks[0].stop, n), np.uint32)
    for rows in blocks:
        m = rows.stop - rows.start
        block = keys[rows]
        x = (preds[rows] if preds.dtype == torch.float32 else preds[rows].float()).numpy()
        np.add(x, 0.0, out=scores[:m])  # -0.0 as 0.0: equal scores, equal keys
        ordered = block.view(np.int32)
        _ordered_int32_into(scores[:m].view(np.int32), ordered)
        np.subtract(top, ordered, out=ordered)  # wraps: the unsigned distance below the top
        if drop:
            np.right_shift(block, drop, out=block)
        np.left_shift(block, bits, out=block)
        labels = (target[rows] if target.dtype != torch.bfloat16 else target[rows].float()).numpy()
        np.copyto(codes[:m].view(np.int32), labels, casting="unsafe")  # twice as fast as to uint32 from float32
        if not integer_labels:  # float labels: whole numbers only
            np.copyto(scores[:m], codes[:m], casting="unsafe")
            if not np.array_equal(scores[:m], labels):
                return None
        if optimistic:
            np.subtract(2**bits - 1, codes[:m], out=codes[:m])
        np.bitwise_or(block, codes[:m], out=block)
        if mask is not None:
            np.copyto(block, padding, where=~mask[rows].numpy())
        block.sort(axis=1)  # while the block is in cache
        if extra and rows.start == 0 and len(blocks) > 1 and _merges_many_rows(block, bits, padding):
            return None  # the dropped bits would send most rows to the 64-bit keys: they rank every row at once
    return CompactKeys(keys, bits, extra == 0, padding)


def _merges_many_rows(block: np.ndarray, bits: int, padding: int | None) -> bool:
    """Whether equal keys hold different labels in more than ``_MAX_TIED_SHARE`` of the rows of a sorted ``block`` of
    compact keys (:func:`_compact_keys`, padding's key ``padding``) that dropped the scores' last bits: scores packed
    too close for them."""
    merged = _equal_high_bits(block, bits, None, differing_labels=True, padding=padding)
    return bool(rows_any(merged).sum() > _MAX_TIED_SHARE * len(block))


def _extremes(x: Tensor) -> tuple[float, float]:
    """The smallest and largest value of CPU ``x`` (NaN if it holds one); by numpy's SIMD reductions where it reads
    the dtype (float32 scores: 0.08 ms on 1M, torch's aminmax 0.14 ms)."""
    if x.dtype == torch.bfloat16:
        return tuple(v.item() for v in torch.aminmax(x))
    values = x.numpy()
    return values.min().item(), values.max().item()


def _ordered_float32(value: float) -> int:
    """:func:`_ordered_int32` of one float32."""
    bits = int(np.array(value, np.float32).view(np.int32))
    return bits ^ (bits >> 31 & _INT32_MAX)


def _compact_key_ranking(
    inputs: RankingInput, ties: str, relevance_threshold: float, width: int, seen: int | None
) -> Ranking | None:
    """The ranking of one sort of 32-bit keys (:func:`_compact_keys`) for rows sorted whole, cut at ``width``
    (``seen``: one more, or None for whole rows); None where such keys do not apply.

    Keys that keep every score whole rank each tie group by label (``"optimistic"``, ``"pessimistic"``) exactly,
    and under ``"average"`` the rows with a tie get a ranking of their own as with 64-bit keys
    (:func:`_set_rows_apart`). Where keys dropped the scores' last bits, the rows in which equal keys hold different
    labels, and only they, could rank otherwise: they are ranked again by 64-bit keys (:func:`_rank_rows_again`).
    """
    mask = inputs.mask if inputs.padded else None
    compact = _compact_keys(inputs.preds, inputs.target, mask, inputs.integer_labels, ties == "optimistic")
    if compact is None:
        return None
    keys, bits, whole, padding = compact
    signed = torch.from_numpy(keys.view(np.int32))
    low = 2**bits - 1
    padding_signed = None if padding is None else int(np.array(padding, np.uint32).view(np.int32))

    def ranking(rows: Tensor | None, tie_order: str, cut: int) -> Ranking:
        own = signed[:, :cut] if rows is None else signed[rows, :cut]
        of = inputs if rows is None else _select_rows(inputs, rows)
        labels = own & low
        return Ranking(
            # equal where the scores are, for keys that kept them whole; read only by rankings averaging ties
            scores=functools.partial(torch.bitwise_right_shift, own, bits),
            labels=(low - labels if ties == "optimistic" else labels).to(working_dtype(inputs.preds)),
            valid=of.mask[:, :cut] if padding is None else own != padding_signed,
            ideal_labels=of.ideal_target,
            ties=tie_order,
            relevance_threshold=relevance_threshold,
            all_valid=padding is None,
            ranks_every_judged_item=_ranks_every_judged_item(of, cut),
        )

    if whole and ties != "average":  # every tie group ordered by label in the one sort
        return ranking(None, ties, width)
    pairs = _equal_high_bits(keys, bits, seen, differing_labels=not whole, padding=padding)
    rows = rows_any(pairs).nonzero().squeeze(1)
    if rows.numel() > _MAX_TIED_SHARE * len(keys):
        # mostly tied: every row's groups averaged in one ranking; or scores too close for the bits kept
        return ranking(None, "average", keys.shape[1]) if whole else None
    main = ranking(None, "first", width)  # untied rows (or ties of one label): any order gives the same values
    if whole:
        _set_rows_apart(main, rows, pairs[rows], ties, lambda tied: ranking(tied, "average", keys.shape[1]))
    elif rows.numel():
        _rank_rows_again(main, inputs, rows, ties, seen)
    return main


def _rank_rows_again(main: Ranking, inputs: RankingInput, rows: Tensor, ties: str, seen: int | None) -> None:
    """Rank the rows ``rows`` of ``main`` (a compact-key ranking of ``inputs``, cut at ``seen`` - 1 or whole) again
    by 64-bit label keys, every score whole: their labels replace the compact keys', and under ``"average"`` their
    ties get rankings of their own (:func:`_set_rows_apart`)."""
    some = _select_rows(inputs, rows)
    flip = _LABEL_FLIP[ties]
    mask = some.mask if some.padded else None
    keys = _sorted_keys(some.preds, mask, functools.partial(_write_label_halves, some.target, flip))
    width = main.list_size
    main.labels[rows] = _key_ranking(some, keys[:, :width], flip, ties, main.relevance_threshold).labels
    if ties != "average":  # the 64-bit keys ordered each tie group by label
        return
    at = torch.empty(len(inputs.preds), dtype=torch.long)
    at[rows] = torch.arange(len(rows))  # each row's place among `rows`

    def exact(tied: Tensor) -> Ranking:  # whole rows sorted: every tie group whole
        return _key_ranking(_select_rows(inputs, tied), keys[at[tied]], flip, "average", main.relevance_threshold)

    _set_rows_apart(main, rows, _tied_neighbours(keys, mask, seen), ties, exact)


def _equal_high_bits(
    keys: np.ndarray, bits: int, width: int | None, differing_labels: bool, padding: int | None = None
) -> Tensor:
    """Where a position of sorted compact keys (:func:`_compact_keys`) holds the score of the one after it, over
    the first ``width`` positions (None: all) ``[Q, <=width]`` (0/1 bytes; the last column, past the pairs, 0).

    With ``differing_labels`` (keys that dropped the scores' last bits), only where the two labels differ as well,
    or where the pair runs across the cut-off (positions ``width - 2`` and ``width - 1``): a group there may hold
    items past ``width`` of any label. Never where the second is padding (key ``padding``; it sorts last).
    """
    head = keys if width is None else np.ascontiguousarray(keys[:, :width])
    q, w = head.shape
    flat = head.reshape(-1)
    xor = np.bitwise_xor(flat[1:], flat[:-1])
    tied = np.empty(q * w, bool)
    if differing_labels:
        across = xor[w - 2 :: w] < 2**bits if width is not None and w > 1 else None
        np.subtract(xor, 1, out=xor)  # 0 < xor < 2 ** bits: the high bits equal, the labels not
        np.less(xor, 2**bits - 1, out=tied[:-1])
        if across is not None:
            tied[w - 2 :: w] |= across
    else:
        np.less(xor, 2**bits, out=tied[:-1])
    if padding is not None:
        tied[:-1] &= flat[1:] != padding
    tied = tied.reshape(q, w)
    tied[:, -1] = False  # each row's last position against the next row's first
    return torch.from_numpy(tied).view(torch.uint8)


def _write_label_halves(target: Tensor, flip: int | None, out: Tensor, items: Tensor | None = None) -> None:
    """Write the low halves of label keys for ``target`` into ``out`` (int32 ``[Q, N]``, strided), or for the items
    ``items`` (``[Q, C]`` indices into each row) into ``out`` (``[Q, C]``)."""
    if items is not None:
        target = target.gather(1, items)
    if flip is None:  # the float32 bits: converted straight into the keys, with no temporary
        out.view(torch.float32).copy_(target)
        return

    def labels(rows: slice, block: np.ndarray) -> np.ndarray:
        torch.from_numpy(block).copy_(target[rows])  # any label dtype, bfloat16 too
        return block

    _write_ordered_int32(labels, out, flip)


def _key_ranking(
    inputs: RankingInput, keys: Tensor, flip: int | None, ties: str, relevance_threshold: float, padded: bool = False
) -> Ranking:
    """The :class:`Ranking` held by sorted label keys ``[Q, <=N]`` (:func:`_rank_by_label_keys`); ``padded``: keys
    that may hold padding though ``inputs`` has none (a selection of items, :func:`_head_items`)."""
    padded = padded or inputs.padded
    low = keys.to(torch.int32)  # a narrowing conversion keeps the low halves
    labels = low if flip is None else _ordered_int32(low.bitwise_xor_(flip))
    high = keys.view(torch.int32).unflatten(1, (-1, 2))[..., 1]
    return Ranking(
        scores=high,  # orders and ties as the scores do, which is all a ranking reads them for
        labels=labels.view(torch.float32),
        valid=high != _INT32_MAX if padded else inputs.mask[:, : keys.shape[1]],  # padding's key
        ideal_labels=inputs.ideal_target,
        ties=ties,
        relevance_threshold=relevance_threshold,
        all_valid=not padded,
        ranks_every_judged_item=_ranks_every_judged_item(inputs, keys.shape[1]),
    )


class FastOrder(NamedTuple):
    """Descending order of each row cut at a depth ``[Q, <=N]``, the scores in that order (or a function
    gathering them on demand), where a position holds the score of the one after it over the cut and one
    position past it ``[Q, <=N]`` (bool or 0/1 bytes; a last column past the pairs is 0), and whether equal scores
    kept input order (a stable sort)."""

    order: Tensor
    scores: Tensor | Callable[[], Tensor]
    pairs: Tensor
    stable: bool


def _fast_order(inputs: RankingInput, depth: int | None, topk: bool = True) -> FastOrder | None:
    """The order of each row, padding last, cut at ``depth``, and where it ties (:class:`FastOrder`); None where
    no fast path applies (rows known to hold ties, int64 scores, no numpy).

    A top-k of a short prefix of long unpadded lists (where ``topk`` allows) is cheaper than any sort; otherwise
    on CPU one numpy sort of packed 64-bit keys (:func:`_packed_sort`), else one unstable sort.
    """
    if inputs.exact_ties:
        return None
    preds, n = inputs.preds, inputs.preds.shape[1]
    if depth is not None and depth >= n:
        depth = None
    if topk and _takes_topk(inputs, depth):
        # one more than the cut-off: a tie across it shows as equal values at positions depth and depth + 1
        values, order = torch.topk(preds, depth + 1, dim=1, sorted=True)
        return FastOrder(order[:, :depth], values[:, :depth], values[:, 1:] == values[:, :-1], False)
    mask = inputs.mask if inputs.padded else None
    if _packs(preds):
        order, tied = _packed_sort(preds, mask, depth, finite=inputs.finite_scores)
        return FastOrder(order, functools.partial(_gather_scores, preds, order), tied, True)
    negated = _negated_scores(preds, mask)
    if negated is None:
        return None
    order = torch.from_numpy(np.argsort(negated.numpy(), axis=1))  # NaN (padding) last
    seen = order if depth is None else order[:, : depth + 1]  # one past the cut-off, to see a tie across it
    scores = preds.gather(1, seen)
    tied = scores[:, 1:] == scores[:, :-1]
    if inputs.padded:
        tied &= inputs.mask.gather(1, seen[:, 1:])  # real items come first: both of the pair are real
    if depth is not None:
        order, scores = order[:, :depth], scores[:, :depth]
    return FastOrder(order, scores, tied, False)


# on CPU, torch.topk(k) partially sorts each row while k * 64 <= its length, and past that selects and then sorts
# the k, several times slower: measured on 1,000 x 1,000, top-15 costs 3 ms and top-16 7 ms, against 3.5 ms for the
# key sort of whole rows; on rows of 100 every top-k (but top-1) costs twice the key sort
_CPU_PARTIAL_TOPK_RATIO = 64
# and even in that regime its cost grows with k, while the key sort's ranking of a head does not: the items that can
# make the head are selected by score before any key is built (:func:`_head_items`, narrowed by a bound on groups of
# items in rows of 256 or more). P@k on 1M float32 scores, by that selection / by torch.topk: 1.66 / 1.73, 1.79 / 1.89,
# 1.81 / 2.33 ms (k = 1, 2, 4 of 500); 1.59 / 1.46, 1.57 / 1.76, 1.63 / 1.90, 1.79 / 2.55 ms (1, 2, 4, 8 of 1,000);
# 1.52 / 1.42, 1.35 / 1.46, 1.45 / 1.65, 1.71 / 2.23 ms (of 2,000); 1.24 / 1.37, 1.31 / 1.40, 1.23 / 1.45, 1.28 / 1.59
# ms (of 5,000); 1.37 / 1.70, 1.35 / 1.79, 1.59 / 1.76, 1.56 / 1.85, 1.40 / 1.80, 2.57 / 2.58 ms (1, 2, 4, 8, 12, 19 of
# 10,000). The top-k wins only P@1 of 1,000 to 2,000 items (by 8%): rows the selection takes never get a top-k
# on CPU, batches of at most this many items (a validation step) take the top-k path down to a cut-off of
# 1/_SMALL_BATCH_RATIO of the list: the key sort's dozen operations cost more than its faster rows save
# (100 x 100, k=10)
_SMALL_BATCH = 20_000
_SMALL_BATCH_RATIO = 10


def _takes_topk(inputs: RankingInput, depth: int | None) -> bool:
    """Whether the fast order is a top-k of ``depth`` + 1 (unpadded lists, a short enough cut-off)."""
    n = inputs.preds.shape[1]
    return depth is not None and depth < n and not inputs.padded and _topk_pays(depth, inputs.preds)


def _topk_pays(depth: int, preds: Tensor) -> bool:
    """Whether a top-k of ``depth`` + 1 beats the sort of ``preds`` (unpadded): of whole rows, or on CPU the key
    sort's selection of each row's head."""
    n = preds.shape[1]
    if preds.numel() <= _SMALL_BATCH and depth * _SMALL_BATCH_RATIO <= n:
        return True
    if _packs(preds) and _selects_head(depth + 1, n, preds.numel()):  # the key sort ranks only each row's head
        return False
    return _cpu_topk_is_partial(depth + 1, n)


def _cpu_topk_is_partial(k: int, n: int) -> bool:
    """Whether torch.topk(k) of rows of ``n`` on CPU takes its partial sort (its fast regime)."""
    return k * _CPU_PARTIAL_TOPK_RATIO <= n


# score dtypes that float32 holds exactly, so that 32 bits of a sort key order them; the keys are built as
# little-endian int64 (low half first), so other byte orders take the argsort path
_PACKABLE = (
    (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16)
    if sys.byteorder == "little"
    else ()
)
_INT32_MAX = 2**31 - 1
_LOW_HALF = 2**32 - 1  # an int64 key's item index
_PADDING_KEY = _INT32_MAX << 32  # the least key of padding (high half _INT32_MAX)
# items per block of rows where CPU work goes by blocks (sort keys' high halves; labels, ideal labels of a large
# batch: read_by_blocks): each block's work is a few cheap passes, and a block's temporaries stay in cache
_ROW_BLOCK_ITEMS = 2**16


def _packed_sort(
    preds: Tensor, mask: Tensor | None, depth: int | None, finite: bool = False
) -> tuple[Tensor, Tensor]:
    """Stable descending order of each row of CPU scores (padding last) by one numpy sort of int64 keys,
    cut at ``depth``, and where a position holds the score of the one after it ``[Q, <=depth + 1]`` (0/1 bytes:
    :func:`_tied_neighbours`).

    The keys (:func:`_sorted_keys`) carry each item's index in their low half: ascending keys are descending
    scores, equal scores in input order, and the sorted keys give the order and the ties with no gather.
    """
    seen = None if depth is None else depth + 1  # one past the cut-off, to see a tie across it
    keys = _sorted_keys(preds, mask, _write_item_indices, seen, finite=finite)
    tied = _tied_neighbours(keys, mask, seen)
    if depth is None:  # the keys become the order in place: no fresh 8-byte-per-item tensor to page in
        return keys.bitwise_and_(_LOW_HALF), tied
    return keys[:, :depth] & _LOW_HALF, tied


def _write_item_indices(out: Tensor, items: Tensor | None = None) -> None:
    """Write each item's index in its row into ``out`` (int32 ``[Q, N]``), or ``items`` (``[Q, C]``) itself."""
    out.copy_(_item_indices(out.shape[1]) if items is None else items)


def _sorted_keys(
    preds: Tensor,
    mask: Tensor | None,
    write_low_halves: Callable[..., object],
    head: int | None = None,
    finite: bool = False,
) -> Tensor:
    """Each row of int64 sort keys, sorted ascending by one numpy sort ``[Q, N]``; with ``head``, only the first
    ``head`` positions of each row are sorted (:func:`_partitioned`), the rest holding the larger keys in any order,
    or, for unpadded scores, the keys of only the items that can be in the head (:func:`_head_items`), sorted
    ``[Q, >=head]``.

    A key's high half is the negated score mapped to an int32 that orders as the float does (padding above
    every score); ``write_low_halves(out)`` writes the low halves into ``out`` (the keys' strided int32
    ``[Q, N]`` view), read as unsigned: ascending keys are descending scores, equal scores in ascending low
    halves; ``write_low_halves(out, items)`` those of the items ``items`` (``[Q, C]`` indices into each row). numpy
    sorts 64-bit integers with SIMD about twice as fast as it argsorts floats. ``finite``: the scores are known to
    hold no NaN and no infinity.
    """
    q, n = preds.shape
    if mask is None and _selects_head(head, n, q * n):
        items = _head_items(preds, head, finite)
        if items is not None:
            chosen, real = items
            keys = _sorted_keys(preds.gather(1, chosen), real, functools.partial(write_low_halves, items=chosen))
            if real is not None:  # padding keys last, with the low half of padded input's (label 0, or index 0)
                keys.masked_fill_(keys >= _PADDING_KEY, _PADDING_KEY)
            return keys
    keys = torch.empty(q, n, 2, dtype=torch.int32)  # little-endian int64: [low, high] int32 halves
    _write_high_halves(preds, mask, keys[:, :, 1])
    write_low_halves(keys[:, :, 0])
    keys = keys.view(torch.int64).view(q, n)
    rows = keys.numpy()
    if _partitioned(head, n):
        rows.partition(head - 1, axis=1)  # numpy's SIMD selection: the head smallest keys first, in any order
        rows[:, :head].sort(axis=1)
    else:
        rows.sort(axis=1)
    return keys


def _head_items(preds: Tensor, head: int, finite: bool = False) -> tuple[Tensor, Tensor | None] | None:
    """The items that can be among the ``head`` highest scores of each row of CPU ``preds`` (a packable dtype, read as
    float32, which holds each score exactly): the ``head`` highest and every other item scoring as the lowest of
    them, ``[Q, C]`` indices into each row (``C >= head``), and which of them are real where rows have more than
    ``head`` (None where none has: every row holds exactly ``head``); None where ``preds`` holds a NaN (or both
    infinities), or ties so many that a row (or a block of rows, on average) runs past ``1/_PARTITION_RATIO`` of its
    length: the key sort of every item then ranks them.

    Each block of rows is mapped to the int32 that orders as each score does, numpy selects each row's ``head``-th
    highest, and the items scoring at least that are kept; in rows long enough, only among the candidates that a
    bound on groups of items leaves (:func:`_head_candidates`). Sorting the keys of these few items then ranks the
    head exactly as sorting every key would: 1,000 x 1,000 float32 scores, top 11 in about 0.8 ms (1.1 ms selecting
    over every item), against 1.3 ms building every item's key and 0.8 ms selecting the head among them. Tied scores
    (bfloat16) keep whole tie groups that reach into the head, a few items more than ``head``, rather than every item
    of every row.
    """
    # a NaN orders nowhere: the keys rank it as they always have (``finite``: the input checks found neither NaN nor
    # infinity)
    if not finite and bool(torch.isnan(preds.sum(dtype=torch.float32))):
        return None
    q, n = preds.shape
    found = []
    blocks = row_blocks(q, n, _ROW_BLOCK_ITEMS)
    scratch = np.empty((blocks[0].stop, n), np.int32)
    bounded = _HEAD_GROUPS_PER_ITEM * max(_HEAD_GROUPS, _HEAD_GROUPS_PER_HEAD * head) <= n
    for rows in blocks:
        values = (preds[rows] if preds.dtype == torch.float32 else preds[rows].float()).numpy()
        if bounded:
            block = _head_candidates(values, head)
        else:
            block = _items_at_least_the_head_by_partition(values, head, scratch[: rows.stop - rows.start])
        found.append(block + rows.start * n)
        if len(block) * _PARTITION_RATIO > values.size:  # ties everywhere (few distinct scores): stop early
            return None
    flat = np.concatenate(found)
    if bounded:
        flat = _at_least_the_head(flat, preds.reshape(-1)[torch.from_numpy(flat)].float().numpy(), head, q, n)
    row = flat // n
    if len(flat) == q * head:  # every row holds at least `head`: exactly `head` each
        return torch.from_numpy((flat - row * n).reshape(q, head)), None
    counts, at = _places_in_rows(row, q)
    width = int(counts.max())
    if width * _PARTITION_RATIO > n:
        return None
    chosen = np.zeros((q, width), np.int64)
    real = np.zeros((q, width), bool)
    chosen[row, at] = flat - row * n
    real[row, at] = True
    return torch.from_numpy(chosen), torch.from_numpy(real)


def _items_at_least_the_head_by_partition(values: np.ndarray, head: int, scratch: np.ndarray) -> np.ndarray:
    """The flat indices of the items of ``values`` (float32 ``[M, N]``) scoring at least the ``head``-th highest of
    their row: numpy's selection of it on the int32 that orders as each score does (``scratch``: ``[M, N]``)."""
    n = values.shape[1]
    _ordered_int32_into(values.view(np.int32), scratch)  # as in the keys
    scratch.partition(n - head, axis=1)
    lowest = np.empty(len(scratch), np.int32)
    _ordered_int32_into(scratch[:, n - head], lowest)  # its own inverse: back to float32 bits
    # as floats: -0.0 and 0.0 are kept together (their ordered ints differ, their keys do not)
    return np.flatnonzero(values >= lowest.view(np.float32)[:, None])


# :func:`_head_candidates` splits each row into at least _HEAD_GROUPS groups (_HEAD_GROUPS_PER_HEAD per item of the
# head) of at least _HEAD_GROUPS_PER_ITEM items each
_HEAD_GROUPS = 64
_HEAD_GROUPS_PER_HEAD = 4
_HEAD_GROUPS_PER_ITEM = 4


def _head_candidates(values: np.ndarray, head: int) -> np.ndarray:
    """The flat indices of a few items of each row of ``values`` (float32 ``[M, N]``) that hold every item scoring at
    least the row's ``head``-th highest score (:func:`_at_least_the_head` keeps exactly those).

    Each row's items fall into ``G`` groups (items ``j``, ``j + G``, ``j + 2G``, ...), whose highest scores are one
    elementwise maximum over the row's ``N / G`` stretches; at least ``head`` items score the ``head``-th highest of
    those ``G`` or more, so every item of the head does: about 12 candidates (17 at most) for a head of 11 in each of
    1,000 x 1,000 random float32 or normal scores, found without selecting over every item.
    """
    m, n = values.shape
    groups = max(_HEAD_GROUPS, _HEAD_GROUPS_PER_HEAD * head)
    stretches = n // groups
    # torch's maximum over the middle axis: 0.11 ms on 1M float32, numpy's 0.38 ms
    bound = torch.from_numpy(values[:, : stretches * groups]).reshape(m, stretches, groups).amax(1).numpy()
    rest = n - stretches * groups
    if rest:  # the last, short stretch: into the first groups
        np.maximum(bound[:, :rest], values[:, stretches * groups :], out=bound[:, :rest])
    np.negative(bound, out=bound)  # ascending selection of the negated: the highest first
    bound.partition(head - 1, axis=1)
    return np.flatnonzero(values >= -bound[:, head - 1 : head])


def _at_least_the_head(flat: np.ndarray, scores: np.ndarray, head: int, q: int, n: int) -> np.ndarray:
    """Of the candidates ``flat`` (flat indices into ``[Q, N]`` rows, in order, with their float32 ``scores``; at
    least ``head`` in each row, every item of its head among them), those scoring at least their row's ``head``-th
    highest: one selection over every row's few candidates, padded."""
    row = flat // n
    counts, at = _places_in_rows(row, q)
    negated = np.full((q, int(counts.max())), np.inf, np.float32)  # padding above every negated score
    negated[row, at] = -scores
    negated.partition(head - 1, axis=1)
    return flat[scores >= -negated[row, head - 1]]


def _places_in_rows(row: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    """For items laid out row by row, each in row ``row`` (ascending, of ``q`` rows): how many each row holds ``[Q]``,
    and each item's place in its row (0, 1, ...), to lay them out as padded rows."""
    counts = np.bincount(row, minlength=q)
    return counts, np.arange(len(row)) - (np.cumsum(counts) - counts)[row]


def _selects_head(head: int | None, n: int, items: int) -> bool:
    """Whether :func:`_sorted_keys` ranks only the items that can make a head of ``head`` of rows of ``n`` (batches of
    ``items``, unpadded): a head under 1/_PARTITION_RATIO of rows long enough (:data:`_SELECTION_MIN_ITEMS`)."""
    shortest = _SELECTION_MIN_ITEMS if items <= _SELECTION_LARGE_BATCH else _SELECTION_MIN_ITEMS_LARGE_BATCH
    return head is not None and n >= shortest and head * _PARTITION_RATIO <= n


# :func:`_head_items` pays on shorter rows than the key sort's own selection of a head (:data:`_PARTITION_MIN_ITEMS`).
# Rows of 200: P@5 / P@10 / NDCG@20 on 5,000 x 200 float32 3.1 / 3.5 / 4.1 ms by it, 3.9 / 3.8 / 4.8 ms by the keys of
# whole rows. Rows of 100: on 10,000 x 100 it loses (P@5 3.9 against 3.4 ms, NDCG@10 4.6 against 4.3 ms), on 100,000 x
# 100, where the keys of whole rows outgrow the cache, it wins (float32 P@10 / NDCG@10 42 / 52 ms against 64 / 72 ms;
# bfloat16 96-108 ms against 180-220 ms)
_SELECTION_MIN_ITEMS = 200
_SELECTION_MIN_ITEMS_LARGE_BATCH = 100
_SELECTION_LARGE_BATCH = 2**20


def _partitioned(head: int | None, n: int) -> bool:
    """Whether :func:`_sorted_keys` sorts only a head of ``head`` positions of rows of ``n`` keys: a selection, then
    a sort of the head, costs less than sorting whole rows once the head is under 1/_PARTITION_RATIO of them."""
    return head is not None and n >= _PARTITION_MIN_ITEMS and head * _PARTITION_RATIO <= n


def _sort_whole_rows(keys: Tensor, n_sorted: int | None) -> Tensor:
    """``keys`` (:func:`_sorted_keys`, ``n_sorted`` positions sorted or None: all) with every position sorted."""
    if _partitioned(n_sorted, keys.shape[1]):
        keys.numpy().sort(axis=1)
    return keys


# a head of at most 1/_PARTITION_RATIO of each row is selected and sorted rather than whole rows sorted: on 1,000 x
# 1,000 int64 keys, numpy's selection of the 11 smallest then their sort take 0.8 ms, the whole sort 2.1 ms
_PARTITION_RATIO = 4
# rows shorter than this are sorted whole: numpy's selection then sort of a head take 1.0 ms on 2,000 x 500 (the whole
# sort 1.7 ms), but 1.0 ms on 4,000 x 250 (0.9 ms)
_PARTITION_MIN_ITEMS = 400


def _write_high_halves(preds: Tensor, mask: Tensor | None, out: Tensor) -> None:
    """Write into ``out`` (int32 ``[Q, N]``, strided) the int32 that orders as each negated score does, or
    above every score's (-inf's too) at padding."""

    def negated(rows: slice, block: np.ndarray) -> np.ndarray:  # 0 - x: -0.0 as 0.0 (equal keys)
        scores = preds[rows] if preds.dtype == torch.float32 else preds[rows].float()
        return np.subtract(0.0, scores.numpy(), out=block)

    _write_ordered_int32(negated, out, mask=mask)


def _write_ordered_int32(
    floats: Callable[[slice, np.ndarray], np.ndarray], out: Tensor, flip: int = 0, mask: Tensor | None = None
) -> None:
    """Write into ``out`` (int32 ``[Q, N]``, strided) :func:`_ordered_int32` of the float32 values
    ``floats(rows, block)`` writes into ``block`` for each block of rows, xor ``flip``; ``_INT32_MAX`` where
    ``mask`` (bool ``[Q, N]``) is False.

    By blocks of rows through two scratch arrays small enough to stay in cache, with numpy's ufuncs writing in
    place and the last one straight into ``out``: about half the time of whole-batch torch temporaries, which
    are also page-faulted in afresh on every call.
    """
    q, n = out.shape
    halves = out.numpy()
    blocks = row_blocks(q, n, _ROW_BLOCK_ITEMS)
    float_block = np.empty((blocks[0].stop, n), np.float32)
    int_block = np.empty((blocks[0].stop, n), np.int32)
    for rows in blocks:
        m = rows.stop - rows.start
        bits = floats(rows, float_block[:m]).view(np.int32)
        _ordered_int32_into(bits, halves[rows], int_block[:m], flip)
        if mask is not None:
            np.copyto(halves[rows], _INT32_MAX, where=~mask[rows].numpy())


def _ordered_int32_into(bits: np.ndarray, out: np.ndarray, scratch: np.ndarray | None = None, flip: int = 0) -> None:
    """numpy's :func:`_ordered_int32` of ``bits`` (int32), xor ``flip``, written into ``out``: the flipped magnitude
    bits are built in ``scratch`` (``out`` itself by default; a separate one where ``out`` is strided)."""
    flips = out if scratch is None else scratch
    np.right_shift(bits, 31, out=flips)  # the magnitude bits of negative numbers
    np.bitwise_and(flips, _INT32_MAX, out=flips)
    if flip:
        np.bitwise_xor(flips, flip, out=flips)
    np.bitwise_xor(flips, bits, out=out)


def _ordered_int32(bits: Tensor) -> Tensor:
    """The int32 that orders as the float32 of ``bits`` (int32) does: the magnitude bits of negative numbers
    flipped. Its own inverse."""
    return (bits >> 31).bitwise_and_(_INT32_MAX).bitwise_xor_(bits)


def _tied_neighbours(keys: Tensor, mask: Tensor | None, width: int | None) -> Tensor:
    """Where a position of sorted keys (:func:`_sorted_keys`) holds the score of the one after it, over the first
    ``width`` positions (None: all) ``[Q, <=width]`` (0/1 bytes; the last column, past the pairs, 0)."""
    # the high halves copied out first: comparing two contiguous int32 streams beats comparing strided ones
    # by more than the copy costs
    high = np.ascontiguousarray(keys[:, :width].numpy().view(np.int32)[:, 1::2])
    q, w = high.shape
    flat = high.reshape(-1)
    tied = np.empty(q * w, bool)
    # one pass over the rows laid end to end: numpy compares short rows one by one several times slower
    np.equal(flat[1:], flat[:-1], out=tied[:-1])
    if mask is not None:  # padding sorts last: a pair is real when its second item is
        tied[:-1] &= flat[1:] != _INT32_MAX
    tied = tied.reshape(q, w)
    tied[:, -1] = False  # each row's last position against the next row's first
    return torch.from_numpy(tied).view(torch.uint8)


def _compare(op: Callable[..., Tensor], x: Tensor, other: Tensor | float, dtype: torch.dtype) -> Tensor:
    """``op(x, other)`` (a comparison) as 0/1 in ``dtype``: written straight into a ``dtype`` tensor, several
    times faster on CPU than torch's bool output (and than converting it)."""
    return op(x, other, out=torch.empty(x.shape, dtype=dtype, device=x.device))


@functools.lru_cache(maxsize=64)
def _item_indices(n: int) -> Tensor:
    """``0 .. n-1`` as int32, the low halves of the sort keys (cached: read, never written)."""
    return torch.arange(n, dtype=torch.int32)


def _gather_scores(preds: Tensor, order: Tensor) -> Tensor:
    return preds.gather(1, order)


def _negated_scores(preds: Tensor, mask: Tensor | None) -> Tensor | None:
    """``-preds`` in a float dtype that holds them exactly, NaN at padding (sorted last); None where there
    is none (int64 scores) or, on CPU, numpy is missing."""
    if np is None:
        return None
    if preds.dtype in (torch.float16, torch.bfloat16):
        preds = preds.float()
    elif preds.dtype in (torch.int8, torch.uint8, torch.int16, torch.int32):
        preds = preds.double()  # exact, and its negation cannot overflow
    elif preds.dtype not in (torch.float32, torch.float64):
        return None  # int64 scores: no float holds them all exactly
    negated = -preds
    if mask is not None:
        negated = negated.masked_fill_(~mask, float("nan"))
    return negated


def _ranking_order(
    preds: Tensor, target: Tensor, mask: Tensor | None, ties: str, padding_last: bool = False
) -> Tensor:
    """Permutation of each row: real items by descending score, ties as ``ties`` says, padding last.

    Without padding, ``"average"`` needs one sort of any stability (tie groups are averaged whole) and
    ``"first"`` one stable sort. Otherwise two stable sorts: first by the tie-break key (descending), then
    by score (descending); a stable sort keeps the first sort's order among equal scores. When each row's
    padding already follows its real items (``padding_last``), one stable sort keeps it there.
    """
    scores = preds.float() if preds.dtype in (torch.float16, torch.bfloat16) else preds
    if mask is None and ties in ("average", "first"):
        return torch.sort(scores, dim=1, descending=True, stable=ties == "first").indices
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    # the lowest score there is; real items of equal score stay first through the key sort below
    lowest = -float("inf") if scores.is_floating_point() else torch.iinfo(scores.dtype).min
    scores = torch.where(mask, scores, lowest)
    if padding_last and ties in ("average", "first"):
        return torch.sort(scores, dim=1, descending=True, stable=True).indices
    if ties == "first" or ties == "average":
        # padding last among equal (lowest) scores; input order kept otherwise
        key = mask.to(torch.int8)
    else:
        sign = 1 if ties == "optimistic" else -1
        target = target.to(working_dtype(preds))  # labels of large batches may come in the caller's dtype
        key = torch.where(mask, sign * target, torch.finfo(target.dtype).min)
    order = torch.sort(key, dim=1, descending=True, stable=True).indices
    by_score = torch.sort(scores.gather(1, order), dim=1, descending=True, stable=True).indices
    return order.gather(1, by_score)


class Ranking:
    """Labels of each query in rank order, and the quantities metrics share, computed once on demand.

    Shapes: ``Q`` queries, ``N`` ranked positions, ``M`` judged (ideal) labels.
    """

    def __init__(
        self,
        scores: Tensor | Callable[[], Tensor],
        labels: Tensor,
        valid: Tensor,
        ideal_labels: Tensor,
        ties: str,
        relevance_threshold: float,
        judged: Tensor | None = None,
        all_valid: bool = False,
        ranks_every_judged_item: bool = False,
    ) -> None:
        self._scores = scores
        self.labels = labels  # [Q, N], 0 at padding
        self.valid = valid  # [Q, N] bool
        self.ideal_labels = ideal_labels  # [Q, M], unsorted, 0 at padding, any real dtype (see per_ideal_row)
        self.judged = judged  # [Q, N] bool or None (every item judged)
        self.all_valid = all_valid  # no padding: every position of `valid` is True
        # the judged items are exactly the ranked ones (no separate ideal labels, no cut-off): a row's counts are R
        self.ranks_every_judged_item = ranks_every_judged_item
        self.ties = ties
        self.relevance_threshold = relevance_threshold
        self.dtype = labels.dtype
        self.num_queries, self.list_size = labels.shape
        self.cutoffs: dict[tuple[int | None, ...], tuple[Tensor, Tensor]] = {}  # see cutoff_index
        # queries whose tie order matters, with a ranking of their own that gives their values (see apply_measure)
        self.apart: list[RowsApart] = []
        # one of the orders of ties="average" rows whose values are averaged over each (see _other_tie_orders):
        # ranked as "first", but a measure with no tie-averaged form must refuse it as it refuses averaged ties
        self.averaged_over_orders = False

    def apart_for(self, ks: Sequence[int | None]) -> list[RowsApart]:
        """The :attr:`apart` rows whose ties a measure cut at ``ks`` reads: not those where every cut-off stops
        before each row's first tie (a group across a cut-off ties the positions either side of it), as this
        ranking's values are then already exact there."""
        return [a for a in self.apart if None in ks or max(ks) > a.first_tie]

    # ---------------------------------------------------------------- basic per-query quantities
    @cached_property
    def scores(self) -> Tensor:
        """Scores in rank order ``[Q, N]``, or keys that order and tie as they do: read only to find tie groups
        (so gathered on first use)."""
        return self._scores() if callable(self._scores) else self._scores

    @cached_property
    def positions(self) -> Tensor:
        """1-based ranks ``[N]``."""
        return torch.arange(1, self.list_size + 1, device=self.labels.device, dtype=self.dtype)

    @cached_property
    def num_valid(self) -> Tensor:
        """Number of ranked (real) items per query ``[Q]``."""
        if self.all_valid:
            return torch.full((self.num_queries,), self.list_size, dtype=self.dtype, device=self.labels.device)
        return self.valid.sum(1, dtype=torch.int32).to(self.dtype)  # int32 sums of bools: several times faster

    @cached_property
    def relevant(self) -> Tensor:
        """Binary relevance in rank order ``[Q, N]`` (``label >= relevance_threshold``)."""
        # padding holds label 0 and the threshold is > 0: no need to mask it
        return _compare(torch.ge, self.labels, self.relevance_threshold, self.dtype)

    @cached_property
    def num_relevant(self) -> Tensor:
        """``R``: relevant judged items per query, retrieved or not ``[Q]``."""
        exact = self.dtype == torch.float64 or self.ideal_labels.shape[1] < 2**24  # every partial sum is an integer
        if exact and self.ranks_every_judged_item and self.list_size > 0:
            return self.relevant_count[:, -1]  # the running count the binary measures read anyway, at its end
        threshold = self.relevance_threshold

        def count(labels: Tensor) -> Tensor:
            relevant = _compare(torch.ge, labels, threshold, labels.dtype)
            return relevant.sum(1) if exact else relevant.sum(1, dtype=torch.float64).to(labels.dtype)

        return self.per_ideal_row(count)

    @cached_property
    def no_relevant(self) -> Tensor:
        """Queries with no judged item at or above the relevance threshold ``[Q]`` bool (binary measures)."""
        return self.num_relevant == 0

    @cached_property
    def _ideal_labels_in_dtype(self) -> Tensor:
        return self.ideal_labels if self.ideal_labels.dtype == self.dtype else self.ideal_labels.to(self.dtype)

    def per_ideal_row(self, fn: Callable[[Tensor], Tensor]) -> Tensor:
        """``fn`` of the ideal labels in the working dtype, one row of output per query ``[Q, ...]``.

        Large CPU batches go by blocks of rows: a temporary of a whole 10M-item batch is page-faulted in afresh
        on every call (longer than the work itself), while a block's are reused by the allocator.
        """
        if not read_by_blocks(self.ideal_labels):
            return fn(self._ideal_labels_in_dtype)
        blocks = row_blocks(*self.ideal_labels.shape, _ROW_BLOCK_ITEMS)
        return torch.cat([fn(self.ideal_labels[rows].to(self.dtype)) for rows in blocks])

    @cached_property
    def has_positive_label(self) -> Tensor:
        """Queries with a judged label > 0 ``[Q]`` bool (graded measures)."""
        return self.per_ideal_row(lambda labels: labels.amax(1) > 0)

    def top_label(self, max_label: float | None) -> Tensor:
        """Top of the label scale: ``max_label``, or each query's largest judged label ``[Q, 1]``."""
        if max_label is not None:
            return torch.as_tensor(float(max_label), dtype=self.dtype, device=self.labels.device)
        top = torch.maximum(self.ideal_labels.amax(1).to(self.dtype), self.labels.amax(1))
        return torch.where(top > 0, top, 1).unsqueeze(1)

    # ---------------------------------------------------------------- tie groups
    @cached_property
    def _groups(self) -> tuple[Tensor, Tensor, Tensor]:
        """Tie group of each position: ``(group_id, start, size)``, each ``[Q, N]`` int64.

        ``group_id`` numbers the groups of a row from 0, ``start`` is the 0-based position where the
        position's group begins and ``size`` its number of items. Padding forms its own group.
        """
        q, n = self.labels.shape
        boundary = torch.ones(q, n, dtype=torch.bool, device=self.labels.device)
        boundary[:, 1:] = (self.scores[:, 1:] != self.scores[:, :-1]) | (self.valid[:, 1:] != self.valid[:, :-1])
        group_id = torch.cumsum(boundary, 1) - 1
        sizes = torch.zeros(q, n, dtype=torch.long, device=self.labels.device)
        sizes.scatter_add_(1, group_id, torch.ones_like(group_id))
        starts = torch.cumsum(sizes, 1) - sizes
        return group_id, starts.gather(1, group_id), sizes.gather(1, group_id)

    @cached_property
    def averages_ties(self) -> bool:
        """Whether tie groups need averaging: ``ties="average"`` and a tie exists (or, off CPU, may exist:
        finding out would synchronise the device)."""
        if self.ties != "average":
            return False
        if not uses_numpy(self.labels):  # the device backends never read the host: closed forms for every row
            return True
        tied = (self.scores[:, 1:] == self.scores[:, :-1]) & self.valid[:, 1:] & self.valid[:, :-1]
        return bool(tied.any())

    def group_sum(self, values: Tensor) -> Tensor:
        """Sum of ``values`` over each position's tie group, broadcast back to positions ``[Q, N]``."""
        group_id = self._groups[0]
        sums = torch.zeros_like(values).scatter_add_(1, group_id, values)
        return sums.gather(1, group_id)

    def expected(self, values: Tensor) -> Tensor:
        """Expected per-position value under random order of tie groups (the group mean), or ``values``."""
        if not self.averages_ties:
            return values
        return self.group_sum(values) / self._groups[2].to(self.dtype)

    # ---------------------------------------------------------------- shared cumulative quantities
    @cached_property
    def hits(self) -> Tensor:
        """Expected number of relevant items in the top i, ``[Q, N]``."""
        return torch.cumsum(self.expected_relevant, 1) if self.averages_ties else self.relevant_count

    @cached_property
    def expected_relevant(self) -> Tensor:
        """Probability that each position holds a relevant item ``[Q, N]``."""
        return self.expected(self.relevant)

    @cached_property
    def relevant_count(self) -> Tensor:
        """Relevant items in the top i in this order (ties as sorted) ``[Q, N]``."""
        if self.labels.device.type == "cpu" and self.list_size < 2**31:
            # counted in int32, then converted: the same integers (float sums of 0/1 are exact below 2 ** 24), but a
            # CPU cumulative sum waits on each add, and an integer add takes a third of a float add's time
            return torch.cumsum(self.relevant, 1, dtype=torch.int32).to(self.dtype)
        return torch.cumsum(self.relevant, 1)

    @cached_property
    def relevant_before(self) -> Tensor:
        """Relevant items above each position in this order ``[Q, N]``."""
        return self.relevant_count - self.relevant

    @cached_property
    def reciprocal_positions(self) -> Tensor:
        """``1 / i`` for the 1-based ranks ``[N]``."""
        return 1.0 / self.positions

    @cached_property
    def _group_stats(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Per position: group size m, relevant items r in the group, relevant items before the group,
        and the 0-based offset inside the group (all floating ``[Q, N]``)."""
        _, start, size = self._groups
        offset = self.positions.unsqueeze(0) - 1 - start.to(self.dtype)
        return size.to(self.dtype), self.group_sum(self.relevant), self.relevant_before.gather(1, start), offset

    @cached_property
    def relevant_times_count(self) -> Tensor:
        """``E[rel_i * c_i]`` ``[Q, N]``, with ``c_i`` the relevant items in the top i (AP, MAR).

        With random order inside a group of size m holding r relevant items and C relevant before it,
        position j (1-based within the group) is relevant with probability r/m and, given that, each of
        the j-1 group positions above it is relevant with probability (r-1)/(m-1):
        ``E = r/m * (C + 1 + (j-1)(r-1)/(m-1))`` (McSherry and Najork, 2008).
        """
        if not self.averages_ties:
            return self.relevant * self.relevant_count
        m, r, prior, offset = self._group_stats  # offset = j - 1
        within = torch.where(m > 1, offset * (r - 1) / (m - 1).clamp_min(1), 0)
        return r / m * (prior + 1 + within)

    @cached_property
    def first_relevant_position(self) -> Tensor:
        """1-based rank of the first relevant item in this order, ``inf`` where there is none ``[Q]``."""
        # one plus the positions above it, where no relevant item is yet: the relevant counts (shared with AP, P
        # and R) never decrease along a row, so a binary search for the first count above 0 finds it
        half = torch.full((self.num_queries, 1), 0.5, dtype=self.dtype, device=self.labels.device)
        before = torch.searchsorted(self.relevant_count, half).squeeze(1)
        return torch.where(before < self.list_size, (before + 1).to(self.dtype), float("inf"))

    @cached_property
    def first_relevant_probability(self) -> Tensor:
        """``P(first relevant item at position i)`` ``[Q, N]`` (RR, hit rate, FRP).

        Only the first tie group holding a relevant item can hold the first one. For position j of that
        group (size m, r relevant): ``P = prod_{t<j-1} (m-r-t)/(m-t) * r/(m-j+1)``: the j-1 positions above
        are non-relevant, then a relevant one. Earlier groups hold no relevant item, so a running product of
        the per-position factors along the row (factor 1 in those groups) gives the first term.
        """
        if not self.averages_ties:
            return self.relevant * (self.relevant_before == 0).to(self.dtype)
        m, r, prior, t = self._group_stats
        first_group = (prior == 0) & (r > 0)
        none_above = ((m - r - t) / (m - t)).clamp_min(0)  # P(position is non-relevant | none above is)
        factor = torch.where(first_group, none_above, torch.ones_like(none_above))
        survive = exclusive_cumprod(factor)
        return torch.where(first_group, survive * r / (m - t), torch.zeros_like(m))

    # ---------------------------------------------------------------- gains and discounts
    def gains(self, gain: Gain, labels: Tensor | None = None) -> Tensor:
        """``gain(label)`` for ``labels`` (default: the ranked labels), 0 at padding."""
        if labels is None:
            labels = self.labels
        elif labels.dtype != self.dtype:  # ideal labels of large batches come in the caller's dtype
            labels = labels.to(self.dtype)
        if callable(gain):
            return gain(labels).to(self.dtype)
        if gain == "linear":
            return labels
        return torch.pow(2.0, labels) - 1  # "exponential"

    def ideal_gains(self, gain: Gain, depth: int | None = None) -> Tensor:
        """Gains of the judged items sorted descending, the top ``depth`` of them (all for None) ``[Q, <=M]``."""
        if callable(gain):  # any map: the gains first, then their order
            return _descending(self.gains(gain, self.ideal_labels), depth)
        # the linear and exponential gains never decrease with the label: sort the labels, map the top ones
        return self.gains(gain, self.per_ideal_row(lambda labels: _descending(labels, depth)))


def _descending(values: Tensor, depth: int | None) -> Tensor:
    """Each row of ``values`` sorted descending, the first ``depth`` (all for None) ``[Q, <=M]``."""
    if not uses_numpy(values):
        if depth is not None and depth < values.shape[1]:
            return torch.topk(values, depth, dim=1).values
        return torch.sort(values, dim=1, descending=True).values
    if np is not None and values.dtype in (torch.float32, torch.float64):
        head = _nonnegative_head(values.numpy(), depth, select=_partitioned(depth, values.shape[1]))
        if head is not None:
            return torch.from_numpy(head)
        # numpy's SIMD sort of the values, ascending, read backwards: faster on CPU than torch.sort, and
        # than torch.topk for any cut-off past a handful
        descending = np.sort(values.numpy(), axis=1)[:, ::-1]
        return torch.from_numpy((descending if depth is None else descending[:, :depth]).copy())
    if depth is not None and _cpu_topk_is_partial(depth, values.shape[1]):
        return torch.topk(values, depth, dim=1).values  # cheaper than a full sort for small cut-offs
    ordered = torch.sort(values, dim=1, descending=True).values
    return ordered if depth is None else ordered[:, :depth]


def _nonnegative_head(values: np.ndarray, depth: int | None, select: bool = True) -> np.ndarray | None:
    """The ``depth`` largest of each row of float ``values`` (all for None) in descending order ``[Q, <=M]``, selected
    and sorted (``select``), or sorted whole, as the integers of their bits; None where a value has its sign bit set
    (the bits then do not order as the values).

    Non-negative floats order as their bits read as signed integers, which numpy selects with SIMD about twice as
    fast as the floats (and sorting whole rows costs twice that again): 1,000 x 1,000 float32 labels, top 10 in
    0.55 ms by the bits, 1.0 ms by the floats, 1.4 ms by the whole sort. Negated (no overflow: the sign bit is
    clear), the largest come first in an ascending selection or sort, with no reversed copy: rows of 100 too short to
    select from, 10,000 x 100 labels sorted whole in 0.63 ms by the bits, 0.90 ms by the floats read backwards.
    """
    bits = values.view(np.int32 if values.dtype == np.float32 else np.int64)
    if bits.min() < 0:  # a negative label (validate_args=False), or -0.0
        return None
    head = np.negative(bits)
    if select:
        head.partition(depth - 1, axis=1)
        head = head[:, :depth].copy()  # the selection's own rows, not a view keeping the whole batch's
    head.sort(axis=1)
    if not select and depth is not None and depth < head.shape[1]:
        head = head[:, :depth].copy()
    return np.negative(head, out=head).view(values.dtype)


def rows_any(x: Tensor) -> Tensor:
    """``x.any(1)`` for a bool (or 0/1 byte) ``[Q, N]``, as the byte maximum: several times faster on CPU,
    where numpy's maximum is faster again than torch's (2x on 100 items); and on short CPU rows holding few
    nonzero bytes (the ties of a batch), the rows of those bytes: numpy reduces each row at a fixed cost.

    Example:
        >>> import torch
        >>> rows_any(torch.tensor([[0, 1], [0, 0]], dtype=torch.uint8))
        tensor([ True, False])
    """
    q, n = x.shape
    if n == 0:
        return torch.zeros(q, dtype=torch.bool, device=x.device)
    if not uses_numpy(x) or np is None:
        return x.view(torch.uint8).amax(1).bool()
    flags = x.view(torch.bool).numpy()
    if n < _SHORT_ROW_ITEMS and np.count_nonzero(flags) <= q:
        held = np.zeros(q, bool)
        held[np.flatnonzero(flags) // n] = True  # numpy finds nonzero bools (not bytes) fast
        return torch.from_numpy(held)
    return torch.from_numpy(flags.view(np.uint8).max(axis=1)).view(torch.bool)


# rows shorter than this are "short" to rows_any: measured on 100,000 x 20, 10,000 x 100 and 1,000 x 1,000, the rows of
# a few nonzero bytes take 10x, 2.5x and 0.4x the time of numpy's row maximum
_SHORT_ROW_ITEMS = 256


def exclusive_cumprod(x: Tensor) -> Tensor:
    """Product of the values before each position of a row (1 at the first) ``[Q, N]``."""
    out = torch.ones_like(x)
    out[:, 1:] = torch.cumprod(x[:, :-1], 1)
    return out


def discount_weights(
    discount: Discount, positions: Tensor, *, log_base: float = 2.0, power: float = 1.0
) -> Tensor:
    """Weights ``1 / discount(i)`` for 1-based ranks ``positions``.

    ``"log"``: ``log_b(i + 1)`` with ``b = log_base`` (2 by default, as trec_eval); ``"power"``: ``i ** power``
    (Zipf's law for ``power=1``); ``"linear"``: ``i``; a callable maps the ranks to the divisors.

    Example:
        >>> import torch
        >>> discount_weights("log", torch.tensor([1.0, 3.0]))
        tensor([1.0000, 0.5000])
    """
    if callable(discount):
        divisor = discount(positions).to(positions.dtype)
    elif discount == "log":
        divisor = torch.log(positions + 1) / math.log(log_base)
    elif discount == "power":
        divisor = positions**power
    elif discount == "linear":
        divisor = positions
    else:
        raise ValueError(f"Argument `discount` must be 'log', 'power', 'linear' or a callable, got {discount!r}.")
    return 1.0 / divisor


def cutoff_index(ranking: Ranking, ks: Sequence[int | None]) -> tuple[Tensor, Tensor]:
    """For each cut-off, the gather index ``[Q, K]`` into the rank axis and the effective k ``[Q, K]``.

    ``None`` means the whole list: the effective k is then the number of ranked items of each query.
    A cut-off past the list end gathers the last position (every later position would add nothing).
    """
    key = tuple(ks)
    if key not in ranking.cutoffs:  # measures of one evaluate() often share their cut-offs
        q, n = ranking.num_queries, ranking.list_size
        if None in ks:
            # filled on the device from Python numbers: no host-to-device copy (a synchronisation)
            valid = ranking.num_valid
            k_eff = torch.stack([valid if k is None else torch.full_like(valid, k) for k in ks], 1)
            index = (k_eff - 1).clamp(0, n - 1).long()
        else:  # the same for every query: two small constant rows, broadcast
            index, k_eff = fixed_cutoffs(key, n, ranking.dtype, ranking.labels.device)
            index, k_eff = index.expand(q, -1), k_eff.expand(q, -1)
        ranking.cutoffs[key] = (index, k_eff)
    return ranking.cutoffs[key]


@functools.lru_cache(maxsize=256)
def fixed_cutoffs(ks: tuple[int, ...], n: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(index [1, K], k_eff [1, K])`` of integer cut-offs on lists of ``n`` positions (cached: constants)."""
    index = torch.tensor([min(k, n) - 1 for k in ks], device=device).unsqueeze(0)
    return index, torch.tensor([float(k) for k in ks], dtype=dtype, device=device).unsqueeze(0)


def sum_to_cutoffs(values: Tensor, index: Tensor, ks: Sequence[int | None]) -> Tensor:
    """Sums of per-position ``values`` (0 past each list's end) down to each cut-off ``[Q, K]``: a plain
    sum when every cut-off is the whole list, else a cumulative sum read at ``index``."""
    if all(k is None for k in ks):
        return values.sum(1, keepdim=True).expand(-1, len(ks))
    return at_cutoffs(torch.cumsum(values, 1), index)


def at_cutoffs(cumulative: Tensor, index: Tensor) -> Tensor:
    """Read a per-position cumulative quantity ``[Q, N]`` at each query's cut-offs ``[Q, K]``."""
    return cumulative.gather(1, index)


def apply_measure(
    measure: Callable[..., tuple[Tensor, Tensor]], ranking: Ranking, ks: Sequence[int | None], **params: object
) -> tuple[Tensor, Tensor]:
    """``measure(ranking, ks, **params)``, with the rows of ``ranking.apart`` taken from their own ranking (and
    per-query tensor parameters ``[Q, ...]`` cut to those rows)."""
    values, no_relevant = measure(ranking, ks, **params)
    for rows, sub, _, owner, orders in ranking.apart_for(ks):
        sub_rows = rows if owner is None else rows[owner]
        sub_params = {name: v[sub_rows] if isinstance(v, Tensor) else v for name, v in params.items()}
        sub_values = measure(sub, ks, **sub_params)[0]
        if owner is not None:  # the other tie orders of each row, all equally likely: the mean over every order
            sub_values = values[rows].index_add(0, owner, sub_values) / orders.unsqueeze(1)
        values = values.index_copy(0, rows, sub_values)
    return values, no_relevant
