"""The numpy backend's 64-bit sort keys (ordered score bits high, the item index or the label low) sorted by numpy's
SIMD sort, and the selection of the items that can make each row's head (docs/backends.md)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from torchrank.functional._inputs import LARGE_BATCH_ITEMS, RankingInput
from torchrank.functional._ranked import _ROW_BLOCK_ITEMS, Ranking, _indices, _ranks_every_judged_item, row_blocks

# the low half of a label key per tie order: None keeps the label's bits (any order within a tie group will do:
# "average" averages it whole); else an ordered int32 xor this, read unsigned: ascending labels (pessimistic,
# lower labels first) or descending (optimistic)
_LABEL_FLIP = {"average": None, "pessimistic": -(2**31), "optimistic": 2**31 - 1}


def _packs(preds: Tensor) -> bool:
    """Whether the CPU key sort (:func:`_sorted_keys`) can rank ``preds``."""
    return preds.is_cpu and preds.dtype in _PACKABLE


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
        labels=labels.view(torch.float32), ideal_labels=inputs.ideal_target, ties=ties,
        valid=high != _INT32_MAX if padded else inputs.mask[:, : keys.shape[1]],  # padding's key
        relevance_threshold=relevance_threshold, backend=inputs.backend, all_valid=not padded,
        ranks_every_judged_item=_ranks_every_judged_item(inputs, keys.shape[1]),
    )


# score dtypes that float32 holds exactly, so that 32 bits of a sort key order them; the keys are built as
# little-endian int64 (low half first), so other byte orders take the argsort path
_PACKABLE = ((torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16)
             if sys.byteorder == "little" else ())
_INT32_MAX = 2**31 - 1
_LOW_HALF = 2**32 - 1  # an int64 key's item index
_PADDING_KEY = _INT32_MAX << 32  # the least key of padding (high half _INT32_MAX)


def _packed_sort(preds: Tensor, mask: Tensor | None, depth: int | None, finite: bool = False
                 ) -> tuple[Tensor, Tensor, bool]:
    """Stable descending order of each row of CPU scores (padding last) cut at ``depth``, by one sort of keys carrying
    each item's index (no gather); where a position holds the score of the one after it (:func:`_tied_neighbours`);
    and whether only the keys of the items that can make the head were built (:func:`_head_items`)."""
    seen = None if depth is None else depth + 1  # one past the cut-off, to see a tie across it
    keys = _sorted_keys(preds, mask, _write_item_indices, seen, finite=finite)
    tied = _tied_neighbours(keys, mask, seen)
    selected = keys.shape[1] < preds.shape[1]
    if depth is None:  # the keys become the order in place: no fresh 8-byte-per-item tensor to page in
        return keys.bitwise_and_(_LOW_HALF), tied, selected
    return keys[:, :depth] & _LOW_HALF, tied, selected


def _write_item_indices(out: Tensor, items: Tensor | None = None) -> None:
    """Write each item's index in its row into ``out`` (int32 ``[Q, N]``), or ``items`` (``[Q, C]``)."""
    out.copy_(_indices(out.shape[1], out.device, torch.int32) if items is None else items)


def _sorted_keys(preds: Tensor, mask: Tensor | None, write_low_halves: Callable[..., object], head: int | None = None,
                 finite: bool = False) -> Tensor:
    """Each row of int64 keys sorted ascending ``[Q, N]`` (with ``head``, where :func:`_selects_head`, the keys of only
    the items that can make it ``[Q, >=head]``): high halves ordered as the negated score (padding above every score),
    low halves written, read unsigned, by ``write_low_halves(out)`` into their strided int32 ``[Q, N]`` view, or by
    ``write_low_halves(out, items)`` for ``items`` ``[Q, C]``. ``finite``: the scores hold no NaN and no infinity."""
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

    def negated(rows: slice, block: np.ndarray) -> np.ndarray:  # 0 - x: -0.0 as 0.0 (equal keys)
        scores = preds[rows] if preds.dtype == torch.float32 else preds[rows].float()
        return np.subtract(0.0, scores.numpy(), out=block)

    _write_ordered_int32(negated, keys[:, :, 1], mask=mask)
    write_low_halves(keys[:, :, 0])
    keys = keys.view(torch.int64).view(q, n)
    keys.numpy().sort(axis=1)
    return keys


def _head_items(preds: Tensor, head: int, finite: bool = False) -> tuple[Tensor, Tensor | None] | None:
    """The items scoring at least the ``head``-th highest of each row of CPU ``preds`` (whole tie groups: their keys
    rank the head as every key would) ``[Q, C >= head]``, and which are real (None: exactly ``head`` in every row).
    None for a NaN (or both infinities), or a row (or a block's average) past ``1/_HEAD_RATIO`` of its length."""
    # a NaN orders nowhere: the keys rank it as they always have (``finite``: the input checks found neither)
    if not finite and bool(torch.isnan(preds.sum(dtype=torch.float32))):
        return None
    q, n = preds.shape
    found = []
    blocks = row_blocks(q, n, _ROW_BLOCK_ITEMS)
    scratch = np.empty((blocks[0].stop, n), np.int32)
    for rows in blocks:
        values = (preds[rows] if preds.dtype == torch.float32 else preds[rows].float()).numpy()
        block = _items_at_least_the_head(values, head, scratch[: rows.stop - rows.start])
        found.append(block + rows.start * n)
        if len(block) * _HEAD_RATIO > values.size:  # ties everywhere (few distinct scores): stop early
            return None
    flat = np.concatenate(found)
    row = flat // n
    if len(flat) == q * head:  # every row holds at least `head`: exactly `head` each
        return torch.from_numpy((flat - row * n).reshape(q, head)), None
    counts = np.bincount(row, minlength=q)
    at = np.arange(len(row)) - (np.cumsum(counts) - counts)[row]  # each item's place in its row
    width = int(counts.max())
    if width * _HEAD_RATIO > n:
        return None
    chosen = np.zeros((q, width), np.int64)
    real = np.zeros((q, width), bool)
    chosen[row, at] = flat - row * n
    real[row, at] = True
    return torch.from_numpy(chosen), torch.from_numpy(real)


def _items_at_least_the_head(values: np.ndarray, head: int, scratch: np.ndarray) -> np.ndarray:
    """The flat indices of the items of ``values`` (float32 ``[M, N]``) scoring at least the ``head``-th highest of
    their row: numpy's selection of it on the int32 that orders as each score does (``scratch``: ``[M, N]``)."""
    n = values.shape[1]
    _ordered_int32_into(values.view(np.int32), scratch)  # as in the keys
    scratch.partition(n - head, axis=1)
    lowest = np.empty(len(scratch), np.int32)
    _ordered_int32_into(scratch[:, n - head], lowest)  # its own inverse: back to float32 bits
    # as floats: -0.0 and 0.0 are kept together (their ordered ints differ, their keys do not)
    return np.flatnonzero(values >= lowest.view(np.float32)[:, None])


def _selects_head(head: int | None, n: int, items: int) -> bool:
    """Whether :func:`_sorted_keys` keys only the items that can make a ``head`` of unpadded rows of ``n`` items in a
    batch of ``items`` (a short head of long rows: the constants below)."""
    shortest = _SELECTION_MIN_ITEMS if items <= _SELECTION_LARGE_BATCH else _SELECTION_MIN_ITEMS_LARGE_BATCH
    return head is not None and n >= shortest and head * _HEAD_RATIO <= n


# :func:`_head_items` selects a head of at most 1/_HEAD_RATIO of each row, of rows at least this long, or this long in
# batches of more items, whose whole-row keys outgrow the cache (measured: benchmarks/notes/numpy_routes.md)
_HEAD_RATIO = 4
_SELECTION_MIN_ITEMS = 200
_SELECTION_MIN_ITEMS_LARGE_BATCH = 100
_SELECTION_LARGE_BATCH = 2**20


def _write_ordered_int32(
    floats: Callable[[slice, np.ndarray], np.ndarray], out: Tensor, flip: int = 0, mask: Tensor | None = None
) -> None:
    """Write into ``out`` (int32 ``[Q, N]``, strided) :func:`_ordered_int32` of the float32 values ``floats(rows,
    block)`` writes into ``block``, xor ``flip``; ``_INT32_MAX`` where ``mask`` is False. By blocks of rows through
    scratch arrays that stay in cache, not whole-batch temporaries (benchmarks/notes/code_comment_timings.md)."""
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
    """The int32 that orders as the float32 of ``bits`` does (negatives' magnitude bits flipped); its own inverse."""
    return (bits >> 31).bitwise_and_(_INT32_MAX).bitwise_xor_(bits)


def _tied_neighbours(keys: Tensor, mask: Tensor | None, width: int | None) -> Tensor:
    """Where a position of sorted keys (:func:`_sorted_keys`) holds the score of the one after it, over the first
    ``width`` positions (None: all) ``[Q, <=width]`` (0/1 bytes; the last column, past the pairs, 0)."""
    # the high halves copied out first: comparing contiguous int32 streams beats strided ones by more than the copy
    high = np.ascontiguousarray(keys[:, :width].numpy().view(np.int32)[:, 1::2])
    q, w = high.shape
    flat = high.reshape(-1)
    tied = np.empty(q * w, bool)
    # one pass over the rows laid end to end (benchmarks/notes/code_comment_timings.md)
    np.equal(flat[1:], flat[:-1], out=tied[:-1])
    if mask is not None:  # padding sorts last: a pair is real when its second item is
        tied[:-1] &= flat[1:] != _INT32_MAX
    tied = tied.reshape(q, w)
    tied[:, -1] = False  # each row's last position against the next row's first
    return torch.from_numpy(tied).view(torch.uint8)


def _negated_scores(preds: Tensor, mask: Tensor | None) -> Tensor | None:
    """``-preds`` in a float dtype that holds them exactly, NaN at padding (sorted last); None for int64 scores."""
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


def value_range(x: Tensor) -> tuple[float, float]:
    """The smallest and largest value of CPU ``x`` (NaN if it holds one), as Python numbers (ints exact). numpy's two
    SIMD reductions while ``x`` fits the caches; past them (the read is the cost) and for half floats (numpy reduces
    float16 elementwise) torch's one-pass ``aminmax``, which lacks uint16 to uint64 on CPU."""
    for dim, stride in enumerate(x.stride()):  # a broadcast dimension repeats one slice: read it once
        if stride == 0 and x.shape[dim] > 1:
            x = x.narrow(dim, 0, 1)
    wide_unsigned = x.dtype in (torch.uint16, torch.uint32, torch.uint64)
    if (x.numel() > LARGE_BATCH_ITEMS and not wide_unsigned) or x.dtype in (torch.float16, torch.bfloat16):
        low, high = torch.aminmax(x)
        return low.item(), high.item()
    values = x.numpy()
    return values.min().item(), values.max().item()
