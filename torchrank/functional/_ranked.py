"""The one sort every measure builds on, :func:`rank`, and its :class:`Ranking`: what the measures share, computed
once on demand, with ``ties="average"``'s closed forms (docs/measures.md); where a measure at cut-offs ``ks`` (ints,
None: the whole list) reads its per-position quantities (:func:`cutoff_index`, :func:`at_cutoffs`)."""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import Tensor

from torchrank.functional._inputs import RankingInput, read_by_blocks, working_dtype
from torchrank.functional.core import Gain, gain_values, top_of_scale

if TYPE_CHECKING:
    from torchrank.functional.backends import Backend
    from torchrank.functional.backends._numpy.tied_rows import RowsApart

T = TypeVar("T")
Ks = Sequence[int | None]  # a kernel's cut-offs (None: the whole list)
Values = tuple[Tensor, Tensor]  # a kernel's values [Q, K] and its queries without relevant items [Q]


def _cached(compute: Callable[[Any], T]) -> T:
    """``functools.cached_property`` without its lock (a context manager torch.compile cannot trace): one thread
    builds and reads a Ranking."""
    name = compute.__name__

    def read(self: Any) -> T:
        if name not in self.__dict__:
            self.__dict__[name] = compute(self)
        return self.__dict__[name]

    read.__doc__ = compute.__doc__
    return property(read)  # type: ignore[return-value]


def _gather_ranking(
    inputs: RankingInput, order: Tensor | int, ties: str, relevance_threshold: float,
    scores: Tensor | Callable[[], Tensor] | None = None,
) -> Ranking:
    """The :class:`Ranking` of ``inputs`` in ``order``: ``[Q, <=N]`` indices into each row, or the width of rows
    already in rank order; ``scores``: already gathered, or a function gathering them when first read."""
    width = order if isinstance(order, int) else order.shape[1]

    def take(x: Tensor) -> Tensor:
        return _leading(x, width) if isinstance(order, int) else x.gather(1, order)

    return Ranking(
        scores=take(inputs.preds) if scores is None else scores,
        labels=_ranked_labels(inputs.target, order, working_dtype(inputs.preds)),
        valid=take(inputs.mask) if inputs.padded else _leading(inputs.mask, width),  # all True
        ideal_labels=inputs.ideal_target, judged=None if inputs.judged is None else take(inputs.judged), ties=ties,
        relevance_threshold=relevance_threshold, backend=inputs.backend, all_valid=not inputs.padded,
        ranks_every_judged_item=_ranks_every_judged_item(inputs, width),
    )


def rank(
    inputs: RankingInput, *, ties: str = "average", relevance_threshold: float = 1, depth: int | None = None
) -> Ranking:
    """Sort each list of ``inputs`` by descending score once, ties ordered as ``ties`` says, on the backend that
    formatted them; padded items last, never counted. ``depth``: the deepest position a measure reads (None: all)."""
    return inputs.backend.order(inputs, ties, relevance_threshold, depth)


def apply_measure(measure: Callable[..., Values], ranking: Ranking, ks: Ks, **params: object) -> Values:
    """``measure(ranking, ks, **params)``, with the rows of ``ranking.apart`` taken from their own ranking (and
    per-query tensor parameters ``[Q, ...]`` cut to those rows)."""
    values, no_relevant = measure(ranking, ks, **params)
    for rows, sub, first_tie, owner, orders in ranking.apart:
        if None not in ks and max(ks) <= first_tie:  # every cut-off stops before the rows' first tie: values exact
            continue
        sub_rows = rows if owner is None else rows[owner]
        sub_params = {name: v[sub_rows] if isinstance(v, Tensor) else v for name, v in params.items()}
        sub_values = measure(sub, ks, **sub_params)[0]
        if owner is not None:  # the other tie orders of each row, all equally likely: the mean over every order
            sub_values = values[rows].index_add(0, owner, sub_values) / orders.unsqueeze(1)
        values = values.index_copy(0, rows, sub_values)
    return values, no_relevant


def _leading(x: Tensor, width: int) -> Tensor:
    return x if x.shape[1] == width else x[:, :width]


def _ranks_every_judged_item(inputs: RankingInput, width: int) -> bool:
    """:attr:`Ranking.ranks_every_judged_item` for a ranking of ``width`` positions."""
    return inputs.ideal_target is inputs.target and width == inputs.target.shape[1]


def _ranked_labels(target: Tensor, order: Tensor | int, dtype: torch.dtype) -> Tensor:
    """The labels in ``order`` (:func:`_gather_ranking`'s) in ``dtype``: converted after the gather when few positions
    are read, else by blocks of rows gathered into the output (no whole-batch temporary)."""
    if isinstance(order, int):
        return _leading(target, order).to(dtype).contiguous()
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


# items per block of rows where CPU work goes by blocks (sort keys' high halves; labels, ideal labels of a large
# batch: read_by_blocks): each block's work is a few cheap passes, and a block's temporaries stay in cache
_ROW_BLOCK_ITEMS = 2**16


def _compare(op: Callable[..., Tensor], x: Tensor, other: Tensor | float, dtype: torch.dtype) -> Tensor:
    """Comparison ``op(x, other)`` written as 0/1 straight into a ``dtype`` tensor: faster on CPU than a bool output
    (benchmarks/notes/code_comment_timings.md)."""
    return op(x, other, out=torch.empty(x.shape, dtype=dtype, device=x.device))


def cutoff_index(ranking: Ranking, ks: Ks) -> tuple[Tensor, Tensor]:
    """For each cut-off, the index into the rank axis (past the list's end: its last position) and the effective k
    (None: each query's ranked items), ``[Q, K]`` each, or ``[K]`` and ``[1, K]`` when every cut-off is a number."""
    key = tuple(ks)
    if key not in ranking.cutoffs:  # measures of one evaluate() often share their cut-offs
        n = ranking.list_size
        if None in ks:  # filled on the device from Python numbers: no host-to-device copy
            valid = ranking.num_valid
            k_eff = torch.stack([valid if k is None else torch.full_like(valid, k) for k in ks], 1)
            index = (k_eff - 1).clamp(0, n - 1).long()
        else:  # the same for every query: two small constant rows (cached), nothing built per call
            index, k_eff = fixed_cutoffs(key, n, ranking.dtype, ranking.labels.device)
        ranking.cutoffs[key] = (index, k_eff)
    return ranking.cutoffs[key]


@functools.lru_cache(maxsize=256)
def fixed_cutoffs(ks: tuple[int, ...], n: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(index [K], k_eff [1, K])`` of integer cut-offs on lists of ``n`` positions (cached: constants)."""
    index = torch.tensor([min(k, n) - 1 for k in ks], device=device)
    return index, torch.tensor([float(k) for k in ks], dtype=dtype, device=device).unsqueeze(0)


def sum_to_cutoffs(values: Tensor, index: Tensor, ks: Ks) -> Tensor:
    """Sums of per-position ``values`` (0 past each list's end) down to each cut-off ``[Q, K]``."""
    if all(k is None for k in ks):
        return values.sum(1, keepdim=True).expand(-1, len(ks))
    return at_cutoffs(torch.cumsum(values, 1), index)


def at_cutoffs(cumulative: Tensor, index: Tensor) -> Tensor:
    """Read a per-position quantity ``[Q, N]`` at each query's cut-offs ``[Q, K]``, or at the same ``[K]`` in all."""
    return cumulative.index_select(1, index) if index.ndim == 1 else cumulative.gather(1, index)


class Ranking:
    """Labels of ``Q`` queries in rank order (``N`` positions, ``M`` judged labels), and what measures share."""

    def __init__(
        self, scores: Tensor | Callable[[], Tensor], labels: Tensor, valid: Tensor, ideal_labels: Tensor, ties: str,
        relevance_threshold: float, backend: Backend, judged: Tensor | None = None, all_valid: bool = False,
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
        self.backend = backend  # the backend that ranked it, which computes the per-group work its way
        self.dtype = labels.dtype
        self.num_queries, self.list_size = labels.shape
        self.cutoffs: dict[tuple[int | None, ...], tuple[Tensor, Tensor]] = {}  # see cutoff_index
        self.apart: list[RowsApart] = []  # rows whose tie order matters, each with its own ranking (apply_measure)
        # one of the tie orders whose values ties="average" averages: ranked as "first", but a measure with no
        # tie-averaged form refuses it as it refuses averaged ties
        self.averaged_over_orders = False
        self.route = "sort"  # the ordering route that built it (the numpy backend's own: its order.ROUTES)

    @_cached
    def scores(self) -> Tensor:
        """Scores in rank order ``[Q, N]`` (or keys that tie as they do), gathered when tie groups are first needed."""
        return self._scores() if callable(self._scores) else self._scores

    @_cached
    def positions(self) -> Tensor:
        """1-based ranks ``[N]``."""
        return torch.arange(1, self.list_size + 1, device=self.labels.device, dtype=self.dtype)

    @_cached
    def num_valid(self) -> Tensor:
        """Number of ranked (real) items per query ``[Q]``."""
        if self.all_valid:
            return torch.full((self.num_queries,), self.list_size, dtype=self.dtype, device=self.labels.device)
        # int32 sums of bools: faster (benchmarks/notes/code_comment_timings.md)
        return self.valid.sum(1, dtype=torch.int32).to(self.dtype)

    @_cached
    def relevant(self) -> Tensor:
        """Binary relevance in rank order ``[Q, N]`` (``label >= relevance_threshold``)."""
        # padding holds label 0 and the threshold is > 0: no need to mask it
        return _compare(torch.ge, self.labels, self.relevance_threshold, self.dtype)

    @_cached
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

    @_cached
    def no_relevant(self) -> Tensor:
        """Queries with no judged item at or above the relevance threshold ``[Q]`` bool (binary measures)."""
        return self.num_relevant == 0

    @_cached
    def _ideal_labels_in_dtype(self) -> Tensor:
        return self.ideal_labels if self.ideal_labels.dtype == self.dtype else self.ideal_labels.to(self.dtype)

    def per_ideal_row(self, fn: Callable[[Tensor], Tensor]) -> Tensor:
        """``fn`` of the ideal labels in the working dtype ``[Q, ...]``; on large CPU batches by blocks of rows
        (:func:`~torchrank.functional._inputs.read_by_blocks`)."""
        if not read_by_blocks(self.ideal_labels):
            return fn(self._ideal_labels_in_dtype)
        blocks = row_blocks(*self.ideal_labels.shape, _ROW_BLOCK_ITEMS)
        return torch.cat([fn(self.ideal_labels[rows].to(self.dtype)) for rows in blocks])

    @_cached
    def has_positive_label(self) -> Tensor:
        """Queries with a judged label > 0 ``[Q]`` bool (graded measures)."""
        return self.per_ideal_row(lambda labels: labels.amax(1) > 0)

    def top_label(self, max_label: float | None) -> Tensor:
        """Top of the label scale (:func:`~torchrank.functional.core.top_of_scale`): ``max_label``, or each query's
        largest judged label ``[Q, 1]``."""
        if max_label is not None:
            return top_of_scale(self.labels, max_label=max_label)
        top = torch.maximum(self.ideal_labels.amax(1, keepdim=True).to(self.dtype), self.labels.amax(1, keepdim=True))
        return top_of_scale(top)

    @property
    def tie_groups(self) -> tuple[Tensor, Tensor, Tensor]:
        """Each position's tie group ``[Q, N]``: ``group_id`` (from 0 in each row), ``start`` (its 0-based first
        position) and ``size`` (in the working dtype). Padding forms its own group."""
        return self._group_ids[1], self._group_starts, self._group_sizes

    @_cached
    def _group_ids(self) -> tuple[Tensor, Tensor]:
        """Where each tie group begins ``[Q, N]`` bool (False at position 0, so that groups number from 0), and each
        position's group number ``[Q, N]`` int64."""
        new_group = self.scores[:, 1:] != self.scores[:, :-1]  # a position not in the group of the one above
        if not self.all_valid:  # padding (always last) is a group of its own
            new_group |= self.valid[:, 1:] != self.valid[:, :-1]
        boundary = torch.nn.functional.pad(new_group, (1, 0), value=False)
        return boundary, torch.cumsum(boundary, 1)

    @_cached
    def _group_sizes(self) -> Tensor:
        """The size of each position's tie group ``[Q, N]`` in the working dtype (exact below 2^24 in float32), which
        the closed forms divide by."""
        return self.group_sum(torch.ones(self.labels.shape, dtype=self.dtype, device=self.labels.device))

    @_cached
    def _group_starts(self) -> Tensor:
        """Where each position's tie group begins ``[Q, N]`` int64: the last boundary at or above it (or 0)."""
        return torch.cummax(torch.where(self._group_ids[0], _indices(self.list_size, self.labels.device), 0), 1).values

    @_cached
    def averages_ties(self) -> bool:
        """``ties="average"`` and a tie exists (or, on the device backends, may: finding out would synchronise)."""
        return self.ties == "average" and self.backend.may_tie(self)

    @_cached
    def holds_tie(self) -> bool:
        """Whether two real items of a row tie: one host read, made only by measures that refuse averaged ties."""
        tied = (self.scores[:, 1:] == self.scores[:, :-1]) & self.valid[:, 1:] & self.valid[:, :-1]
        return bool(tied.any())

    def group_sum(self, values: Tensor) -> Tensor:
        """Sum of ``values`` over each position's tie group, broadcast back to positions ``[Q, N]``."""
        group_id = self._group_ids[1]
        sums = torch.zeros_like(values).scatter_add_(1, group_id, values)
        return sums.gather(1, group_id)

    def expected(self, values: Tensor) -> Tensor:
        """Expected per-position value under random order of tie groups (the group mean), or ``values``."""
        return self.backend.tie_means(self, values) if self.averages_ties else values

    @_cached
    def hits(self) -> Tensor:
        """Expected number of relevant items in the top i, ``[Q, N]``."""
        return torch.cumsum(self.expected_relevant, 1) if self.averages_ties else self.relevant_count

    @_cached
    def expected_relevant(self) -> Tensor:
        """Probability that each position holds a relevant item ``[Q, N]``."""
        return self.expected(self.relevant)

    @_cached
    def relevant_count(self) -> Tensor:
        """Relevant items in the top i in this order (ties as sorted) ``[Q, N]``."""
        if self.labels.device.type == "cpu" and self.list_size < 2**31:
            # counted in int32, then converted: the same integers (float sums of 0/1 are exact below 2 ** 24), but a
            # CPU cumulative sum waits on each add, and an integer add takes a third of a float add's time
            return torch.cumsum(self.relevant, 1, dtype=torch.int32).to(self.dtype)
        return torch.cumsum(self.relevant, 1)

    @_cached
    def relevant_before(self) -> Tensor:
        """Relevant items above each position in this order ``[Q, N]``."""
        return self.relevant_count - self.relevant

    @_cached
    def reciprocal_positions(self) -> Tensor:
        """``1 / i`` for the 1-based ranks ``[N]``."""
        return self.positions.reciprocal()

    @_cached
    def tie_group_stats(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Per position: group size m, relevant items r in the group, relevant items before the group,
        and the 0-based offset inside the group (all floating ``[Q, N]``)."""
        _, start, size = self.tie_groups
        offset = self.positions.unsqueeze(0) - 1 - start.to(self.dtype)
        return size, self.group_sum(self.relevant), self.relevant_before.gather(1, start), offset

    @_cached
    def relevant_times_count(self) -> Tensor:
        """``E[rel_i * c_i]`` ``[Q, N]``, with ``c_i`` the relevant items in the top i (AP, MAR): McSherry and Najork's
        ``r/m * (C + 1 + (j-1)(r-1)/(m-1))`` at position j of a group of m holding r, C before it (docs/measures.md)."""
        return self.times_count(self.relevant, self.relevant_count)

    def times_count(self, relevant: Tensor, count: Tensor | None = None) -> Tensor:
        """:attr:`relevant_times_count` for a binary relevance ``relevant`` ``[Q, N]`` in this order (GAP's grades),
        ``count`` its running count."""
        count = torch.cumsum(relevant, 1) if count is None else count
        if not self.averages_ties:
            return relevant * count
        m, r, prior, offset = self.tie_group_stats
        if relevant is not self.relevant:
            r, prior = self.group_sum(relevant), (count - relevant).gather(1, self._group_starts)
        within = torch.where(m > 1, offset * (r - 1) / (m - 1).clamp_min(1), 0)
        return r / m * (prior + 1 + within)

    @_cached
    def first_relevant_position(self) -> Tensor:
        """1-based rank of the first relevant item in this order, ``inf`` where there is none ``[Q]``."""
        # the relevant counts (shared with AP, P, R) never decrease along a row: search for the first above 0
        half = torch.full((self.num_queries, 1), 0.5, dtype=self.dtype, device=self.labels.device)
        before = torch.searchsorted(self.relevant_count, half).squeeze(1)
        return torch.where(before < self.list_size, (before + 1).to(self.dtype), float("inf"))

    @_cached
    def first_relevant_probability(self) -> Tensor:
        """``P(first relevant item at position i)`` ``[Q, N]`` (RR, hit rate, FRP), nonzero only in the first tie group
        holding a relevant item (docs/measures.md): the product along the row of the chances that each position above
        is not relevant (given none above it is; 1 before that group), times ``r/(m-j+1)``."""
        if not self.averages_ties:
            return self.relevant * (self.relevant_before == 0).to(self.dtype)
        m, r, prior, t = self.tie_group_stats
        first_group = (prior == 0) & (r > 0)
        none_above = ((m - r - t) / (m - t)).clamp_min(0)  # P(position is non-relevant | none above is)
        factor = torch.where(first_group, none_above, torch.ones_like(none_above))
        survive = exclusive_cumprod(factor)
        return torch.where(first_group, survive * r / (m - t), torch.zeros_like(m))

    def gains(self, gain: Gain, labels: Tensor | None = None) -> Tensor:
        """``gain(label)`` (:mod:`~torchrank.functional.core`'s) of ``labels`` in the working dtype (default: the
        ranked labels), 0 at padding."""
        return gain_values(self.labels if labels is None else labels.to(self.dtype), gain)

    def ideal_gains(self, gain: Gain, depth: int | None = None) -> Tensor:
        """Gains of the judged items sorted descending, the top ``depth`` (None: all) ``[Q, <=M]``; a callable's
        negative gains count 0 (the ideal ranking gains nothing from them: trec_eval's ideal DCG)."""
        if callable(gain):  # any map: the gains first, then their order
            return self.backend.descending(self.gains(gain, self.ideal_labels).clamp_min(0), depth)
        # the linear and exponential gains never decrease with the label: sort the labels, map the top ones
        return self.gains(gain, self.per_ideal_row(lambda labels: self.backend.descending(labels, depth)))


def exclusive_cumprod(x: Tensor) -> Tensor:
    """Product of the values before each position of a row (1 at the first) ``[Q, N]``."""
    out = torch.ones_like(x)
    out[:, 1:] = torch.cumprod(x[:, :-1], 1)
    return out


@functools.lru_cache(maxsize=64)
def _indices(n: int, device: torch.device, dtype: torch.dtype = torch.int64) -> Tensor:
    """``0 .. n - 1`` ``[n]`` (cached: read, never written; int32 for the low halves of the numpy backend's keys)."""
    return torch.arange(n, device=device, dtype=dtype)
