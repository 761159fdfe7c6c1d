"""Beyond-accuracy measures of recommendation lists, accumulated over an epoch and synced exactly.

Each class takes the ranked item ids ``[B, K]`` of a batch (``pad_id`` pads short lists; an id repeated in a
list counts at its first position only) and reads the first ``k`` positions. Every state is a fixed-shape
float64 sum (``dist_reduce_fx="sum"``): per-item exposure ``[num_items]``, or sums and counts of per-list
values, so a sync is one all-reduce per state, exact for uneven shards and for ranks that saw no data, on any
backend. Ids outside ``[0, num_items)`` add nothing and are counted on the device (no host read in
``update``); ``compute`` raises if there were any. Formulas and sources: docs/recommenders.md.

An update is a handful of batched ops (a validation epoch makes many small ones): each id becomes a *slot*
``id + 1`` clamped to ``[0, num_items + 1]``, so that per-item tables of ``num_items + 2`` entries (zero, or
counting, at the two outer slots) are read and written without a separate range check.

Example:
    >>> import torch
    >>> coverage = Coverage(k=2, num_items=5)
    >>> coverage.update(torch.tensor([[0, 1, 2], [1, 3, 4]]))
    >>> coverage.compute()  # items 0, 1 and 3 of 5 appear in a top 2
    tensor(0.6000)
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from torchrank.functional.checks import is_integer_tensor
from torchrank.functional.ids import first_occurrence
from torchrank.metrics._base import KeepStateOnError

__all__ = [
    "AveragePopularity", "Coverage", "ExposureEntropy", "GiniIndex", "IntraListDiversity", "LongTailShare",
    "Novelty", "Personalization",
]


class _ListMetric(KeepStateOnError, Metric):
    """Shared mechanics: the cut-off, padding and id checks, slots, and the count of ids outside the catalogue."""

    is_differentiable = False
    higher_is_better: bool | None = True
    full_state_update = False
    plot_lower_bound: float | None = 0.0
    plot_upper_bound: float | None = 1.0
    _outside_state = True  # an ``out_of_range`` sum state counts the ids outside the catalogue

    def __init__(self, k: int | None, num_items: int, pad_id: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
            raise ValueError(f"Argument `k` must be a positive int or None (the whole list), got {k!r}.")
        if isinstance(num_items, bool) or not isinstance(num_items, int) or num_items <= 0:
            raise ValueError(f"Argument `num_items` must be a positive int (the catalogue size), got {num_items!r}.")
        if isinstance(pad_id, bool) or not isinstance(pad_id, int):
            raise ValueError(f"Argument `pad_id` must be an int, got {pad_id!r}.")
        self.k, self.num_items, self.pad_id = k, num_items, pad_id
        if self._outside_state:  # the exposure classes count them in their own state's outer slots
            self.add_state("out_of_range", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.register_buffer("in_catalogue", _slotted(torch.ones(num_items, dtype=torch.float64)), persistent=False)

    def _slots(self, ranked_ids: Tensor) -> tuple[Tensor, Tensor]:
        """The slots ``[B, k]`` of the top-``k`` ids (``id + 1``; 0 below the catalogue, ``num_items + 1`` above
        it) and the first copy of each id that is not padding ``[B, k]`` (bool)."""
        if not is_integer_tensor(ranked_ids) or ranked_ids.ndim != 2:
            shown = tuple(ranked_ids.shape) if isinstance(ranked_ids, Tensor) else type(ranked_ids).__name__
            raise ValueError(f"Argument `ranked_ids` must be a [queries, k] integer tensor, got {shown}.")
        ids = ranked_ids[:, : self.k] if self.k is not None else ranked_ids
        wide, pad = _as_int64(ids, self.pad_id)
        first = first_occurrence(wide, pad) if pad is not None else _first_copies(wide)
        slots = wide.clamp(-1, self.num_items).add_(1)
        if ids.dtype == torch.uint64:  # ids from 2**63 up wrapped below 0, but lie above the catalogue
            slots = torch.where(wide < 0, self.num_items + 1, slots)
        return slots, first

    def _lists(self, ranked_ids: Tensor) -> tuple[Tensor, Tensor]:
        """The slots ``[B, k]`` and which positions count ``[B, k]`` float64 (1 at the first copy of an id in the
        catalogue); the first copies of ids outside it are added to ``out_of_range``."""
        slots, first = self._slots(ranked_ids)
        counted = self.in_catalogue.take(slots) * first
        self.out_of_range += first.sum() - counted.sum()
        return slots, counted

    def _ids_outside(self) -> Tensor:
        return self.out_of_range

    def _check_ids_seen(self) -> None:
        outside = int(self._ids_outside())  # one host read, at compute
        if outside > 0:
            raise ValueError(
                f"Argument `ranked_ids` held {outside} ids outside [0, num_items={self.num_items}) "
                "(other than `pad_id`); they were left out. Fix the ids, then `reset()`."
            )


def _as_int64(ids: Tensor, pad_id: int) -> tuple[Tensor, int | None]:
    """The ids as int64 and ``pad_id``'s value among them; None when the ids' dtype cannot hold ``pad_id`` (-1 in
    ``uint8``), so no id is padding.

    Indexing ops take int64 (or int32) indices only, and a slot ``id + 1`` needs room above the id dtype's largest
    value (127 in ``int8``). Every integer dtype converts exactly, but for ``uint64`` ids from ``2**63`` up, which
    wrap one to one onto negative int64 values: they stay distinct and outside the catalogue, and ``pad_id`` wraps
    with them. ``pad_id`` is not compared in the ids' own dtype, where it would wrap too (-1 equals 65535 in
    ``uint16``).
    """
    info = torch.iinfo(ids.dtype)
    if not info.min <= pad_id <= info.max:
        return ids.long(), None
    return ids.long(), pad_id - 2**64 if pad_id >= 2**63 else pad_id


def _first_copies(ids: Tensor) -> Tensor:
    """:func:`first_occurrence` with no padding id: the first copies of -1 (left out as padding there) put back."""
    minus_one = ids == -1
    return first_occurrence(ids, -1) | (minus_one & (minus_one.cumsum(1) == 1))


def _slotted(per_item: Tensor) -> Tensor:
    """A per-item table ``[num_items, ...]`` with a zero entry before and after it: indexed by slot."""
    pad = per_item.new_zeros(1, *per_item.shape[1:])
    return torch.cat([pad, per_item, pad])


class _ExposureMetric(_ListMetric):
    """Counts each item's appearances in the top-``k`` lists: a sum state of ``num_items + 2`` slots, whose two
    outer slots count the ids outside the catalogue."""

    _outside_state = False

    def __init__(self, k: int | None, num_items: int, pad_id: int = -1, **kwargs: Any) -> None:
        super().__init__(k, num_items, pad_id, **kwargs)
        self.add_state("slot_counts", torch.zeros(num_items + 2, dtype=torch.float64), dist_reduce_fx="sum")

    @property
    def exposure(self) -> Tensor:
        """``[num_items]``: each item's number of appearances in a top-``k`` list so far (this process)."""
        return self.slot_counts[1:-1]

    def update(self, ranked_ids: Tensor) -> None:
        """Add a batch of ranked lists ``[B, K]``."""
        slots, first = self._slots(ranked_ids)
        self.slot_counts.index_add_(0, slots.reshape(-1), first.reshape(-1).to(torch.float64))

    def _ids_outside(self) -> Tensor:
        return self.slot_counts[0] + self.slot_counts[-1]

    def compute(self) -> Tensor:
        self._check_ids_seen()
        return self._from_exposure(self.exposure).to(torch.get_default_dtype())

    def _from_exposure(self, exposure: Tensor) -> Tensor:
        raise NotImplementedError


class Coverage(_ExposureMetric):
    """Catalogue coverage@k: the share of the ``num_items`` items that appear in at least one top-``k`` list.

    Example:
        >>> import torch
        >>> metric = Coverage(k=1, num_items=4)
        >>> metric.update(torch.tensor([[2, 0], [2, 1]]))
        >>> metric.compute()
        tensor(0.2500)
    """

    def _from_exposure(self, exposure: Tensor) -> Tensor:
        return (exposure > 0).sum(dtype=torch.float64) / self.num_items


class GiniIndex(_ExposureMetric):
    """Gini index of item exposure@k over the whole catalogue (0: equal exposure; near 1: a few items get all).

    Example:
        >>> import torch
        >>> metric = GiniIndex(k=1, num_items=2)
        >>> metric.update(torch.tensor([[0], [0]]))
        >>> metric.compute()  # one item of two gets every exposure
        tensor(0.5000)
    """

    higher_is_better = False

    def _from_exposure(self, exposure: Tensor) -> Tensor:
        ascending = exposure.sort().values
        rank = torch.arange(1, self.num_items + 1, dtype=torch.float64, device=exposure.device)
        weights = 2 * rank - self.num_items - 1
        return (weights * ascending).sum() / (self.num_items * ascending.sum())  # NaN before any exposure


class ExposureEntropy(_ExposureMetric):
    """Shannon entropy of item exposure@k, ``-sum_i p_i log p_i`` with ``p_i`` item i's share of all exposure.

    NaN before any exposure (no distribution, as :class:`GiniIndex`); ``+0.0`` when one item has all of it.

    Args:
        base: Logarithm base (default e; 2 gives bits). RecBole's ShannonEntropy is this value (base e) divided by
            the number of distinct items exposed.

    Example:
        >>> import torch
        >>> metric = ExposureEntropy(k=1, num_items=4, base=2)
        >>> metric.update(torch.tensor([[0], [1], [2], [3]]))
        >>> metric.compute()  # four items equally exposed: 2 bits
        tensor(2.)
    """

    plot_upper_bound = None

    def __init__(self, k: int | None, num_items: int, pad_id: int = -1, base: float = math.e, **kwargs: Any) -> None:
        super().__init__(k, num_items, pad_id, **kwargs)
        if isinstance(base, bool) or not isinstance(base, int | float) or base <= 0 or base == 1:
            raise ValueError(f"Argument `base` must be a positive number other than 1, got {base!r}.")
        self.base = float(base)

    def _from_exposure(self, exposure: Tensor) -> Tensor:
        total = exposure.sum()
        share = exposure / total
        terms = torch.where(exposure > 0, share * torch.log(torch.where(exposure > 0, share, 1.0)), 0.0)
        entropy = -terms.sum() / math.log(self.base) + 0.0  # + 0.0: the negated 0 of one item is -0.0, made +0.0
        return torch.where(total > 0, entropy, math.nan)


class _PerListMetric(_ListMetric):
    """The mean over lists of a per-list value: states ``[sum, count]`` (lists without a counted item skipped)."""

    def __init__(self, k: int | None, num_items: int, pad_id: int = -1, **kwargs: Any) -> None:
        super().__init__(k, num_items, pad_id, **kwargs)
        self.add_state("sums", torch.zeros(2, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, ranked_ids: Tensor) -> None:
        """Add a batch of ranked lists ``[B, K]``."""
        slots, counted = self._lists(ranked_ids)
        values, kept = self._per_list(slots, counted)
        self.sums += torch.stack([values.sum(), kept.sum()])  # values are 0 at lists not kept

    def compute(self) -> Tensor:
        self._check_ids_seen()
        return (self.sums[0] / self.sums[1]).to(torch.get_default_dtype())  # NaN before any list

    def _per_list(self, slots: Tensor, counted: Tensor) -> tuple[Tensor, Tensor]:
        """Per-list float64 values ``[B]`` (0 at lists left out) and which lists count ``[B]`` (float64 0/1)."""
        raise NotImplementedError


def _mean_over_list(slotted_values: Tensor, slots: Tensor, counted: Tensor) -> tuple[Tensor, Tensor]:
    """Mean of an item value (a slotted table) over each list's counted items; lists with none are left out."""
    n = counted.sum(1)
    total = (slotted_values.take(slots) * counted).sum(1)
    return total / n.clamp(min=1), (n > 0).to(torch.float64)


def _popularity(item_popularity: Tensor, num_items: int) -> Tensor:
    if not isinstance(item_popularity, Tensor) or item_popularity.shape != (num_items,):
        shown = tuple(item_popularity.shape) if isinstance(item_popularity, Tensor) else type(item_popularity).__name__
        raise ValueError(f"Argument `item_popularity` must be a tensor of shape ({num_items},), got {shown}.")
    return item_popularity.to(torch.float64)


class Novelty(_PerListMetric):
    """Mean self-information ``-log2 p_i`` of the items in each top-``k`` list, averaged over lists.

    Args:
        item_popularity: ``[num_items]`` share of users who interacted with each item (in ``(0, 1]``), e.g.
            training interactions per item divided by the number of users. Checked once, here.

    Example:
        >>> import torch
        >>> metric = Novelty(k=2, item_popularity=torch.tensor([0.5, 0.25, 0.125]))
        >>> metric.update(torch.tensor([[0, 1], [2, 2]]))
        >>> metric.compute()  # list 1: (1 + 2) / 2, list 2: 3
        tensor(2.2500)
    """

    higher_is_better = True
    plot_upper_bound = None

    def __init__(self, k: int | None, item_popularity: Tensor, pad_id: int = -1, **kwargs: Any) -> None:
        popularity = item_popularity if not isinstance(item_popularity, Tensor) else item_popularity.reshape(-1)
        num_items = popularity.shape[0] if isinstance(popularity, Tensor) else 0
        super().__init__(k, max(num_items, 1), pad_id, **kwargs)
        popularity = _popularity(popularity, num_items)
        if not bool(((popularity > 0) & (popularity <= 1)).all()):  # at construction, not in update
            raise ValueError("Argument `item_popularity` must hold shares in (0, 1] (smooth items never seen).")
        self.register_buffer("information", _slotted(-torch.log2(popularity)), persistent=False)

    def _per_list(self, slots: Tensor, counted: Tensor) -> tuple[Tensor, Tensor]:
        return _mean_over_list(self.information, slots, counted)


class AveragePopularity(_PerListMetric):
    """Mean popularity of the items in each top-``k`` list, averaged over lists (in the units given).

    Args:
        item_popularity: ``[num_items]`` popularity of each item, e.g. its number of training interactions.

    Example:
        >>> import torch
        >>> metric = AveragePopularity(k=2, item_popularity=torch.tensor([10.0, 4.0, 1.0]))
        >>> metric.update(torch.tensor([[0, 1], [2, -1]]))
        >>> metric.compute()  # (7 + 1) / 2
        tensor(4.)
    """

    higher_is_better = False
    plot_upper_bound = None

    def __init__(self, k: int | None, item_popularity: Tensor, pad_id: int = -1, **kwargs: Any) -> None:
        num_items = item_popularity.numel() if isinstance(item_popularity, Tensor) else 0
        super().__init__(k, max(num_items, 1), pad_id, **kwargs)
        self.register_buffer("popularity", _slotted(_popularity(item_popularity, num_items)), persistent=False)

    def _per_list(self, slots: Tensor, counted: Tensor) -> tuple[Tensor, Tensor]:
        return _mean_over_list(self.popularity, slots, counted)


class LongTailShare(_PerListMetric):
    """Share of each top-``k`` list's items in the long tail, averaged over lists.

    Args:
        long_tail: ``[num_items]`` bool, True for a long-tail item; or None with ``item_popularity``.
        item_popularity: ``[num_items]`` popularity; the tail is then the ``tail_ratio`` least popular share
            of the catalogue (``floor(tail_ratio * num_items)`` items of ``tail_ratio`` as written, exactly; ties by
            id), as RecBole's TailPercentage.
        tail_ratio: Share of the catalogue in the tail (default 0.8: the head is the 20% most popular items).

    Example:
        >>> import torch
        >>> metric = LongTailShare(k=2, long_tail=torch.tensor([False, True, True]))
        >>> metric.update(torch.tensor([[0, 1], [2, 1]]))
        >>> metric.compute()  # (1/2 + 2/2) / 2
        tensor(0.7500)
    """

    higher_is_better = True

    def __init__(
        self, k: int | None, long_tail: Tensor | None = None, *, item_popularity: Tensor | None = None,
        tail_ratio: float = 0.8, pad_id: int = -1, **kwargs: Any,
    ) -> None:
        if (long_tail is None) == (item_popularity is None):
            raise ValueError("Give exactly one of `long_tail` (a bool mask) and `item_popularity`.")
        if long_tail is not None:
            if not isinstance(long_tail, Tensor) or long_tail.dtype != torch.bool or long_tail.ndim != 1:
                raise ValueError("Argument `long_tail` must be a 1-D bool tensor (True: a long-tail item).")
            tail = long_tail
        else:
            if isinstance(tail_ratio, bool) or not isinstance(tail_ratio, numbers.Real) or not 0 <= tail_ratio <= 1:
                raise ValueError(f"Argument `tail_ratio` must be a number in [0, 1], got {tail_ratio!r}.")
            popularity = _popularity(item_popularity, item_popularity.numel())
            least = torch.argsort(popularity, stable=True)[: _tail_size(tail_ratio, popularity.numel())]
            tail = torch.zeros(popularity.numel(), dtype=torch.bool).index_fill_(0, least, True)
        super().__init__(k, max(tail.numel(), 1), pad_id, **kwargs)
        self.register_buffer("tail", _slotted(tail.to(torch.float64)), persistent=False)

    def _per_list(self, slots: Tensor, counted: Tensor) -> tuple[Tensor, Tensor]:
        return _mean_over_list(self.tail, slots, counted)


def _tail_size(tail_ratio: float, num_items: int) -> int:
    """``floor(tail_ratio * num_items)`` for the decimal ``tail_ratio`` prints as, in exact arithmetic.

    The float product rounds across integers (``0.58 * 100`` is ``57.99999999999999``, and the float 0.58 is below
    58/100 itself), and an epsilon added to it is wrong for products within the epsilon below an integer and too
    small for large catalogues. ``str`` of a float is the shortest decimal that reads back as it: the ratio as
    written (``0.58``), made an exact fraction.
    """
    return math.floor(Fraction(str(tail_ratio)) * num_items)


def _unit_rows(embeddings: Tensor) -> Tensor:
    """Each row divided by its length; an exactly zero row stays zero (distance 1 to every item).

    Only an exact zero is special: ``F.normalize`` divides by at least 1e-12, so a shorter row was no unit vector
    (``[1e-13, 0]`` and ``[1, 0]`` were 0.9 apart). Each row is first divided by its largest absolute entry, so
    that the squares of no nonzero row underflow to a zero length, or overflow to an infinite one.
    """
    if embeddings.shape[1] == 0:  # no coordinates: every row is the zero vector
        return embeddings
    scale = embeddings.abs().amax(1, keepdim=True)
    scaled = embeddings / torch.where(scale > 0, scale, 1.0)
    length = torch.linalg.vector_norm(scaled, dim=1, keepdim=True)
    return scaled / torch.where(length > 0, length, 1.0)


class IntraListDiversity(_PerListMetric):
    """Mean pairwise cosine distance ``1 - cos(e_i, e_j)`` between the items of each top-``k`` list, averaged
    over lists with at least two items. The sum over pairs is ``|sum_i e_i|^2 - sum_i |e_i|^2`` of unit vectors:
    memory ``[B, k, d]`` for a batch (no ``[B, k, k]`` similarities), time ``O(B k d)``.

    Args:
        item_embeddings: ``[num_items, d]`` item vectors (an exactly zero one has distance 1 to every item).

    Example:
        >>> import torch
        >>> embeddings = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        >>> metric = IntraListDiversity(k=2, item_embeddings=embeddings)
        >>> metric.update(torch.tensor([[0, 1], [0, 0]]))  # the second list has one distinct item: not counted
        >>> metric.compute()
        tensor(1.)
    """

    plot_upper_bound = 2.0

    def __init__(self, k: int | None, item_embeddings: Tensor, pad_id: int = -1, **kwargs: Any) -> None:
        if not isinstance(item_embeddings, Tensor) or item_embeddings.ndim != 2 \
                or not item_embeddings.is_floating_point():
            raise ValueError("Argument `item_embeddings` must be a [num_items, dim] float tensor.")
        super().__init__(k, item_embeddings.shape[0], pad_id, **kwargs)
        unit = _unit_rows(item_embeddings.detach().to(torch.float64))
        self.register_buffer("unit", _slotted(unit), persistent=False)

    def _per_list(self, slots: Tensor, counted: Tensor) -> tuple[Tensor, Tensor]:
        # the width named: a batch of no lists or no positions has no elements to infer it from
        vectors = self.unit.index_select(0, slots.reshape(-1)).view(*slots.shape, self.unit.shape[1])
        vectors = vectors * counted.unsqueeze(2)
        # sum over ordered pairs of distinct positions: |sum of vectors|^2 minus each vector's own |v|^2
        total = vectors.sum(1)
        off_diagonal = (total * total).sum(1) - (vectors * vectors).sum((1, 2))
        n = counted.sum(1)
        kept = (n >= 2).to(torch.float64)
        return (1 - off_diagonal / (n * (n - 1)).clamp(min=1)) * kept, kept


class Personalization(_ListMetric):
    """Inter-list diversity over an epoch: ``1 -`` the mean cosine similarity of every pair of users' top-``k``
    lists as binary item vectors (recmetrics' personalization), over all lists of all updates and processes.

    Exact in ``O(num_items)`` memory and ``O(B k)`` time per update, not ``O(U^2)``: the sum over all ordered
    pairs (u, v) of ``|L_u & L_v| / sqrt(|L_u| |L_v|)`` equals ``sum_i w_i^2`` with ``w_i = sum over lists
    holding i of 1 / sqrt(|L|)``; the ``U`` self-pairs (similarity 1) are subtracted and the rest divided by
    ``U (U - 1)``. ``w`` is a ``[num_items]`` sum state. NaN while fewer than 2 lists were counted (no pair).

    Example:
        >>> import torch
        >>> metric = Personalization(k=2, num_items=4)
        >>> metric.update(torch.tensor([[0, 1], [0, 2], [3, 2]]))
        >>> metric.compute()  # similarities 1/2, 0, 1/2: 1 - 1/3
        tensor(0.6667)
    """

    def __init__(self, k: int | None, num_items: int, pad_id: int = -1, **kwargs: Any) -> None:
        super().__init__(k, num_items, pad_id, **kwargs)
        self.add_state("weights", torch.zeros(num_items, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("lists", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, ranked_ids: Tensor) -> None:
        """Add a batch of ranked lists ``[B, K]`` (lists with no counted item are left out)."""
        slots, counted = self._lists(ranked_ids)
        n = counted.sum(1, keepdim=True)
        share = counted * n.clamp(min=1).rsqrt()  # 0 at the outer slots: items 0..num_items-1 get every share
        self.weights.index_add_(0, (slots.reshape(-1) - 1).clamp_(0, self.num_items - 1), share.reshape(-1))
        self.lists += (n > 0).sum()

    def compute(self) -> Tensor:
        self._check_ids_seen()
        users = self.lists
        similarity = ((self.weights**2).sum() - users) / (users * (users - 1))
        # with one list the rounding residue of sum w^2 - 1 over 0 is +-inf, not NaN: no pair, no value
        return torch.where(users >= 2, 1 - similarity, math.nan).to(torch.get_default_dtype())
