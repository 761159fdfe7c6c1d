"""The triton backend: one fused kernel ranks each list in registers and computes every measure asked of it.

One program per list reads its scores and labels once and writes each requested measure at each cut-off (NDCG, DCG,
P, R, F1, success, AP, RR, ERR, R-precision, first relevant position, mean rank, RBP), the empty-query fill applied:
per-query values ready to reduce. :func:`launch_config` picks one of three paths per request: whole-list counts
(nothing ranked), selection of the top positions by rounds of max where every cut-off is at most
:data:`SELECT_DEPTH` (:mod:`~torchrank.functional.backends._triton.select`), else a sort of one 64-bit key per
item (the score's ordered bits, then the label's, or the index under ``ties="first"``) and of the judged labels.
``ties="average"`` takes the torch backend's closed forms per tie group (group means for gains and hits, McSherry
and Najork's expectations for AP and RR); the values equal the torch backend's (the suite runs both under
``TRITON_INTERPRET=1``). benchmarks/kernel_report.py compiles each variant ahead of time. Requests
:func:`~torchrank.functional._measure.fused_columns` does not cover, float64 scores, flat input and lists past
:data:`~torchrank.functional.backends.TRITON_MAX_ITEMS` run on the torch backend.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from torchrank.functional._fused_columns import (
    AP,
    DCG,
    DCG_EXP,
    ERR,
    F1,
    FRP,
    NDCG,
    NDCG_EXP,
    PRECISION,
    RBP,
    RECALL,
    RPREC,
    RR,
    SUCCESS,
    TRITON_MAX_ITEMS,
    Column,
)

# the deepest cut-off the kernel reaches by selection rather than a sort (see select.py and docs/backends.md)
SELECT_DEPTH = 64
TIE_CODES = {"first": 0, "average": 1, "optimistic": 2, "pessimistic": 3}
SCORE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# the measures whose whole-list value needs no ranking: the relevant count (P, R, F1), the best relevant item's tie
# group and the items above it (RR, success, first relevant position), the score at rank R (R-precision)
_COUNTED = (PRECISION, RECALL, F1, SUCCESS, RR, FRP, RPREC)
_FILL = {"neg": 0.0, "pos": 1.0, "skip": float("nan")}


def fits(preds: Tensor, target: Tensor, ideal_target: Tensor | None) -> bool:
    """Whether the kernel takes this input: dense rows of at most TRITON_MAX_ITEMS, scores it ranks exactly."""
    n, m = preds.shape[-1], (preds if ideal_target is None else ideal_target).shape[-1]
    wide = torch.float64 in (target.dtype, getattr(ideal_target, "dtype", None))
    return preds.dtype in SCORE_DTYPES and not wide and 0 < n <= TRITON_MAX_ITEMS and 0 < m <= TRITON_MAX_ITEMS


def fused_values(
    preds: Tensor, target: Tensor, columns: list[Column], *, mask: Tensor | None, ideal_target: Tensor | None,
    ties: str, relevance_threshold: float, empty_target_action: str, check_values: bool = False,
) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    """Per-query values ``[Q, len(columns)]`` (float32) of dense ``[..., N]`` input, queries without a relevant item
    filled as ``empty_target_action`` says; for ``"error"``, also the flags ``[Q, len(columns)]`` of those queries
    (the caller reads them), else None; and for ERR under ``"average"``, the lists ``[Q]`` (bool) whose ERR the
    kernel left to the caller: a tie group there holds different labels, whose expectation is a dynamic program over
    the group (the torch backend's), else None; with ``check_values``, the value checks' flags ``[4]`` (bool, in
    ``VALUE_PROBLEMS``' order: NaN scores, NaN or infinite labels, negative labels, NaN, infinite or negative ideal
    labels), found by the kernel as it reads the input (no pass of its own), else None."""
    n, device = preds.shape[-1], preds.device
    preds2, target2 = _rows(preds, n), _bytes(_rows(target, n))
    mask2 = preds2 if mask is None else _rows(mask, n)  # the kernel reads no mask, nor ideal row, it is not given
    ideal2 = preds2 if ideal_target is None else _bytes(_rows(ideal_target, ideal_target.shape[-1]))
    q, m = preds2.shape[0], ideal2.shape[1]
    out = torch.empty(q, len(columns), dtype=torch.float32, device=device)
    errors = empty_target_action == "error"
    flags = torch.empty(q, len(columns), dtype=torch.uint8, device=device) if errors else out
    cuts = _constant(tuple(c.k for c in columns), torch.int32, device)
    config = launch_config(columns, n=n, m=m, ties=ties, has_mask=mask is not None,
                           has_ideal=ideal_target is not None, errors=errors, check_values=check_values)
    mixed = torch.empty(q, dtype=torch.uint8, device=device) if config["WRITE_MIXED"] else out
    problems = torch.zeros(1, dtype=torch.int32, device=device) if check_values else cuts
    fused_kernel[(q,)](
        preds2, target2, mask2, ideal2, cuts, _constant(tuple((c.p, c.top) for c in columns), torch.float32, device),
        out, flags, mixed, problems, n, m, preds2.stride(0), target2.stride(0), mask2.stride(0), ideal2.stride(0),
        float(relevance_threshold), _FILL.get(empty_target_action, 0.0), max(c.k for c in columns), **config,
    )
    found = (problems & _constant((1, 2, 4, 8), torch.int32, device)) != 0 if check_values else None
    return out, (flags.bool() if errors else None), (mixed.bool() if config["WRITE_MIXED"] else None), found


def launch_config(
    columns: list[Column], *, n: int, m: int, ties: str, has_mask: bool, has_ideal: bool, errors: bool,
    check_values: bool,
) -> dict[str, object]:
    """The kernel's compile-time arguments (its constexprs and ``num_warps``) for a request: one compiled variant per
    distinct answer. The dispatcher launches with it, and ``benchmarks.kernel_report`` compiles what it returns, so
    the report covers exactly the variants a call can launch."""
    codes = tuple(c.code for c in columns)
    block = triton.next_power_of_2(n)
    depth, counts = selection_depth(columns), all(c.k == 0 and c.code in _COUNTED for c in columns)
    return dict(
        CODES=_pack(codes), NUM_COLS=len(columns), BLOCK=block, IDEAL_BLOCK=triton.next_power_of_2(m),
        HAS_MASK=has_mask, HAS_IDEAL=has_ideal, TIES=TIE_CODES[ties],
        NEED_GAIN=any(c in (DCG, NDCG) for c in codes), NEED_EXP=any(c in (DCG_EXP, NDCG_EXP) for c in codes),
        NEED_AP=AP in codes, NEED_RR=any(c in (RR, SUCCESS, FRP) for c in codes), NEED_ERR=ERR in codes,
        NEED_RBP=RBP in codes, RPREC_THRESHOLD=RPREC in codes and (counts or depth > 0),
        WRITE_FLAGS=errors, WRITE_MIXED=ties == "average" and ERR in codes, CHECK_VALUES=check_values,
        DEPTH=depth, COUNTS=counts,
        num_warps=4 if block <= 1024 else 8,
    )


def selection_depth(columns: list[Column]) -> int:
    """The positions the kernel selects by rounds of max (a power of two), or 0 where it sorts the whole list: a
    request whose every column reads a cut-off of at most :data:`SELECT_DEPTH` (R-precision, a threshold, reads
    none)."""
    ks = [c.k for c in columns if c.code != RPREC]
    if 0 in ks or max(ks, default=0) > SELECT_DEPTH:
        return 0
    return max(16, triton.next_power_of_2(max(ks, default=1)))


def _pack(codes: tuple[int, ...]) -> int:
    """The column codes as one integer, eight bits each (a constexpr the kernel unpacks at compile time)."""
    if any(not 0 <= code < 256 for code in codes):
        raise ValueError(f"A fused column code must fit in 8 bits, got {codes}.")
    return sum(code << (8 * j) for j, code in enumerate(codes))


def _rows(x: Tensor, width: int) -> Tensor:
    x = x.reshape(-1, width)
    return x if x.stride(-1) == 1 else x.contiguous()


def _bytes(labels: Tensor) -> Tensor:
    return labels.view(torch.uint8) if labels.dtype == torch.bool else labels


@functools.lru_cache(maxsize=128)
def _constant(values: tuple, dtype: torch.dtype, device: torch.device) -> Tensor:
    """A small tensor the kernel reads and never writes (cut-offs, RBP's parameters, problem bits), made once."""
    return torch.tensor(values, dtype=dtype, device=device)


try:  # the triton backend's compiler (or its CPU interpreter); the other backends run without it
    import triton
    import triton.language as tl
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    # what a triton version or device that cannot build or run the kernel raises: the call then runs on torch
    KERNEL_ERRORS: tuple[type[Exception], ...] = (CompilationError, OutOfResources)
except ImportError:  # pragma: no cover - checked by backends.triton_available before any use
    triton = None
    KERNEL_ERRORS = ()

if triton is not None:
    from torchrank.functional.backends._triton.select import (
        ap_terms,
        first_relevant_counts,
        first_relevant_probability,
        hits_at_r,
        select_ideal,
        select_top,
    )

    @triton.jit
    def _max_combine(a, b):
        return tl.maximum(a, b)

    @triton.jit
    def _min_combine(a, b):
        return tl.minimum(a, b)

    @triton.jit
    def _ordered(bits):
        # float bits as integers that order as the floats (negative floats: every bit but the sign flipped)
        return bits ^ ((bits >> 31) & 0x7FFFFFFF)

    @triton.jit
    def _group_sum(values, cumulative, start, end):
        # the sum of values over each position's tie group, from their running sum
        return tl.gather(cumulative, end, 0) - tl.gather(cumulative, start, 0) + tl.gather(values, start, 0)

    @triton.jit
    def _judged(labels, real, pos, ideal_row, m, threshold, IDEAL_BLOCK: tl.constexpr, HAS_IDEAL: tl.constexpr):
        # the judged labels (ideal_target's row, else the list's) with R, the largest judged and listed labels, the
        # scale of the exponential gains, the listed items' count, and the ideal's value-check bit (NaN, inf, < 0)
        top_label = tl.max(labels, 0)  # padding reads 0
        num_valid = tl.sum(real.to(tl.int32), 0)
        if HAS_IDEAL:
            ipos = tl.arange(0, IDEAL_BLOCK)
            judged = ipos < m
            ideal = tl.load(ideal_row + ipos, mask=judged, other=0).to(tl.float32)
            ideal_bits = tl.max(((ideal < 0) | (ideal * 0.0 != 0.0)).to(tl.int32), 0)
        else:
            ipos = pos
            judged = real
            ideal = labels
            ideal_bits = num_valid * 0
        num_relevant = tl.sum(tl.where(ideal >= threshold, 1.0, 0.0), 0)
        top_ideal = tl.max(ideal, 0)
        # exponential gains as (2^label - 1) / 2^scale (the largest label): NDCG's ratio unchanged, no overflow
        scale = tl.maximum(tl.maximum(top_ideal, top_label), 0.0)
        return ipos, judged, ideal, num_relevant, top_ideal, top_label, scale, num_valid, ideal_bits

    @triton.jit
    def _ideal_dcg(ideal, ipos, scale, NEED_GAIN: tl.constexpr, NEED_EXP: tl.constexpr, SORT: tl.constexpr):
        # the ideal DCG at each depth, both gains (zeros where not asked), of the judged labels (sorted here with
        # SORT, else already in descending order)
        ideal_discount = 0.6931471805599453 / tl.log((ipos + 2).to(tl.float32))
        ideal_dcg = tl.zeros_like(ideal_discount)
        ideal_dcg_exp = ideal_dcg
        if NEED_GAIN or NEED_EXP:
            ideal_sorted = ideal
            if SORT:
                ideal_sorted = tl.sort(ideal, 0, descending=True)
            if NEED_GAIN:
                ideal_dcg = tl.cumsum(ideal_sorted * ideal_discount, 0)
            if NEED_EXP:
                ideal_dcg_exp = tl.cumsum((tl.exp2(ideal_sorted - scale) - tl.exp2(-scale)) * ideal_discount, 0)
        return ideal_dcg, ideal_dcg_exp

    @triton.jit
    def _first_relevant_sums(first_probability, rank):
        # P(found in the top i), E[1/rank; found], E[rank; found] at each depth, from P(first relevant at i)
        found = tl.cumsum(first_probability, 0)
        rr = tl.cumsum(first_probability / rank, 0)
        return found, rr, tl.cumsum(first_probability * rank, 0)

    @triton.jit
    def _err_sums(ranked, valid, at, rank, scale):
        # ERR at each depth of the order as given: exact where no tie group holds different labels
        top = tl.where(scale > 0, scale, 1.0)
        stop = tl.where(valid, tl.exp2(ranked - top) - tl.exp2(-top), 0.0)  # (2^g - 1) / 2^top, no overflow
        # the exclusive product of (1 - stop) above each position (a stop probability can round to 1)
        survive = tl.cumprod(1.0 - stop, 0)
        reach = tl.where(at == 0, 1.0, tl.gather(survive, tl.maximum(at - 1, 0), 0))
        return tl.cumsum(reach * stop / rank, 0)

    @triton.jit
    def _read(cum, pos, k, last):
        # a cumulative quantity at cut-off k (0: the whole list, read at the last position)
        at = tl.where(k > 0, tl.minimum(k, last + 1) - 1, last)
        return tl.sum(tl.where(pos == at, cum, 0.0), 0)

    @triton.jit
    def fused_kernel(
        preds_ptr, target_ptr, mask_ptr, ideal_ptr, cuts_ptr, rbp_ptr, out_ptr, flags_ptr, mixed_ptr, problems_ptr,
        n, m, preds_stride, target_stride, mask_stride, ideal_stride, threshold, fill, deepest,
        CODES: tl.constexpr, NUM_COLS: tl.constexpr, BLOCK: tl.constexpr, IDEAL_BLOCK: tl.constexpr,
        HAS_MASK: tl.constexpr, HAS_IDEAL: tl.constexpr, TIES: tl.constexpr,
        NEED_GAIN: tl.constexpr, NEED_EXP: tl.constexpr, NEED_AP: tl.constexpr, NEED_RR: tl.constexpr,
        NEED_ERR: tl.constexpr, NEED_RBP: tl.constexpr, WRITE_FLAGS: tl.constexpr, WRITE_MIXED: tl.constexpr,
        CHECK_VALUES: tl.constexpr, DEPTH: tl.constexpr, COUNTS: tl.constexpr, RPREC_THRESHOLD: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        pos = tl.arange(0, BLOCK)
        inside = pos < n
        real = inside
        if HAS_MASK:
            real = inside & (tl.load(mask_ptr + row * mask_stride + pos, mask=inside, other=0) != 0)
        scores = tl.load(preds_ptr + row * preds_stride + pos, mask=inside, other=0.0).to(tl.float32)
        scores = scores + 0.0  # -0.0 becomes 0.0: equal scores, one key
        labels = tl.load(target_ptr + row * target_stride + pos, mask=inside, other=0).to(tl.float32)
        if CHECK_VALUES:  # the value checks, on what this program reads anyway (padded items count, as elsewhere)
            bits = tl.max((scores != scores).to(tl.int32), 0)
            # x * 0 is 0 for every finite x, NaN for NaN and for an infinity: one test for both (no inf constant)
            bits |= tl.max((labels * 0.0 != 0.0).to(tl.int32), 0) << 1
            bits |= tl.max((labels < 0).to(tl.int32), 0) << 2
            # written now, not live across the sort or the selection rounds (ptxas spilled them there)
            tl.atomic_or(problems_ptr, bits, mask=bits != 0)
            bits = bits * 0
        labels = tl.where(real, labels, 0.0)
        keys = _ordered(scores.to(tl.int32, bitcast=True))

        # every quantity a column may read is defined whatever is asked: some triton versions compile each column's
        # branches even where its code (a constexpr) rules them out
        if COUNTS:  # whole-list P, R, F1, RR, success, first relevant position only: counts, no ranking
            ipos, judged, ideal, num_relevant, top_ideal, top_label, scale, num_valid, ideal_bits = _judged(
                labels, real, pos, ideal_ptr + row * ideal_stride, m, threshold, IDEAL_BLOCK, HAS_IDEAL)
            p_found, e_rr, e_rank = first_relevant_counts(keys, labels, real, pos, threshold, BLOCK, TIES)
            at = tl.arange(0, 16)  # the whole-list value at position 0, read there (k = 0 reads `last`)
            zeros = tl.zeros([16], tl.float32)
            last, ilast, iat, rank, mixed = 0, 0, at, (at + 1).to(tl.float32), num_valid < 0
            found, rr = tl.where(at == 0, p_found, zeros), tl.where(at == 0, e_rr, zeros)
            first_position = tl.where(at == 0, e_rank, zeros)
            hits = tl.where(at == 0, tl.sum(tl.where(real & (labels >= threshold), 1.0, 0.0), 0), zeros)
            r_hits = num_relevant * 0.0  # R-precision's, below
            rank_sum, dcg, dcg_exp, ap, err = zeros, zeros, zeros, zeros, zeros
            graded, ideal_dcg, ideal_dcg_exp = zeros, zeros, zeros
        elif DEPTH == 0:  # the whole order: one sort of every item's key
            at = pos
            last = BLOCK - 1
            # ordered score bits high, then the tie-break: the label's ordered bits (ties that "average" averages
            # whole, or orders by label) or the reversed index ("first": input order)
            high = keys.to(tl.int64) << 32
            if TIES == 0:
                low = (BLOCK - 1 - pos).to(tl.int64)
            elif TIES == 3:
                low = (0x7FFFFFFF - _ordered(labels.to(tl.int32, bitcast=True))).to(tl.int64) + 0x80000000
            else:
                low = _ordered(labels.to(tl.int32, bitcast=True)).to(tl.int64) + 0x80000000
            packed = tl.where(real, high | low, -0x7FFFFFFFFFFFFFFF - 1)  # padding: the least key, sorted last
            packed = tl.sort(packed, 0, descending=True)
            # the judged labels' counts after the sort, not live across it (registers)
            ipos, judged, ideal, num_relevant, top_ideal, top_label, scale, num_valid, ideal_bits = _judged(
                labels, real, pos, ideal_ptr + row * ideal_stride, m, threshold, IDEAL_BLOCK, HAS_IDEAL)
            mixed = num_valid < 0  # False, as a tensor both branches can assign
            iat = ipos
            ilast = IDEAL_BLOCK - 1
            valid = packed != -0x7FFFFFFFFFFFFFFF - 1
            if TIES == 0:
                index = (BLOCK - 1 - (packed & 0xFFFFFFFF)).to(tl.int32)
                ranked = tl.load(target_ptr + row * target_stride + index, mask=valid, other=0).to(tl.float32)
            else:
                lab = ((packed & 0xFFFFFFFF) - 0x80000000).to(tl.int32)
                if TIES == 3:
                    lab = 0x7FFFFFFF - lab
                ranked = _ordered(lab).to(tl.float32, bitcast=True)
            ranked = tl.where(valid, ranked, 0.0)
            rank = (pos + 1).to(tl.float32)
            relevant = tl.where(ranked >= threshold, 1.0, 0.0)

            # tie groups ("average" only, and only in lists holding a tie): where each position's group starts and
            # ends, its size, and sums over it; elsewhere every position is a group of its own
            hits_cum = tl.cumsum(relevant, 0)
            start, end = pos, pos
            size = tl.full([BLOCK], 1.0, tl.float32)
            group_relevant = relevant
            starts_group = pos >= 0
            if TIES == 1:
                score_bits = packed >> 32
                previous = tl.gather(score_bits, tl.maximum(pos - 1, 0), 0)
                starts_group = (pos == 0) | (previous != score_bits) | ~valid
            tied = tl.sum((~starts_group).to(tl.int32), 0) > 0  # False but under "average"
            if tied:
                start = tl.associative_scan(tl.where(starts_group, pos, 0), 0, _max_combine)
                following = tl.gather(starts_group.to(tl.int32), tl.minimum(pos + 1, BLOCK - 1), 0)
                ends_group = (following != 0) | (pos == BLOCK - 1)
                end = tl.associative_scan(tl.where(ends_group, pos, BLOCK - 1), 0, _min_combine, reverse=True)
                size = (end - start + 1).to(tl.float32)
                group_relevant = _group_sum(relevant, hits_cum, start, end)
            # each cumulative as soon as its terms exist: fewer arrays live at once (registers, at 1,024 items)
            hits = tl.cumsum(group_relevant / size, 0)  # expected relevant items in the top i
            rank_sum = tl.cumsum(group_relevant / size * rank, 0)  # expected rank times relevance (mean rank)
            r_hits = _read(hits, at, num_relevant.to(tl.int32), last)  # R-precision's
            discount = 0.6931471805599453 / tl.log(rank + 1.0)  # 1 / log2(i + 1)
            dcg, dcg_exp, ap, found, rr, first_position, err, graded = hits, hits, hits, hits, hits, hits, hits, ranked
            if NEED_GAIN or NEED_RBP:
                if tied:
                    graded = _group_sum(ranked, tl.cumsum(ranked, 0), start, end) / size
                dcg = tl.cumsum(graded * discount, 0)
            if NEED_EXP:
                gains_exp = tl.where(valid, tl.exp2(ranked - scale) - tl.exp2(-scale), 0.0)
                if tied:
                    gains_exp = _group_sum(gains_exp, tl.cumsum(gains_exp, 0), start, end) / size
                dcg_exp = tl.cumsum(gains_exp * discount, 0)
            ideal_dcg, ideal_dcg_exp = _ideal_dcg(ideal, ipos, scale, NEED_GAIN, NEED_EXP, True)
            if NEED_AP:
                precision_terms = relevant * hits_cum / rank
                if tied:
                    before = tl.gather(hits_cum - relevant, start, 0)
                    precision_terms = ap_terms(group_relevant, size, pos, start, before, rank)
                ap = tl.cumsum(precision_terms, 0)
            if NEED_RR:
                first_probability = tl.where((relevant > 0) & (hits_cum == 1.0), 1.0, 0.0)
                if tied:
                    before = tl.gather(hits_cum - relevant, start, 0)
                    first_probability = first_relevant_probability(group_relevant, size, pos, start, before)
                found, rr, first_position = _first_relevant_sums(first_probability, rank)
            if WRITE_MIXED:  # a tie group of different labels: ERR's expectation there is left to the caller
                if tied:
                    label_sum = _group_sum(ranked, tl.cumsum(ranked, 0), start, end)
                    mixed = tl.sum((label_sum != ranked * size).to(tl.int32), 0) > 0
            if NEED_ERR:
                err = _err_sums(ranked, valid, pos, rank, scale)
        else:  # the top DEPTH positions only, by rounds of max (select.py), and the ideal's likewise
            _, judged, ideal, num_relevant, top_ideal, top_label, scale, num_valid, ideal_bits = _judged(
                labels, real, pos, ideal_ptr + row * ideal_stride, m, threshold, IDEAL_BLOCK, HAS_IDEAL)
            at, valid, size, label_sum, group_relevant, exp_sum, start, before, mixed = select_top(
                keys, labels, real, pos, threshold, scale, deepest, num_valid, DEPTH, BLOCK, TIES, NEED_EXP,
                WRITE_MIXED)
            ideal_sorted = tl.zeros([DEPTH], tl.float32)  # its loop first: no gain's value live across it
            if NEED_GAIN or NEED_EXP:
                ideal_sorted = select_ideal(ideal, judged, deepest, DEPTH)
            last, ilast, iat = DEPTH - 1, DEPTH - 1, at
            r_hits = num_relevant * 0.0  # R-precision's, below
            rank = (at + 1).to(tl.float32)
            discount = 0.6931471805599453 / tl.log(rank + 1.0)
            hits = tl.cumsum(group_relevant / size, 0)
            rank_sum = tl.cumsum(group_relevant / size * rank, 0)
            graded = label_sum / size  # exact but where a group holds different labels (ERR leaves those)
            dcg = tl.cumsum(graded * discount, 0)
            dcg_exp = tl.cumsum(exp_sum / size * discount, 0)
            ap = tl.cumsum(ap_terms(group_relevant, size, at, start, before, rank), 0)
            found, rr, first_position = _first_relevant_sums(
                first_relevant_probability(group_relevant, size, at, start, before), rank)
            err = _err_sums(graded, valid, at, rank, scale)
            ideal_dcg, ideal_dcg_exp = _ideal_dcg(ideal_sorted, at, scale, NEED_GAIN, NEED_EXP, False)
        if RPREC_THRESHOLD:  # R-precision where nothing was sorted: by the score at rank R
            r_hits = hits_at_r(keys, labels, real, threshold, num_relevant, num_valid, TIES)
        if CHECK_VALUES:  # one atomic, by the few programs that found a problem
            bits |= ideal_bits << 3
            tl.atomic_or(problems_ptr, bits, mask=bits != 0)
        if WRITE_MIXED:
            tl.store(mixed_ptr + row, mixed.to(tl.uint8))
        top_label = tl.where(scale > 0, scale, 1.0)  # RBP's gains: label / top (each column weighs by its own p)

        r_clamped = tl.maximum(num_relevant, 1.0)
        for j in tl.static_range(NUM_COLS):
            code = (CODES >> (8 * j)) & 255  # a constexpr (_pack's eight bits): each column compiles its own branch
            k = tl.load(cuts_ptr + j)
            k_eff = tl.where(k > 0, k.to(tl.float32), num_valid.to(tl.float32))
            if code == 0:
                value = _read(hits, at, k, last) / tl.maximum(k_eff, 1.0)
            elif code == 1:
                value = _read(hits, at, k, last) / r_clamped
            elif code == 2:
                value = 2 * _read(hits, at, k, last) / tl.maximum(k_eff + num_relevant, 1.0)
            elif code == 3:
                value = _read(found, at, k, last)
            elif code == 4:
                value = _read(ap, at, k, last) / r_clamped
            elif code == 5:
                value = _read(rr, at, k, last)
            elif code == 6:
                value = _read(dcg, at, k, last)
            elif code == 7:  # the scaled sum back in label units (inf where float32 cannot hold it)
                value = _read(dcg_exp, at, k, last) * tl.exp2(scale)
            elif code == 8:
                ideal_value = _read(ideal_dcg, iat, k, ilast)
                value = _read(dcg, at, k, last) / tl.where(ideal_value > 0, ideal_value, 1.0)
            elif code == 9:
                ideal_value = _read(ideal_dcg_exp, iat, k, ilast)
                value = _read(dcg_exp, at, k, last) / tl.where(ideal_value > 0, ideal_value, 1.0)
            elif code == 10:
                value = _read(err, at, k, last)
            elif code == 11:  # precision at R (the whole list's column: k is 0)
                value = r_hits / r_clamped
            elif code == 12:  # the expected rank of the first relevant item, k + 1 where none is in the top k
                value = _read(first_position, at, k, last) + (k_eff + 1) * (1 - _read(found, at, k, last))
            elif code == 13:  # mean rank of the relevant items, those past the cut-off at k + 1
                missed = num_relevant - _read(hits, at, k, last)
                value = (_read(rank_sum, at, k, last) + (k_eff + 1) * missed) / r_clamped
            else:  # RBP: (1 - p) sum gain_i p^(i-1)
                p = tl.load(rbp_ptr + 2 * j)
                fixed_top = tl.load(rbp_ptr + 2 * j + 1)
                scale_top = tl.where(fixed_top > 0, fixed_top, top_label)
                weights = (1 - p) * tl.exp2((rank - 1) * tl.log2(p))
                value = _read(tl.cumsum(graded / scale_top * weights, 0), at, k, last)
            if code <= 5 or (code >= 11 and code <= 13):  # BINARY_CODES
                empty = num_relevant == 0
            else:
                empty = top_ideal <= 0
            value = tl.where(empty, fill, value)
            tl.store(out_ptr + row * NUM_COLS + j, value)
            if WRITE_FLAGS:
                tl.store(flags_ptr + row * NUM_COLS + j, empty.to(tl.uint8))

