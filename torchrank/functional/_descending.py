"""CPU rows sorted descending (:func:`descending_rows`: the numpy backend's ideal ranking, for
:meth:`~torchrank.functional._ranked.Ranking.ideal_gains`), and the thresholds where a selection of each row's head,
or torch's partial top-k, beats sorting whole rows, which the numpy backend's key sort shares."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

# torch.topk(k) on CPU partially sorts each row while k * 64 <= its length, and past that selects then sorts the k,
# slower (benchmarks/notes/numpy_routes.md)
_CPU_PARTIAL_TOPK_RATIO = 64


def _cpu_topk_is_partial(k: int, n: int) -> bool:
    """Whether torch.topk(k) of rows of ``n`` on CPU takes its partial sort (its fast regime)."""
    return k * _CPU_PARTIAL_TOPK_RATIO <= n


def _partitioned(head: int | None, n: int) -> bool:
    """Whether :func:`._numpy_keys._sorted_keys` sorts only a head of ``head`` positions of rows of ``n`` keys: a
    selection, then a sort of the head, costs less than sorting whole rows once the head is under 1/_PARTITION_RATIO
    of them."""
    return head is not None and n >= _PARTITION_MIN_ITEMS and head * _PARTITION_RATIO <= n


# a head of at most 1/_PARTITION_RATIO of each row is selected and sorted rather than whole rows sorted
_PARTITION_RATIO = 4
# rows shorter than this are sorted whole: the selection stops paying (benchmarks/notes/numpy_routes.md)
_PARTITION_MIN_ITEMS = 400


def _nonnegative_head(values: np.ndarray, depth: int | None, select: bool = True) -> np.ndarray | None:
    """The ``depth`` largest of each row of float ``values`` (all for None) in descending order ``[Q, <=M]``, selected
    and sorted (``select``), or sorted whole, as the integers of their bits; None where a value has its sign bit set
    (the bits then do not order as the values).

    Non-negative floats order as their bits read as signed integers, which numpy selects with SIMD about twice as
    fast as the floats (and sorting whole rows costs twice that again). Negated (no overflow: the sign bit is
    clear), the largest come first in an ascending selection or sort, with no reversed copy (figures:
    benchmarks/notes/numpy_routes.md).
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


def descending_rows(values: Tensor, depth: int | None) -> Tensor:
    """Each row of ``values`` sorted descending, the first ``depth`` (all for None) ``[Q, <=M]``: the ideal ranking's
    labels or gains (the numpy backend's :meth:`~torchrank.functional.backends.Backend.descending`, and the losses'
    :func:`~torchrank.functional.core.ideal_dcg`), by the fastest route on a CPU; torch's elsewhere, and under
    ``torch.compile``, which cannot trace numpy's (the values are the same: a sort has one answer)."""
    if not values.is_cpu or torch.compiler.is_compiling():
        if depth is not None and depth < values.shape[1]:
            return torch.topk(values, depth, dim=1).values
        return torch.sort(values, dim=1, descending=True).values
    if values.dtype in (torch.float32, torch.float64):
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
