"""The numpy backend's ranking: which ordering route ranks a CPU batch, and the rows whose ties need their own.

One fast order for every row (a top-k of a short head, else one numpy sort of packed keys: :mod:`._numpy_keys`;
labels may ride in the keys), then only the rows holding a tie that matters get the tie order applied
(:mod:`._tied_rows`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from torchrank.functional._descending import _cpu_topk_is_partial
from torchrank.functional._inputs import RankingInput
from torchrank.functional._ranked import Ranking, _gather_ranking, rows_any
from torchrank.functional.backends._numpy.compact_keys import _compact_key_ranking
from torchrank.functional.backends._numpy.keys import (
    _LABEL_FLIP,
    _gather_scores,
    _key_ranking,
    _negated_scores,
    _packed_sort,
    _packs,
    _selects_head,
    _sort_whole_rows,
    _sorted_keys,
    _sorts_head_only,
    _tied_neighbours,
    _write_label_halves,
)
from torchrank.functional.backends._numpy.tied_rows import _MAX_TIED_SHARE, _select_rows, _set_rows_apart
from torchrank.functional.backends._torch import _sorted_ranking


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
            # the key sort of whole rows is that pass (faster than the generic one on CPU:
            # benchmarks/notes/code_comment_timings.md): labels riding in its keys order every tie group, or it keeps
            # input order as "first" asks
            return _rank_tied_rows_apart(inputs, ties, relevance_threshold, depth, topk=False)
        return None
    ranking = _gather_ranking(inputs, order, "first", relevance_threshold, scores)

    def exact(tied: Tensor) -> Ranking:
        if ties == "average" and order.shape[1] == inputs.preds.shape[1]:
            # whole rows in descending order, padding last: every tie group is already contiguous, and "average"
            # averages each group whatever order it holds, so these rows need no sort of their own
            return _gather_ranking(_select_rows(inputs, tied), order[tied], ties, relevance_threshold)
        return _sorted_ranking(_select_rows(inputs, tied), ties, relevance_threshold)  # rank's route for them

    _set_rows_apart(ranking, rows, pairs[rows], ties, exact)
    return ranking


def _labels_ride_in_keys(inputs: RankingInput, depth: int | None, topk: bool = True) -> bool:
    """Whether the key sort can carry the labels in place of the item indices (:func:`_rank_by_label_keys`):
    CPU scores it packs, no per-item tensor but the labels to put in rank order, no short top-k instead (where
    ``topk`` allows one)."""
    return (
        _packs(inputs.preds) and inputs.judged is None and not inputs.exact_ties
        and not (topk and _takes_topk(inputs, depth))
    )


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
    no fast path applies (rows known to hold ties, int64 scores).

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


# a head the key sort's selection takes (:func:`_head_items`) never gets a top-k: the selection's cost does not grow
# with k, torch.topk's does (benchmarks/notes/numpy_routes.md); nor do small batches, where torch.topk's partial sort
# mispredicts its branches on every new batch (numpy's sort of packed keys does not branch on the data)


def _takes_topk(inputs: RankingInput, depth: int | None) -> bool:
    """Whether the fast order is a top-k of ``depth`` + 1 (unpadded lists, a short enough cut-off)."""
    n = inputs.preds.shape[1]
    return depth is not None and depth < n and not inputs.padded and _topk_pays(depth, inputs.preds)


def _topk_pays(depth: int, preds: Tensor) -> bool:
    """Whether a top-k of ``depth`` + 1 beats the sort of ``preds`` (unpadded): of whole rows, or on CPU the key
    sort's selection of each row's head."""
    n = preds.shape[1]
    if _packs(preds) and _selects_head(depth + 1, n, preds.numel()):  # the key sort ranks only each row's head
        return False
    return _cpu_topk_is_partial(depth + 1, n)
