"""NeuralSort's relaxed permutation matrix (Grover et al., ICLR 2019) with Sinkhorn scaling, and the fused
product of that matrix with a vector that NeuralNDCG and soft ERR need.

For the real items of a list (n of them, scores s, temperature tau), NeuralSort's row i (rank i = 1..n) is

    P_hat[i, :] = softmax_j( ((n + 1 - 2i) s_j - sum_k |s_j - s_k|) / tau ),

a row-stochastic matrix whose row i peaks at the item of rank i and tends to the sorting permutation as
tau -> 0. Sinkhorn scaling then alternates column and row normalisation towards a doubly stochastic matrix
``diag(e^u) P_hat diag(e^v)``; the scaling vectors u (ranks) and v (items) are kept in log space, and each
half-step is ``v = -log(P_hat^T e^u)`` or ``u = -log(P_hat e^v)``: the iterates of log-domain Sinkhorn,
computed with a matrix-vector product each instead of a log-sum-exp over the whole matrix (the kernel is
exponentiated once, by the softmax, whose rows each hold an entry >= 1/n, so no column underflows whole).

:func:`soft_sort` never builds the scaled matrix: it returns ``P v`` for a vector of item values (gains,
stop probabilities) and computes its gradient in a hand-written backward from the saved ``[B, N, N]``
kernel and the ``O(iterations * N)`` scaling vectors, so memory does not grow with the iteration count and
no ``[B, N, N]`` matrix besides the kernel is kept for backward. ``sum_k |s_j - s_k|`` is computed in
``O(N log N)`` from one sort. On a CPU, long lists (512 items, or 128 in a mostly padded batch) are built over
their real items and multiplied one list at a time, by BLAS matrix-vector products over the band of each list's
kernel that holds its nonzero entries (:class:`_Kernel`, :func:`_per_list`).
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from torchrank.losses._common import check_iterations, check_positive, prepare

__all__ = ["neural_sort", "soft_sort"]


def _tiny(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).tiny


def _negligible(dtype: torch.dtype) -> float:
    """``eps^2``: entries below this fraction of their row's (or vector's) largest are set to exactly 0.

    They change no sum by more than ``N eps^2``, and zeros keep every product out of the subnormal range, whose
    arithmetic is much slower on CPUs (benchmarks/notes/code_comment_timings.md; a soft-ERR gradient spans many
    orders of magnitude along the list).
    """
    return torch.finfo(dtype).eps ** 2


def _flush(x: Tensor, dim: int = 1) -> Tensor:
    """``x`` with the entries below ``eps^2`` of the largest along ``dim`` set to 0 (see :func:`_negligible`)."""
    size = x.abs()
    return torch.where(size >= size.amax(dim, keepdim=True) * _negligible(x.dtype), x, 0)


def _abs_diff_sums(scores: Tensor, mask: Tensor, num_valid: Tensor) -> Tensor:
    """``sum_k |s_j - s_k|`` over the real items k of each list ``[B, N]`` in ``O(N log N)``.

    With the real items sorted ascending (t_0 <= ... <= t_{n-1}), item p has p items at or below it and
    n - 1 - p above: ``t_p (2p - n + 1) - below_p + above_p`` with the sums from one cumsum. A tied item
    contributes 0 on either side, so the value is exact; its gradient is a subgradient of ``|.|``.
    """
    big = torch.finfo(scores.dtype).max
    key = torch.where(mask, scores, big).detach()  # padding sorts last
    order = torch.sort(key, dim=1).indices
    t = scores.gather(1, order) * mask.gather(1, order)
    inclusive = torch.cumsum(t, 1)
    below = inclusive - t
    above = inclusive[:, -1:] - inclusive
    p = torch.arange(scores.shape[1], device=scores.device, dtype=scores.dtype)
    sums_sorted = t * (2 * p - (num_valid.unsqueeze(1).to(scores.dtype) - 1)) - below + above
    return torch.empty_like(sums_sorted).scatter(1, order, sums_sorted)


def _logits_parts(scores: Tensor, mask: Tensor, temperature: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(s / tau, sum_k |s_j - s_k| / tau, n + 1 - 2i, rank i is real)``; logits ``L_ij = c_i x_j - a_j``."""
    num_valid = mask.sum(1)
    # NeuralSort is shift-invariant; centring keeps the O(N) sums small (precision at large scores)
    center = (scores * mask).sum(1, keepdim=True).detach() / num_valid.clamp_min(1).unsqueeze(1).to(scores.dtype)
    centered = torch.where(mask, scores - center, 0)
    rank = torch.arange(1, scores.shape[1] + 1, device=scores.device)
    rank_valid = rank.unsqueeze(0) <= num_valid.unsqueeze(1)
    coef = torch.where(rank_valid, (num_valid.unsqueeze(1) + 1 - 2 * rank).to(scores.dtype), 0)
    abs_sums = _abs_diff_sums(centered, mask, num_valid)
    return centered / temperature, abs_sums / temperature, coef, rank_valid


def _descending(x: Tensor, mask: Tensor) -> Tensor:
    """Each list's items by descending ``x`` (stable), padding last: sorted position p is rank p + 1."""
    key = torch.where(mask, x, -float("inf")).detach()
    return torch.sort(key, dim=1, descending=True, stable=True).indices


@functools.lru_cache(maxsize=8)  # a training run sees a few list lengths
def _gap_weights(n: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """``-|2 (q - i) + 1|`` ``[n, n]`` (rank i, gap q) split into ``q >= i`` (right of the row's peak) and ``q < i``,
    the latter with its columns reversed (``q = n - 1`` first)."""
    i = torch.arange(n, device=device).unsqueeze(1)
    q = torch.arange(n, device=device).unsqueeze(0)
    w = (2 * (q - i) + 1).abs().neg().to(dtype)  # negated: the cumsums then give the logits, no negation pass
    return torch.where(q >= i, w, 0), torch.where(q < i, w, 0).flip(1).contiguous()


def _sorted_logits(x: Tensor, rank_valid: Tensor, width: int | None = None) -> Tensor:
    """NeuralSort's logits of each rank i (rows) over the items in descending order (columns), minus the row's
    largest, which is at column i: ``D[i, p] = -sum_{q in [min(i, p), max(i, p))} |2 (q - i) + 1| h_q`` with
    ``h_q = x_(q) - x_(q+1) >= 0`` the gaps between neighbours in score order ``[B, N, N]``.

    Why not ``c_i x_j - sum_k |x_j - x_k|`` as written: both terms grow as ``N max|x|`` (1e11 for scores of
    1e8 in lists of 1,000), and their difference, which the softmax reads to within a unit of the temperature,
    cancels catastrophically in float32 (tied items get different logits, whole columns vanish). Here each
    logit is a sum of terms of one sign accumulated outward from the row's peak: it is accurate to ``N eps``
    relative to itself, and tied items (zero gaps) get identical logits.
    """
    n = x.shape[1]
    gaps = torch.zeros_like(x)
    gaps[:, :-1] = (x[:, :-1] - x[:, 1:]) * rank_valid[:, 1:]  # 0 past the real items (padding sorts last)
    # the weights of a longer list (``width``) hold this one's: the top-left block, and of the reversed ones the
    # last n columns (one cached pair serves a batch's lists of every length)
    right_w, left_w_reversed = _gap_weights(width or n, x.dtype, x.device)
    right_w, left_w_reversed = right_w[:n, :n], left_w_reversed[:n, left_w_reversed.shape[1] - n :]
    right = torch.cumsum(right_w * gaps.unsqueeze(1), 2)  # [i, p] sums q = i..p; column p + 1 needs it
    # [i, p] sums q = p..i-1: a cumsum over reversed columns (weights stored reversed: one [B, N, N] flip, not two)
    left = torch.cumsum(left_w_reversed * gaps.flip(1).unsqueeze(1), 2).flip(2)
    left[..., 1:] += right[..., :-1]
    return left


#: On a CPU, batches of lists this long are processed one list at a time: each list's kernel is built over its
#: real items in cache, multiplied by BLAS matrix-vector products (``torch.mv``) over the band holding its nonzero
#: entries; shorter lists are faster batched (one call for the batch, not one per list). The crossover is measured
#: in benchmarks/notes/neuralsort_routes.md.
PER_LIST_ITEMS = 512
#: ... and padded batches of lists this long whose real items make less than half the batch's kernel work
#: (``sum n^2 < B N^2 / 2``) are processed in groups of lists of similar length (:class:`_Grouped`), so the padding
#: costs little (benchmarks/notes/neuralsort_routes.md).
PER_LIST_PADDED_ITEMS = 128
#: Rows per block of a list's kernel whose columns are restricted to the block's nonzero range (see _Kernel).
BLOCK_ROWS = 128


def _per_list(x: Tensor, rank_valid: Tensor) -> bool:
    """Whether the lists of ``x`` ``[B, N]`` (real ranks ``rank_valid``) are processed one at a time (see
    :data:`PER_LIST_ITEMS` and :data:`PER_LIST_PADDED_ITEMS`)."""
    batch, n = x.shape
    if x.device.type != "cpu" or batch < 2 or n < PER_LIST_PADDED_ITEMS:
        return False
    return n >= PER_LIST_ITEMS or 2 * int((rank_valid.sum(1) ** 2).sum()) < batch * n * n


def _row_blocks(k: Tensor) -> list[tuple[int, int, int, int]] | None:
    """``(r0, r1, c0, c1)`` per block of :data:`BLOCK_ROWS` rows of one list's kernel ``[N, N]``: the block's
    nonzero entries all lie in columns ``c0:c1``; None when the blocks would cover most of the matrix anyway.

    NeuralSort's logits fall monotonically away from each row's peak (the diagonal, items in score order), and
    entries below ``eps^2`` of the row's largest are exactly 0, so for spread-out scores each row's support is
    a band around the diagonal (B = 8 random normal scores, N = 1024: 18% of the entries).
    """
    n = k.shape[0]
    nonzero = k != 0
    count = nonzero.sum(1)
    flags = nonzero.to(torch.uint8)
    first = torch.where(count > 0, flags.argmax(1), n)  # the first nonzero column; n for an empty row
    last = torch.where(count > 0, n - flags.flip(1).argmax(1), 0)  # one past the last; 0 for an empty row
    pad = -n % BLOCK_ROWS
    c0 = torch.nn.functional.pad(first, (0, pad), value=n).view(-1, BLOCK_ROWS).amin(1).tolist()
    c1 = torch.nn.functional.pad(last, (0, pad), value=0).view(-1, BLOCK_ROWS).amax(1).tolist()
    starts = range(0, n, BLOCK_ROWS)
    blocks = [(r0, min(r0 + BLOCK_ROWS, n), lo, hi) for r0, lo, hi in zip(starts, c0, c1, strict=True) if hi > lo]
    area = sum((r1 - r0) * (hi - lo) for r0, r1, lo, hi in blocks)
    return blocks if area < 0.7 * n * n else None


class _Kernel:
    """NeuralSort's ``P_hat`` ``[B, N, N]`` and its products with vectors ``[B, N]`` and thin matrices
    ``[B, N, m]``.

    Batched: one ``[B, N, N]`` tensor (``matrix``). On a CPU with long lists (:func:`_per_list`): one ``[n, n]``
    tensor per list over its ``n`` real items (``lists``; in score order the real items come first, and the
    padded ranks and items are zero rows and columns), each product runs list by list, and a list whose entries
    sit in a band (:func:`_row_blocks`) by blocks of rows over the columns where they are nonzero: the same sums
    without the exact zeros (in another order of summation).
    """

    def __init__(self, matrix: Tensor | None = None, lists: list[Tensor] | None = None, blocks: list | None = None):
        self.matrix, self.lists, self.blocks = matrix, lists, blocks
        self._parts = None
        if lists is not None:  # per list: (block, its transpose, rows, columns), views made once
            self._parts = []
            for kb, spans in zip(lists, blocks, strict=True):
                n = kb.shape[0]
                spans = [(0, n, 0, n)] if spans is None else spans
                windows = [(slice(r0, r1), slice(c0, c1)) for r0, r1, c0, c1 in spans if n]
                self._parts.append([(kb[rows, cols], kb[rows, cols].t(), rows, cols) for rows, cols in windows])

    @property
    def tensors(self) -> list[Tensor]:
        """What backward needs saved."""
        return [self.matrix] if self.lists is None else list(self.lists)

    def right(self, w: Tensor) -> Tensor:
        """``P w`` per list."""
        if self._parts is None:
            k = self.matrix
            if w.dim() == 3:
                return torch.bmm(k, w)
            if k.device.type == "cpu" and k.shape[-1] >= 64:
                # as the row vector w^T P^T: on CPU, bmm(P, w) of one column is slower (neuralsort_routes.md's
                # figures); below 64 items the two cost the same
                return torch.bmm(w.unsqueeze(1), k.transpose(1, 2)).squeeze(1)
            return torch.bmm(k, w.unsqueeze(2)).squeeze(2)
        out = torch.zeros_like(w)
        product = torch.mv if w.dim() == 2 else torch.mm
        for parts, wb, ob in zip(self._parts, w.unbind(0), out.unbind(0), strict=True):
            for block, _, rows, cols in parts:
                product(block, wb[cols], out=ob[rows])
        return out

    def left(self, w: Tensor) -> Tensor:
        """``P^T w`` per list."""
        if self._parts is None:  # as w^T P: reads P in memory order (faster on CPU than bmm(P^T, w))
            k = self.matrix
            if w.dim() == 2:
                return torch.bmm(w.unsqueeze(1), k).squeeze(1)
            return torch.bmm(w.transpose(1, 2), k).transpose(1, 2)
        out = torch.zeros_like(w)
        vector = w.dim() == 2
        for parts, wb, ob in zip(self._parts, w.unbind(0), out.unbind(0), strict=True):
            for _, block_t, rows, cols in parts:
                if vector:
                    ob[cols].addmv_(block_t, wb[rows])
                else:
                    ob[cols].addmm_(block_t, wb[rows])
        return out


#: Lists in one group of a padded batch (:class:`_Grouped`) are at least this fraction of the group's longest.
GROUP_RATIO = 0.75


class _Grouped:
    """A padded batch's kernel as groups of lists of similar length, each group a batched :class:`_Kernel` over
    its longest list's items: a few batched products per step (not one per list), over about the real items'
    ``sum n^2`` entries (not ``B N^2``). Lists without real items belong to no group (their rows read 0)."""

    def __init__(self, groups: list[tuple[Tensor, int]], matrices: list[Tensor]) -> None:
        self.groups = groups  # (list indices, their common width)
        self.kernels = [_Kernel(m) for m in matrices]

    @property
    def tensors(self) -> list[Tensor]:
        return [k.matrix for k in self.kernels]

    def _apply(self, w: Tensor, left: bool) -> Tensor:
        out = torch.zeros_like(w)
        for (index, width), kernel in zip(self.groups, self.kernels, strict=True):
            part = w[index, :width]
            out[index, :width] = kernel.left(part) if left else kernel.right(part)
        return out

    def right(self, w: Tensor) -> Tensor:
        return self._apply(w, left=False)

    def left(self, w: Tensor) -> Tensor:
        return self._apply(w, left=True)


def _groups(lengths: list[int], device: torch.device) -> list[tuple[Tensor, int]]:
    """Lists by descending length, cut where one is below :data:`GROUP_RATIO` of its group's longest."""
    order = sorted((b for b in range(len(lengths)) if lengths[b]), key=lambda b: -lengths[b])
    groups: list[list[int]] = []
    for b in order:
        if groups and lengths[b] >= GROUP_RATIO * lengths[groups[-1][0]]:
            groups[-1].append(b)
        else:
            groups.append([b])
    return [(torch.tensor(sorted(g), device=device), lengths[g[0]]) for g in groups]


def _kernel(x: Tensor, rank_valid: Tensor, padded: bool) -> _Kernel:
    """NeuralSort's ``P_hat`` ``[B, N, N]`` (rank x item, items in descending order), zero at padded ranks and
    items; each row peaks at its own rank's column (a logit of 0), so no row underflows whole.

    Where the products run list by list (:func:`_per_list`), each list's matrix is built alone over its real items:
    its temporaries stay in cache (benchmarks/notes/neuralsort_routes.md), and a padded batch costs what
    its lists' real lengths do (the sum of ``n^2``, not ``B N^2``). Same values."""
    if not _per_list(x, rank_valid):
        return _Kernel(_kernel_of(x, rank_valid, padded))
    lengths = rank_valid.sum(1).tolist()
    if not any(lengths):  # nothing to rank
        return _Kernel(_kernel_of(x, rank_valid, padded))
    if x.shape[1] < PER_LIST_ITEMS:  # a padded batch of shorter lists: groups of similar length
        groups = _groups(lengths, x.device)
        matrices = [_kernel_of(x[i, :w], rank_valid[i, :w], True, width=x.shape[1]) for i, w in groups]
        return _Grouped(groups, matrices)
    lists, blocks = [], []
    for xb, length in zip(x.unbind(0), lengths, strict=True):
        kb = _kernel_of(xb[:length].unsqueeze(0), rank_valid.new_ones(1, length), padded=False, width=x.shape[1])[0]
        lists.append(kb)
        blocks.append(_row_blocks(kb) if length else None)
    return _Kernel(lists=lists, blocks=blocks)


def _kernel_of(x: Tensor, rank_valid: Tensor, padded: bool, width: int | None = None) -> Tensor:
    """:func:`_kernel`'s matrix for a batch at once (``width``: see :func:`_sorted_logits`)."""
    k = _sorted_logits(x, rank_valid, width)
    if padded:
        k.masked_fill_(~rank_valid.unsqueeze(1), -float("inf"))
    # entries below eps^2 of the row's largest become exactly 0 (see _negligible); the clamp keeps exp away from
    # arguments whose results would be subnormal or 0, which it computes much slower
    # (benchmarks/notes/code_comment_timings.md)
    floor = math.log(_negligible(k.dtype))
    k.clamp_(min=floor - 1).exp_()
    torch.nn.functional.threshold_(k, math.exp(floor), 0.0)
    k.div_(k.sum(2, keepdim=True).clamp_min(_tiny(k.dtype)))
    return k.mul_(rank_valid.unsqueeze(2)) if padded else k


def _left_product(w: Tensor, k: _Kernel) -> Tensor:
    """``P^T w`` per list."""
    return k.left(_flush(w))


def _right_product(k: _Kernel, w: Tensor) -> Tensor:
    """``P w`` per list."""
    return k.right(_flush(w))


def _exp_shifted(log_x: Tensor) -> tuple[Tensor, Tensor]:
    """``(exp(log_x - m), m)`` with m each row's largest finite entry (0 for a row of -inf)."""
    m = log_x.amax(1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, 0)
    return torch.exp(log_x - m), m


def _column_step(k: _Kernel, u: Tensor, col_valid: Tensor) -> Tensor:
    """``v = -log(P_hat^T e^u)``: the columns of ``diag(e^u) P_hat diag(e^v)`` sum to 1."""
    w, m = _exp_shifted(u)
    q = _left_product(w, k)
    v = -(torch.log(q.clamp_min(_tiny(q.dtype))) + m)
    return torch.where(col_valid, v, -float("inf"))


def _row_step(k: _Kernel, v: Tensor, row_valid: Tensor) -> Tensor:
    """``u = -log(P_hat e^v)``: the rows of ``diag(e^u) P_hat diag(e^v)`` sum to 1."""
    w, m = _exp_shifted(v)
    q = _right_product(k, w)
    u = -(torch.log(q.clamp_min(_tiny(q.dtype))) + m)
    return torch.where(row_valid, u, -float("inf"))


def _balanced_exp(u: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """``(e^(u - c), e^(v + c))``: the products ``e^(u_i + v_j)`` with each factor kept in range."""
    mu, mv = u.amax(1, keepdim=True), v.amax(1, keepdim=True)
    c = torch.where(torch.isfinite(mu) & torch.isfinite(mv), (mu - mv) / 2, 0)
    return torch.exp(u - c), torch.exp(v + c)


def _steps(iterations: int, transposed: bool) -> str:
    """Half-steps in order: ``c`` normalises columns, ``r`` rows. NeuralSort's rows already sum to 1, so the
    standard order ends on rows (each rank a distribution over items) and the transposed one on columns
    (each item a distribution over ranks)."""
    if iterations == 0:
        return ""
    return "c" + "rc" * (iterations - 1) if transposed else "cr" * iterations


def _scale(k: _Kernel, steps: str, col_valid: Tensor, row_valid: Tensor) -> tuple[list[Tensor], list[Tensor]]:
    """The log scaling vectors after each half-step, the first of each being 0 (no scaling)."""
    dtype = k.tensors[0].dtype
    us = [torch.where(row_valid, 0.0, -float("inf")).to(dtype)]
    vs = [torch.where(col_valid, 0.0, -float("inf")).to(dtype)]
    for step in steps:
        if step == "c":
            vs.append(_column_step(k, us[-1], col_valid))
        else:
            us.append(_row_step(k, vs[-1], row_valid))
    return us, vs


class _SoftSortFunction(torch.autograd.Function):
    """``P v`` with ``P = diag(e^u) P_hat diag(e^v)``; inputs ``(x, a, values)`` of the logits
    ``L_ij = c_i x_j - a_j`` (the gradient's parametrisation; the values come from :func:`_sorted_logits`).
    Backward runs the scaling steps in reverse, collecting the gradient with respect
    to ``P_hat`` as a sum of rank-one terms ``X Y^T`` that is never materialised."""

    @staticmethod
    def forward(ctx, x, a, values, order, coef, valid, steps, padded):
        # items in score order (``order``), so the kernel's columns are too; ranks are the rows
        values = values.gather(1, order)
        k = _kernel(x.gather(1, order), valid, padded)
        us, vs = _scale(k, steps, valid, valid)
        eu, ev = _balanced_exp(us[-1], vs[-1])
        out = eu * _right_product(k, ev * values)
        ctx.save_for_backward(*k.tensors, values, order, coef, *us, *vs)
        ctx.num_k, ctx.num_u, ctx.steps = len(k.tensors), len(us), steps
        ctx.layout = ("groups", k.groups) if isinstance(k, _Grouped) else ("lists", k.blocks)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        saved, nk = ctx.saved_tensors, ctx.num_k
        kernel, (values, order, coef), saved = saved[:nk], saved[nk : nk + 3], saved[nk + 3 :]
        kind, layout = ctx.layout
        if kind == "groups":
            k = _Grouped(layout, list(kernel))
        else:
            k = _Kernel(kernel[0]) if layout is None else _Kernel(lists=list(kernel), blocks=layout)
        us, vs = saved[: ctx.num_u], saved[ctx.num_u :]
        left, right = [], []  # d loss / d P_hat = sum_r left_r right_r^T

        eu, ev = _balanced_exp(us[-1], vs[-1])
        k_weighted = _right_product(k, ev * values)
        z = eu * grad_out
        kt_z = _left_product(z, k)
        grad_values = ev * kt_z
        grad_u = grad_out * eu * k_weighted  # d out_i / d u_i = out_i
        grad_v = values * grad_values
        left.append(z)
        right.append(ev * values)

        iu, iv = len(us) - 1, len(vs) - 1
        for step in reversed(ctx.steps):
            eu, ev = _balanced_exp(us[iu], vs[iv])
            if step == "r":  # u[iu] = -log(P_hat e^v[iv])
                w = eu * grad_u
                grad_v = grad_v - ev * _left_product(w, k)
                left.append(-w)
                right.append(ev)
                grad_u = torch.zeros_like(grad_u)
                iu -= 1
            else:  # v[iv] = -log(P_hat^T e^u[iu])
                w = ev * grad_v
                grad_u = grad_u - eu * _right_product(k, w)
                left.append(-eu)
                right.append(w)
                grad_v = torch.zeros_like(grad_v)
                iv -= 1

        grad_x, grad_a = _logit_grads(k, torch.stack(left, 2), torch.stack(right, 2), coef)
        grads = (torch.empty_like(g).scatter_(1, order, g) for g in (grad_x, grad_a, grad_values))  # item order
        return *grads, None, None, None, None, None


def _logit_grads(k: _Kernel, left: Tensor, right: Tensor, coef: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients for ``x`` and ``a`` from ``G = left @ right^T`` (d loss / d P_hat), through the row softmax.

    ``dL_ij = P_ij (G_ij - c_i)`` with ``c_i = sum_l P_il G_il = sum_r left_ir (P right)_ir``; the column sums
    ``sum_i w_i dL_ij`` (w = coef for x, 1 for a) are ``sum_r right_jr (P^T (w left_r))_j - (P^T (w c))_j``:
    two thin matrix products, no ``[B, N, N]`` temporary.
    """
    left, right = _flush(left), _flush(right)
    rows = (left * k.right(right)).sum(2, keepdim=True)
    w = coef.unsqueeze(2)
    thin = torch.cat([w * left, left, w * rows, rows], 2)
    z = k.left(_flush(thin))  # P^T thin
    r = left.shape[2]
    grad_x = (right * z[..., :r]).sum(2) - z[..., 2 * r]
    grad_a = -((right * z[..., r : 2 * r]).sum(2) - z[..., 2 * r + 1])
    return grad_x, grad_a


def soft_sort(
    scores: Tensor,
    values: Tensor,
    mask: Tensor,
    *,
    temperature: float,
    sinkhorn_iterations: int,
    transposed: bool = False,
    padded: bool = True,
) -> Tensor:
    """Values of each list in soft rank order: ``(P values)_i``, the expected value at rank i ``[B, N]``.

    ``P`` is NeuralSort's matrix after ``sinkhorn_iterations`` Sinkhorn iterations (0: NeuralSort alone).
    Ranks past a list's real items read 0. Differentiable in ``scores`` (and ``values``). ``padded=False``
    promises an all-True ``mask`` and skips the masking passes over the matrix.

    Example:
        >>> s = torch.tensor([[0.5, 0.2, 0.1, 0.01, 0.65, 0.3]])
        >>> y = torch.tensor([[4.0, 2, 1, 0, 4, 3]])
        >>> soft_sort(s, y, torch.ones_like(y, dtype=torch.bool), temperature=1.0, sinkhorn_iterations=0)
        tensor([[3.3893, 2.9820, 2.4965, 2.0191, 1.6097, 1.2815]])
    """
    x, a, coef, rank_valid = _logits_parts(scores, mask, temperature)
    # the matrix is built over the items in score order (see _sorted_logits); P v reads v in that order too
    order = _descending(x, mask)
    steps = _steps(sinkhorn_iterations, transposed)
    return _SoftSortFunction.apply(x, a, values, order, coef, rank_valid, steps, padded)


def neural_sort(
    scores: Tensor,
    mask: Tensor | None = None,
    *,
    temperature: float = 1.0,
    sinkhorn_iterations: int = 0,
    transposed: bool = False,
) -> Tensor:
    """NeuralSort's relaxed permutation matrix ``[B, N, N]`` (rank x item), after Sinkhorn scaling.

    Built densely with autograd, for inspection and small lists (memory grows with the iterations); the
    losses use the fused :func:`soft_sort`. Rows of padded ranks and columns of padded items are 0.

    Args:
        scores: Scores ``[B, N]``.
        mask: Bool ``[B, N]``, True for a real item (None: all real).
        temperature: NeuralSort's tau; the matrix tends to the sorting permutation as it goes to 0.
        sinkhorn_iterations: Column-then-row normalisations after NeuralSort (0: none).
        transposed: End on a column normalisation instead of a row one.

    Example:
        >>> p = neural_sort(torch.tensor([[3.0, 1.0, 2.0]]), temperature=0.01)
        >>> p.round()
        tensor([[[1., 0., 0.],
                 [0., 0., 1.],
                 [0., 1., 0.]]])
    """
    check_positive("temperature", temperature)
    check_iterations(sinkhorn_iterations)
    checked = prepare(scores, torch.zeros_like(scores), mask)
    scores, mask = checked.scores, checked.mask
    x, a, coef, rank_valid = _logits_parts(scores, mask, temperature)
    logits = coef.unsqueeze(2) * x.unsqueeze(1) - a.unsqueeze(1)
    logits = logits.masked_fill(~mask.unsqueeze(1), -float("inf"))
    log_p = torch.log_softmax(logits, 2)
    valid = rank_valid.unsqueeze(2) & mask.unsqueeze(1)
    log_p = torch.where(valid, log_p, -float("inf"))
    for step in _steps(sinkhorn_iterations, transposed):  # log-domain Sinkhorn
        dim = 1 if step == "c" else 2
        log_p = torch.where(valid, log_p - torch.logsumexp(log_p, dim, keepdim=True), -float("inf"))
    return torch.where(valid, log_p.exp(), 0)
