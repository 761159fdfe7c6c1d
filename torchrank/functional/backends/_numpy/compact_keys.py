"""The numpy backend's 32-bit label keys (numpy sorts them faster than 64-bit ones) for CPU rows sorted whole: the
score's distance below the batch's top as an ordered integer, the label in the low bits."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from torchrank.functional._inputs import RankingInput, working_dtype
from torchrank.functional._ranked import _ROW_BLOCK_ITEMS, Ranking, _ranks_every_judged_item, row_blocks
from torchrank.functional.backends._numpy.keys import (
    _INT32_MAX,
    _LABEL_FLIP,
    _key_ranking,
    _ordered_int32_into,
    _sorted_keys,
    _tied_neighbours,
    _write_label_halves,
    value_range,
)
from torchrank.functional.backends._numpy.tied_rows import _MAX_TIED_SHARE, _select_rows, _set_rows_apart, rows_any

# labels of at most this many bits (0 .. 15) ride in the low bits of 32-bit keys (:func:`_compact_key_ranking`)
_COMPACT_LABEL_BITS = 4
# the low bits that are zero in the float32 of every score of these dtypes: dropped from a 32-bit key, they lose nothing
_ZERO_LOW_BITS = {
    torch.float32: 0, torch.float16: 13, torch.bfloat16: 16, torch.int16: 8, torch.int8: 16, torch.uint8: 16
}


class CompactKeys(NamedTuple):
    """Rows of 32-bit keys sorted ascending ``[Q, N]`` (uint32), their label ``bits``, whether every key kept its score
    whole (else equal keys may hold scores a few units in the last place apart), and padding's key (None: none)."""

    keys: np.ndarray
    bits: int
    whole: bool
    padding: int | None = None


def _compact_keys(inputs: RankingInput, optimistic: bool) -> CompactKeys | None:
    """32-bit keys for the CPU scores of ``inputs`` (a packable dtype) whose labels are integers 0 .. 15: each score's
    distance below the batch's highest, as an ordered integer, in the high bits, the label in the ``bits`` low ones
    (its complement to ``2 ** bits - 1`` when ``optimistic``: higher labels first in a tie); at padding, high bits all
    set and label 0. None where the labels are not such integers or a score is NaN, or where the distance, its lowest
    bits dropped, leaves equal keys of different labels in most rows of the first block (docs/backends.md)."""
    preds, target = inputs.preds, inputs.target
    mask = inputs.mask if inputs.padded else None
    low, high = inputs.score_range or value_range(preds)
    lowest_label, top_label = inputs.label_range or value_range(target)
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
    # allocated by torch, as the other large temporaries are: with np.empty, the 64-bit keys that rank crowded
    # scores after these gave way ran slower (benchmarks/notes/numpy_routes.md; cause not pinned down)
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
        np.copyto(codes[:m].view(np.int32), labels, casting="unsafe")  # via int32: numpy's cast to uint32 is slower
        if not inputs.integer_labels:  # float labels: whole numbers only
            np.copyto(scores[:m], codes[:m], casting="unsafe")
            if not np.array_equal(scores[:m], labels):
                return None
        if optimistic:
            np.subtract(2**bits - 1, codes[:m], out=codes[:m])
        np.bitwise_or(block, codes[:m], out=block)
        if mask is not None:
            np.copyto(block, padding, where=~mask[rows].numpy())
        block.sort(axis=1)  # while the block is in cache
        if extra and rows.start == 0 and len(blocks) > 1:  # scores packed too close for the bits kept?
            merged = _equal_high_bits(block, bits, None, differing_labels=True, padding=padding)
            if bool(rows_any(merged).sum() > _MAX_TIED_SHARE * len(block)):
                return None  # the dropped bits would send most rows to the 64-bit keys: they rank every row at once
    return CompactKeys(keys, bits, extra == 0, padding)


def _ordered_float32(value: float) -> int:
    """:func:`_ordered_int32` of one float32."""
    bits = int(np.array(value, np.float32).view(np.int32))
    return bits ^ (bits >> 31 & _INT32_MAX)


def _compact_key_ranking(inputs: RankingInput, ties: str, relevance_threshold: float, width: int, seen: int | None
                         ) -> Ranking | None:
    """The ranking of one sort of 32-bit keys (:func:`_compact_keys`) of whole rows, cut at ``width`` (``seen``: one
    more, or None); None where such keys do not apply. The rows with a tie that matters are set apart, or, where the
    keys dropped bits, ranked again by 64-bit keys."""
    compact = _compact_keys(inputs, ties == "optimistic")
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
            valid=of.mask[:, :cut] if padding is None else own != padding_signed, ideal_labels=of.ideal_target,
            ties=tie_order, relevance_threshold=relevance_threshold, backend=inputs.backend,
            all_valid=padding is None, ranks_every_judged_item=_ranks_every_judged_item(of, cut),
        )

    if whole and ties != "average":  # every tie group ordered by label in the one sort
        return ranking(None, ties, width)
    pairs = _equal_high_bits(keys, bits, seen, differing_labels=not whole, padding=padding)
    if not pairs.numpy().any():  # no row holds a tie that matters (continuous scores, mostly): one ranking
        return ranking(None, "first", width)
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
    """Rank ``rows`` of ``main`` (a compact-key ranking of ``inputs``) again by 64-bit label keys, every score whole:
    their labels replace the compact keys', their ties under ``"average"`` set apart (:func:`_set_rows_apart`)."""
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


def _equal_high_bits(keys: np.ndarray, bits: int, width: int | None, differing_labels: bool, padding: int | None = None
                     ) -> Tensor:
    """Where a position of sorted compact keys holds the score of the one after it, over the first ``width`` positions
    (None: all) ``[Q, <=width]`` (0/1 bytes; the last column 0), never where the second is padding (key ``padding``).
    With ``differing_labels``, only where the labels differ too, or across the cut-off (positions ``width - 2`` and
    ``width - 1``: the group may hold items past ``width`` of any label)."""
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
