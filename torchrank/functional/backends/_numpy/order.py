"""The numpy backend's ranking: one fast order for every row, then the tie order applied only to the rows holding a
tie that matters; each route names itself (:attr:`Ranking.route`). The routes: docs/backends.md."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from torchrank.functional._inputs import RankingInput
from torchrank.functional._ranked import Ranking, _gather_ranking
from torchrank.functional.backends._numpy.compact_keys import _compact_key_ranking
from torchrank.functional.backends._numpy.keys import (
    _LABEL_FLIP,
    _key_ranking,
    _negated_scores,
    _packed_sort,
    _packs,
    _selects_head,
    _sorted_keys,
    _tied_neighbours,
    _write_label_halves,
)
from torchrank.functional.backends._numpy.tied_rows import _MAX_TIED_SHARE, _select_rows, _set_rows_apart, rows_any
from torchrank.functional.backends._torch import _sorted_ranking

# the name each route writes into the ranking it builds (:attr:`Ranking.route`): the keys of a head's items only
# add HEAD_ITEMS ("label keys, head items")
LABEL_KEYS = "label keys"  # 64-bit keys carrying each item's label (:func:`_rank_by_label_keys`)
COMPACT_KEYS = "compact keys"  # 32-bit keys: the score below the batch's top, the label (:mod:`.compact_keys`)
INDEX_KEYS = "index keys"  # 64-bit keys carrying each item's index (:func:`_packed_sort`)
ARGSORT = "argsort"  # numpy's argsort of the negated scores (dtypes the keys cannot pack)
TOPK = "top-k"  # torch.topk of a short head (:func:`_takes_topk`)
HEAD_ITEMS = "head items"  # keys built for the items that can make each row's head only (:func:`._head_items`)
ROUTES = (LABEL_KEYS, COMPACT_KEYS, INDEX_KEYS, ARGSORT, TOPK)
FastOrder = tuple[Tensor, Tensor | Callable[[], Tensor], Tensor, str]  # :func:`_fast_order`'s


def _rank_tied_rows_apart(
    inputs: RankingInput, ties: str, relevance_threshold: float, depth: int | None, topk: bool = True
) -> Ranking | None:
    """A ranking that orders ties only in the rows holding one within ``depth`` (:func:`_set_rows_apart`), after one
    fast sort of every row (``topk``: or a top-k); None where it can't."""
    if ties != "first" and _labels_ride_in_keys(inputs, depth, topk):
        return _rank_by_label_keys(inputs, ties, relevance_threshold, depth)
    fast = _fast_order(inputs, depth, topk)
    if fast is None:
        return None
    order, scores, pairs, route = fast
    if route not in (ARGSORT, TOPK) and ties == "first":  # equal scores already in input order, as "first" asks
        return _named(_gather_ranking(inputs, order, "first", relevance_threshold, scores), route)
    rows = rows_any(pairs).nonzero().squeeze(1)
    if rows.numel() > _MAX_TIED_SHARE * len(pairs):  # mostly tied: one exact pass over all rows beats two passes
        if route == TOPK and _packs(inputs.preds):
            # the key sort of whole rows is that pass: labels riding in its keys order every tie group, or it keeps
            # input order as "first" asks
            return _rank_tied_rows_apart(inputs, ties, relevance_threshold, depth, topk=False)
        return None
    ranking = _named(_gather_ranking(inputs, order, "first", relevance_threshold, scores), route)

    def exact(tied: Tensor) -> Ranking:
        if ties == "average" and order.shape[1] == inputs.preds.shape[1]:
            # whole rows in descending order, padding last: every tie group is already contiguous, and "average"
            # averages each group whatever order it holds, so these rows need no sort of their own
            return _gather_ranking(_select_rows(inputs, tied), order[tied], ties, relevance_threshold)
        return _sorted_ranking(_select_rows(inputs, tied), ties, relevance_threshold)  # rank's route for them

    _set_rows_apart(ranking, rows, pairs[rows], ties, exact)
    return ranking


def _named(ranking: Ranking, route: str) -> Ranking:
    ranking.route = route
    return ranking


def _route(keys: str, selected: bool) -> str:
    """A key route's name, for the keys of a head's items only (``selected``) or of every item."""
    return f"{keys}, {HEAD_ITEMS}" if selected else keys


def _labels_ride_in_keys(inputs: RankingInput, depth: int | None, topk: bool = True) -> bool:
    """Whether the key sort can carry the labels in place of the item indices (:func:`_rank_by_label_keys`): scores
    it packs, no per-item tensor but the labels to put in rank order, no short top-k instead (where ``topk`` allows)."""
    return (_packs(inputs.preds) and inputs.judged is None and not inputs.exact_ties
            and not (topk and _takes_topk(inputs, depth)))


def _rank_by_label_keys(inputs: RankingInput, ties: str, relevance_threshold: float, depth: int | None) -> Ranking:
    """The ranking of one sort of keys holding each item's label in their low half (the label keys' route), the rows
    with a tie within ``depth`` under ``"average"`` set apart."""
    mask = inputs.mask if inputs.padded else None
    flip = _LABEL_FLIP[ties]
    n = inputs.preds.shape[1]
    width = n if depth is None or depth >= n else depth
    seen = None if width == n else width + 1  # one past the cut-off, to see a tie across it
    # whole rows sorted: 32-bit keys where they hold the labels
    if inputs.padded or not _selects_head(seen, n, inputs.preds.numel()):
        compact = _compact_key_ranking(inputs, ties, relevance_threshold, width, seen)
        if compact is not None:
            return _named(compact, COMPACT_KEYS)
    write = functools.partial(_write_label_halves, inputs.target, flip)
    keys = _sorted_keys(inputs.preds, mask, write, seen, finite=inputs.finite_scores)
    # the keys of only the items that can make the head (:func:`_head_items`) are sorted, and every tie group
    # reaching into the head is whole among them; but a row may end in padding keys
    selected = keys.shape[1] < n
    route = _route(LABEL_KEYS, selected)
    if ties != "average":
        return _named(_key_ranking(inputs, keys[:, :width], flip, ties, relevance_threshold), route)
    pairs = _tied_neighbours(keys, mask, seen)
    rows = rows_any(pairs).nonzero().squeeze(1)
    if rows.numel() > _MAX_TIED_SHARE * len(pairs):  # mostly tied: every row's groups averaged, in one ranking
        return _named(_key_ranking(inputs, keys, flip, "average", relevance_threshold, padded=selected), route)
    ranking = _named(_key_ranking(inputs, keys[:, :width], flip, "first", relevance_threshold), route)  # any order

    def exact(tied: Tensor) -> Ranking:  # whole rows sorted (or the head's items): every tie group whole
        own = _select_rows(inputs, tied)
        return _key_ranking(own, keys[tied], flip, "average", relevance_threshold, padded=selected)

    _set_rows_apart(ranking, rows, pairs[rows], ties, exact)
    return ranking


def _fast_order(inputs: RankingInput, depth: int | None, topk: bool = True) -> FastOrder | None:
    """``(order, scores, pairs, route)``: each row's descending order, padding last, cut at ``depth`` ``[Q, <=N]``; the
    scores in that order (or a function gathering them); the tied neighbours over the cut and one past it (bool or 0/1
    bytes, a last column past the pairs 0); the route. None for rows known to hold ties, or int64 scores."""
    if inputs.exact_ties:
        return None
    preds, n = inputs.preds, inputs.preds.shape[1]
    if depth is not None and depth >= n:
        depth = None
    if topk and _takes_topk(inputs, depth):
        # one more than the cut-off: a tie across it shows as equal values at positions depth and depth + 1
        values, order = torch.topk(preds, depth + 1, dim=1, sorted=True)
        return order[:, :depth], values[:, :depth], values[:, 1:] == values[:, :-1], TOPK
    mask = inputs.mask if inputs.padded else None
    if _packs(preds):
        order, tied, selected = _packed_sort(preds, mask, depth, finite=inputs.finite_scores)
        return order, functools.partial(torch.gather, preds, 1, order), tied, _route(INDEX_KEYS, selected)
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
    return order, scores, tied, ARGSORT


def _takes_topk(inputs: RankingInput, depth: int | None) -> bool:
    """Whether the fast order is a top-k of ``depth`` + 1: unpadded rows whose head the key sort does not select
    (:func:`_selects_head`), long enough for torch.topk to sort partially (:data:`_TOPK_RATIO`)."""
    n = inputs.preds.shape[1]
    if depth is None or depth >= n or inputs.padded:
        return False
    # the selection's cost does not grow with k, topk's does
    selected = _packs(inputs.preds) and _selects_head(depth + 1, n, inputs.preds.numel())
    return not selected and (depth + 1) * _TOPK_RATIO <= n


# torch.topk(k) on CPU partially sorts each row while k * 64 <= its length; past it, it selects then sorts the k, slower
_TOPK_RATIO = 64
