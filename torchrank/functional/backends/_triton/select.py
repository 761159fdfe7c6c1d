"""The fused kernel's paths that rank less than the whole list: the top ``DEPTH`` positions by selection, and the
whole-list counts (RR, success, first relevant position, R-precision).

Rounds of ``tl.max`` over the list, in registers, each take one whole tie group (under ``"first"`` its first item
in input order; under ``"optimistic"``/``"pessimistic"`` those with its largest/smallest label) and write its size,
label sum and relevant count at the positions it fills: a group's means are the exact ``"average"`` expectations
there, and the relevant items above it give AP's and RR's closed forms. The ideal ranking takes a label value per
round. Rounds stop at the deepest cut-off: k small reductions rather than a sort's ``log^2 N`` layout changes.
Loops, so static instruction counts say little of the time: see docs/backends.md.
"""

from __future__ import annotations

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - checked by backends.triton_available before any use
    triton = None

if triton is not None:

    @triton.jit
    def select_top(keys, labels, real, pos, threshold, scale, deepest, num_valid,
                   DEPTH: tl.constexpr, BLOCK: tl.constexpr, TIES: tl.constexpr, NEED_EXP: tl.constexpr,
                   WRITE_MIXED: tl.constexpr):
        # per position of the top DEPTH: its group's size, label sum, relevant count, exponential gain sum, first
        # position, and the relevant items above the group; whether a filled group holds different labels
        at = tl.arange(0, DEPTH)
        sizes = tl.full([DEPTH], 1.0, tl.float32)
        label_sums = tl.zeros([DEPTH], tl.float32)
        relevant_sums = tl.zeros([DEPTH], tl.float32)
        exp_sums = tl.zeros([DEPTH], tl.float32)
        starts = at  # an unfilled position: a group of its own
        befores = tl.zeros([DEPTH], tl.float32)
        left = real
        taken = num_valid * 0
        relevant_before = num_valid.to(tl.float32) * 0.0
        mixed = num_valid < 0
        size = num_valid * 0 + 1
        need = tl.minimum(deepest, num_valid)
        while (taken < need) & (size > 0):  # an empty group (NaN labels, unchecked) ends the rounds
            best = tl.max(tl.where(left, keys, -2147483647 - 1), 0)
            group = left & (keys == best)
            if TIES == 0:  # input order: the first of the group
                group = pos == tl.min(tl.where(group, pos, BLOCK), 0)
            elif TIES == 2:
                group = group & (labels == tl.max(tl.where(group, labels, -3.0e38), 0))
            elif TIES == 3:
                group = group & (labels == tl.min(tl.where(group, labels, 3.0e38), 0))
            size = tl.sum(group.to(tl.int32), 0)
            relevant = tl.sum(tl.where(group & (labels >= threshold), 1.0, 0.0), 0)
            window = (at >= taken) & (at < taken + size)
            sizes = tl.where(window, size.to(tl.float32), sizes)
            label_sums = tl.where(window, tl.sum(tl.where(group, labels, 0.0), 0), label_sums)
            relevant_sums = tl.where(window, relevant, relevant_sums)
            starts = tl.where(window, taken, starts)
            befores = tl.where(window, relevant_before, befores)
            if NEED_EXP:
                gains = tl.where(group, tl.exp2(labels - scale) - tl.exp2(-scale), 0.0)
                exp_sums = tl.where(window, tl.sum(gains, 0), exp_sums)
            if WRITE_MIXED:
                highest = tl.max(tl.where(group, labels, -3.0e38), 0)
                mixed = mixed | (highest != tl.min(tl.where(group, labels, 3.0e38), 0))
            taken += size
            relevant_before += relevant
            left = left & ~group
        return at, at < taken, sizes, label_sums, relevant_sums, exp_sums, starts, befores, mixed

    @triton.jit
    def select_ideal(ideal, judged, deepest, DEPTH: tl.constexpr):
        # the ideal ranking's top DEPTH labels: a label value per round, filling as many positions as it has items
        at = tl.arange(0, DEPTH)
        out = tl.zeros([DEPTH], tl.float32)
        left = judged
        filled = deepest * 0
        more = deepest > 0
        while more:
            value = tl.max(tl.where(left, ideal, -1.0), 0)
            same = left & (ideal == value)
            count = tl.sum(same.to(tl.int32), 0)
            out = tl.where((at >= filled) & (at < filled + count), value, out)
            filled += count
            left = left & ~same
            more = (filled < deepest) & (value > 0) & (count > 0)  # labels 0 add no gain: the rest stays 0
        return out

    @triton.jit
    def hits_at_r(keys, labels, real, threshold, num_relevant, num_valid, TIES: tl.constexpr):
        # R-precision's expected hits in the top D = min(R, listed items), unranked: the D-th largest key t, bit by
        # bit (the largest t with D keys at or above it; within one sign, int32 order is the low bits' order), then
        # the relevant items above t and the share of t's tie group that the tie mode puts in the top D
        depth = tl.minimum(num_relevant.to(tl.int32), num_valid)
        keys = tl.where(real, keys, -2147483647 - 1)  # padding: the least key, below every candidate but the first
        t = tl.where(tl.sum((keys >= 0).to(tl.int32), 0) >= depth, 0, -2147483647 - 1)
        for i in range(31):
            candidate = t | (1 << (30 - i))
            t = tl.where(tl.sum((keys >= candidate).to(tl.int32), 0) >= depth, candidate, t)
        relevant = real & (labels >= threshold)
        group = real & (keys == t)
        need = (depth - tl.sum((real & (keys > t)).to(tl.int32), 0)).to(tl.float32)
        size = tl.sum(group.to(tl.float32), 0)
        inside = tl.sum((group & relevant).to(tl.float32), 0)
        if TIES == 0:  # input order: the group's first `need` items
            inside = tl.sum((group & relevant & (tl.cumsum(group.to(tl.int32), 0) <= need)).to(tl.float32), 0)
        elif TIES == 1:
            inside = need * inside / tl.maximum(size, 1.0)
        elif TIES == 2:  # the relevant ones first
            inside = tl.minimum(need, inside)
        else:
            inside = tl.maximum(need - (size - inside), 0.0)
        return tl.sum((relevant & (keys > t)).to(tl.float32), 0) + inside

    @triton.jit
    def ap_terms(group_relevant, size, pos, start, before, rank):
        # E[rel_i * hits_i] / i in a group of m holding r, C relevant before it (McSherry and Najork)
        offset = (pos - start).to(tl.float32)
        within = tl.where(size > 1, offset * (group_relevant - 1) / tl.maximum(size - 1, 1.0), 0.0)
        return group_relevant / size * (before + 1 + within) / rank

    @triton.jit
    def first_relevant_probability(group_relevant, size, pos, start, before):
        # P(first relevant at i): only the first group holding one; prod (m-r-t)/(m-t) above, r/(m-t)
        first_group = (before == 0) & (group_relevant > 0)
        t = (pos - start).to(tl.float32)
        none_above = tl.maximum((size - group_relevant - t) / (size - t), 0.0)
        survive = tl.cumprod(tl.where(first_group, none_above, 1.0), 0)
        survive_before = tl.where(pos == start, 1.0, tl.gather(survive, tl.maximum(pos - 1, 0), 0))
        return tl.where(first_group, survive_before * group_relevant / (size - t), 0.0)

    @triton.jit
    def first_relevant_counts(keys, labels, real, pos, threshold, BLOCK: tl.constexpr, TIES: tl.constexpr):
        # whole-list RR, success and first relevant position without ranking: the best relevant item's tie group
        # (its score's items: g, r of them relevant) sits below the items scored above it; only the order inside
        # that group is left, by the tie mode. Returns P(found), E[1/rank; found], E[rank; found]
        relevant = real & (labels >= threshold)
        best = tl.max(tl.where(relevant, keys, -2147483647 - 1), 0)
        found = tl.sum(relevant.to(tl.int32), 0) > 0
        above = tl.sum((real & (keys > best)).to(tl.float32), 0)
        same = real & (keys == best)
        g = tl.sum(same.to(tl.float32), 0)
        r = tl.sum((same & relevant).to(tl.float32), 0)
        if TIES == 0:  # input order: the group's items before its first relevant one
            first = tl.min(tl.where(same & relevant, pos, BLOCK), 0)
            rank = above + 1 + tl.sum((same & (pos < first)).to(tl.float32), 0)
            rr = 1.0 / rank
            expected_rank = rank
        elif TIES == 2:
            rr = 1.0 / (above + 1)
            expected_rank = above + 1
        elif TIES == 3:
            rr = 1.0 / (above + 1 + g - r)
            expected_rank = above + 1 + g - r
        else:  # P(first relevant at offset t) = prod_{u<t} (g-r-u)/(g-u) * r/(g-t), t = 0 .. g - r
            rr = above * 0.0
            expected_rank = above * 0.0
            survive = above * 0.0 + 1.0
            t = above * 0.0
            while t <= g - r:
                p = survive * r / (g - t)
                rr += p / (above + 1 + t)
                expected_rank += p * (above + 1 + t)
                survive = survive * (g - r - t) / (g - t)
                t += 1.0
        zero = above * 0.0
        return tl.where(found, 1.0, zero), tl.where(found, rr, zero), tl.where(found, expected_rank, zero)
