"""The numpy backend's matching of id lists (:mod:`torchrank.functional.ids`): one sort-merge per query of packed
keys in numpy's SIMD sort, by blocks of rows that stay in cache, and the first occurrences of ids by one sort of
packed keys."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from torchrank.functional._inputs import is_integer_tensor
from torchrank.functional.backends._numpy.keys import value_range

# first_occurrence sorts CPU batches of at least this many ids with numpy (below it, numpy's per-call costs
# outweigh torch's slower sort of short rows: benchmarks/bench_recommenders.py, one update of a collected epoch)
_NUMPY_FIRST_MIN_IDS = 2**13
# keys per block of rows in the numpy matching: about 512 KiB of int32 keys, which stay in a core's cache
_NUMPY_BLOCK_KEYS = 2**17


def _match_numpy(
    ranked_ids: Tensor, relevant_ids: Tensor, relevant_labels: Tensor | None, pad_id: int, mask: Tensor,
) -> tuple[Tensor, Tensor] | None:
    """``(target [B, K], ideal [B, M])`` of CPU tensors by one sort-merge per query (docs/backends.md, "Id matching"):
    each entry a key ``(id - lowest id) << s | is_ranked << (l + b) | label << b | position``, a ranked entry a hit
    where its left neighbour is a relevant entry of its id. None where the keys need more than 64 bits or graded
    labels are not non-negative integers (the torch path then)."""
    ranked, relevant = ranked_ids.numpy(), relevant_ids.numpy()
    batch, k = ranked.shape
    m = relevant.shape[1]
    label_dtype = relevant_ids.dtype if relevant_labels is None else relevant_labels.dtype
    if batch == 0:
        return torch.zeros(0, k, dtype=label_dtype), torch.zeros(0, m, dtype=label_dtype)
    labels, label_bits = None, 0
    if relevant_labels is not None:
        if not is_integer_tensor(relevant_labels):
            return None
        labels = relevant_labels.numpy()
        low, high = value_range(relevant_labels)
        if low < 0:
            return None
        label_bits = high.bit_length()
    (low_ranked, high_ranked), (low_relevant, high_relevant) = value_range(ranked_ids), value_range(relevant_ids)
    lowest = min(low_ranked, low_relevant)
    width = m + k
    span = max(high_ranked, high_relevant) - lowest + width  # the padding's ids after the others
    bits = max(1, (max(k, m) - 1).bit_length())  # a position
    side = bits + label_bits  # the bit that tells a ranked entry
    shift = side + 1
    key_dtype = _key_dtype(span, shift)
    if key_dtype is None:
        return None
    # a column's constant is added in one pass (a label, if any, in another)
    raw_tags = [*range(m), *((1 << side) | j for j in range(k))]
    tags = _wrapped([t - (lowest << shift) for t in raw_tags], key_dtype)
    pad_keys = np.array([(span - column << shift) + t for column, t in enumerate(raw_tags)], dtype=key_dtype)
    position_mask, label_mask = (1 << bits) - 1, (1 << label_bits) - 1
    padding = relevant == pad_id
    real = mask.numpy()
    ranked_padding = None if real.all() else ~real
    target = np.empty((batch, k), dtype=torch.empty(0, dtype=label_dtype).numpy().dtype)  # zeroed block by block, below
    if labels is None:
        distinct = m - np.count_nonzero(padding, axis=1)  # R, less the repeats found below
    else:
        ideal = np.where(padding, 0, labels)
    # rows in blocks whose keys stay in cache (each step reads what the one before wrote)
    rows_per_block = max(1, _NUMPY_BLOCK_KEYS // width)
    keys = np.empty((min(batch, rows_per_block), width), dtype=key_dtype)
    for start in range(0, batch, rows_per_block):
        stop = min(batch, start + rows_per_block)
        block = keys[: stop - start]
        block[:, :m] = relevant[start:stop]  # numpy's casts wrap: the key arithmetic above undoes it
        block[:, m:] = ranked[start:stop]
        block <<= shift
        block += tags
        if labels is not None:
            block[:, :m] |= labels[start:stop].astype(key_dtype) << bits
        np.copyto(block[:, :m], pad_keys[:m], where=padding[start:stop])
        if ranked_padding is not None:
            np.copyto(block[:, m:], pad_keys[m:], where=ranked_padding[start:stop])
        block.sort(axis=1)
        merged = block.reshape(-1)
        pairs = merged[1:] ^ merged[:-1]
        pairs >>= side  # 0: same id, same side; 1: same id, relevant then ranked; more: another id (keys are >= 0)
        pairs[width - 1 :: width] = 2  # a pair across two rows: never the same query's id
        near = np.flatnonzero(pairs <= 1)  # the entries followed by one of their id: one scan finds both kinds
        hit = pairs[near] == 1
        left = near[hit]
        at = (left // width + start) * k + (merged[left + 1] & position_mask)
        target[start:stop] = 0  # here, not in one np.zeros: the rows are still in cache for the scatter
        # the labels cast before the scatter: numpy's fancy assignment casts element by element
        target.reshape(-1)[at] = 1 if labels is None else ((merged[left] >> bits) & label_mask).astype(target.dtype)
        first = near[~hit]  # a repeated id: the relevant entries before another of their id
        entry = merged[first]
        repeat = (entry & (1 << side)) == 0
        rows, entry = first[repeat] // width + start, entry[repeat]
        if labels is None:
            np.subtract.at(distinct, rows, 1)
        else:
            ideal[rows, entry & position_mask] = 0
    if labels is None:  # binary ideal: R ones, R the distinct relevant ids (row r of the table: r ones, then 0s)
        ideal = np.take(np.tri(m + 1, m, -1, dtype=target.dtype), distinct, axis=0)
    return torch.from_numpy(target), torch.from_numpy(ideal)


def _first_numpy(ids: Tensor) -> Tensor | None:
    """:func:`first_occurrence` before the padding check, by numpy's sort of keys ``(id - lowest) << b |
    position``; None when the ids span more than an int64 key holds."""
    x = ids.numpy()
    k = x.shape[1]
    lowest = int(x.min())
    bits = max(1, (k - 1).bit_length())
    key_dtype = _key_dtype(int(x.max()) - lowest, bits)
    if key_dtype is None:
        return None
    keys = x.astype(key_dtype)  # wraps like the key arithmetic, which undoes it
    keys <<= bits
    keys += _wrapped([j - (lowest << bits) for j in range(k)], key_dtype)
    keys.sort(axis=1)
    merged = keys.reshape(-1)
    repeat = np.flatnonzero((merged[1:] >> bits) == (merged[:-1] >> bits)) + 1  # a copy after its id's first
    repeat = repeat[repeat % k != 0]  # not across two rows
    first = np.ones(x.shape, dtype=bool)
    first.reshape(-1)[repeat // k * k + (merged[repeat] & ((1 << bits) - 1))] = False
    return torch.from_numpy(first)


def _key_dtype(span: int, shift: int) -> type | None:
    """int32 keys where a span of ``span`` ids shifted by ``shift`` fit (faster to sort), else int64, or None."""
    return np.int32 if span < 2 ** (31 - shift) else np.int64 if span < 2 ** (63 - shift) else None


def _wrapped(tags: list[int], key_dtype: type) -> np.ndarray:
    """``tags`` wrapped as the ids' cast wraps: ``(id << shift) + tag`` is then exact, the true key fitting the type."""
    bits = np.iinfo(key_dtype).bits
    return np.array([(t + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1) for t in tags], dtype=key_dtype)
