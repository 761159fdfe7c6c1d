"""The one sort every ranking metric builds on: :func:`rank` and the :class:`Ranking` it returns.

:func:`rank` orders each list once and returns a :class:`Ranking`: labels in rank order, the validity mask,
the number of relevant items and, lazily and cached, everything the metrics share (tie groups, cumulative
hits, the distribution of the first relevant position, ideal gains). A metric is then a few tensor
operations over these, and several metrics over the same input share one sort.

Ties (DESIGN section 4). ``"first"`` keeps input order among equal scores; ``"optimistic"`` /
``"pessimistic"`` put higher / lower labels first. ``"average"`` gives the exact expected value of a
metric when each group of equal scores is ordered uniformly at random: every position of a tie group then
holds each of the group's items with equal probability, so a metric linear in per-position values uses
the group mean; the non-linear ones (AP, RR, ERR, Kendall tau, ...) use the closed forms of :class:`Ranking`.

The engine by concern (:mod:`torchrank.functional.backends` picks the ordering), each module importing only those
listed after it:

- this module: :func:`rank`, which picks the route, and :func:`apply_measure`;
- ``_numpy_order``: the numpy backend's choice of route for a CPU batch (label keys, index keys, argsort);
- ``_numpy_keys``: its 64-bit sort keys and the selection of each row's head;
- ``_tied_rows``: its rows apart, the few rows whose tie order matters, ranked or enumerated on their own;
- ``_torch_order``: the torch backend's ordering (:func:`_ranking_order`: one sort, stable where the tie order is a
  key), also every backend's exact ranking of rows whose ties must be ordered;
- ``_ranked``: the :class:`Ranking` and its closed forms, and the row helpers the routes share;
- ``_descending``: rows sorted descending (the ideal's), and the thresholds of a head's selection;
- ``_cutoffs``: where the measures read a ranking's per-position quantities at their cut-offs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from torch import Tensor

from torchrank.functional._inputs import RankingInput
from torchrank.functional._ranked import Ranking, _gather_ranking
from torchrank.functional.backends import uses_numpy
from torchrank.functional.backends._numpy.order import _rank_tied_rows_apart
from torchrank.functional.backends._torch import _sorted_ranking


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
    if _in_rank_order(inputs):
        # each row is its own ranking, with no tie: its first positions in the given order, no sort; an untied row
        # ranks as "first" on the numpy backend (as its sorting route labels it), while the device backends keep
        # `ties` (they never look for ties, so their closed forms and refusals stay those of the sorting route)
        n = inputs.preds.shape[1]
        width = n if depth is None or depth >= n else depth
        ranked_ties = "first" if ties == "average" and uses_numpy(inputs.preds) else ties
        return _gather_ranking(inputs, width, ranked_ties, relevance_threshold)
    if uses_numpy(inputs.preds):
        ranked = _rank_tied_rows_apart(inputs, ties, relevance_threshold, depth)
        if ranked is not None:
            return ranked
    return _sorted_ranking(inputs, ties, relevance_threshold)


def _in_rank_order(inputs: RankingInput) -> bool:
    """Whether each row of CPU ``inputs`` is in rank order already, with no tie: scores that repeat one strictly
    descending row (a stride-0 broadcast, as :func:`~torchrank.functional.ids_to_dense`'s list positions; NaN fails
    the check), each row's padding after its real items. ``O(N)`` reads of the row and one pass over the mask; a
    device tensor is never read (that would synchronise), so devices sort."""
    preds = inputs.preds
    if preds.stride(0) != 0 or preds.device.type != "cpu" or inputs.exact_ties:
        return False
    row = preds[0]
    if not bool((row[1:] < row[:-1]).all()):
        return False
    if not inputs.padded or inputs.padding_last:
        return True
    if not uses_numpy(inputs.mask):
        mask = inputs.mask
        return not bool((mask[:, 1:] > mask[:, :-1]).any())  # no real item after a padded one
    mask = inputs.mask.numpy()  # numpy's passes over bools beat torch's (benchmarks/notes/code_comment_timings.md)
    return not bool(np.less(mask[:, :-1], mask[:, 1:]).any())


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
