"""trec_eval's measures beyond the shared families, each following its C code (``m_bpref.c``, ...) on the ranking's
order, summed in its order; and the measures for incomplete judgments (TREC DL, BEIR). Definitions, and which refuse
``ties="average"`` on tied input: docs/measures.md."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from torchrank.functional._inputs import is_integer_tensor, judged_count_problems
from torchrank.functional._measure import measure
from torchrank.functional._options import (
    Cutoffs,
    MeasureOptions,
    RankingOptions,
    Reduction,
    Ties,
    Unpack,
    with_common_args,
)
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index

__all__ = ["bpref", "inferred_average_precision", "judged_fraction", "judged_only_mask", "recall_cap"]

IPREC_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
RPREC_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
# trec_eval's INFAP_EPSILON: keeps the judged precision above a relevant item defined when nothing above is judged
INFAP_EPSILON = 0.00001


def _none(r: Ranking) -> Tensor:
    return torch.zeros(r.num_queries, dtype=torch.bool, device=r.labels.device)


def _one_column(values: Tensor, ks: Ks) -> Tensor:
    return values.unsqueeze(1).expand(-1, len(ks))


def _sum_in_order(terms: Tensor) -> Tensor:
    """Each row's terms added one by one, left to right, as trec_eval's loops add them ``[Q]`` (a cumulative sum's
    end: the same last bits)."""
    return torch.cumsum(terms, 1)[:, -1] if terms.shape[1] else terms.new_zeros(terms.shape[0])


def _judged(r: Ranking) -> Tensor:
    """Real items with a judgment ``[Q, N]`` bool (every real item when the ranking has no judged mask)."""
    return r.valid if r.judged is None else r.judged & r.valid


def _judged_nonrelevant(r: Ranking) -> Tensor:
    return (_judged(r) & (r.relevant == 0)).to(r.dtype)


def _refuse_tie_average(r: Ranking, name: str) -> None:
    """Refuse ``ties="average"`` on input with tied scores, on every backend alike (off CPU, one host read)."""
    if r.averaged_over_orders or (r.averages_ties and r.holds_tie):
        raise ValueError(f"{name} has no tie-averaged form: pass ties='first' (trec_eval's order), 'optimistic' or "
                         "'pessimistic'.")


def _bpref_value_problems(r: Ranking, params: dict) -> Tensor | None:
    """The value check of bpref's ``num_judged`` (the pipeline's, with ``validate_args``): no count below R and the
    judged non-relevant items listed (fewer would make ``NR`` smaller than ``n`` and a relevant item's term < 0)."""
    num_judged = params.get("num_judged")
    if num_judged is None:
        return None
    return judged_count_problems(num_judged, r.num_relevant + _judged_nonrelevant(r).sum(1))


@measure(value_problems=_bpref_value_problems)
def _bpref(r: Ranking, ks: Ks, num_judged: Tensor | None = None) -> Values:
    _refuse_tie_average(r, "bpref")
    # bpref's docstring: n = judged non-relevant items ranked above, NR = those of the query, retrieved or not
    rel, nonrel = r.relevant, _judged_nonrelevant(r)
    above = torch.cumsum(nonrel, 1) - nonrel
    big_r = r.num_relevant.unsqueeze(1)
    if num_judged is not None and num_judged.numel() != r.num_queries:  # a broadcast would give all the same count
        raise ValueError(f"Argument `num_judged` must hold one count per query ({r.num_queries}), got shape "
                         f"{tuple(num_judged.shape)}.")
    big_nr = nonrel.sum(1, keepdim=True) if num_judged is None else num_judged.reshape(-1, 1).to(r.dtype) - big_r
    share = 1 - torch.minimum(above, big_r) / torch.minimum(big_nr, big_r).clamp_min(1)
    terms = torch.where(above > 0, share, 1) * rel
    # in trec_eval's order: bpref often lands exactly on a printed rounding boundary (71/160 = 0.44375), where a
    # pairwise sum's last bit would print 0.4438 for 0.4437
    return _one_column(_sum_in_order(terms) / r.num_relevant.clamp_min(1), ks), r.no_relevant


def _iprec(r: Ranking, ks: Ks, levels: Sequence[float] = IPREC_LEVELS, round_up: float = 0.5) -> Values:
    """trec_eval's ``iprec_at_recall`` ``[Q, len(levels)]``: the best precision at or below the rank of the
    ``lround(level * R)``-th relevant item (0 if none); ``round_up=0.9``: 9.x's ``(long)(level * R + 0.9)``."""
    _refuse_tie_average(r, "iprec_at_recall")
    hits = r.relevant_count  # [Q, N]
    precision = torch.where(r.valid, hits / r.positions, 0)
    best_below = torch.flip(torch.cummax(torch.flip(precision, [1]), 1).values, [1])  # max over ranks >= i
    retrieved = hits[:, -1:]
    level = torch.tensor(list(levels), dtype=r.dtype, device=hits.device)
    needed = torch.floor(level * r.num_relevant.unsqueeze(1) + round_up)  # 0.5: C lround for values >= 0
    at = torch.searchsorted(hits.contiguous(), needed.contiguous()).clamp(max=r.list_size - 1)
    value = best_below.gather(1, at)
    return torch.where((needed <= retrieved) & (retrieved > 0), value, 0), r.no_relevant


def _eleven_point(r: Ranking, ks: Ks, levels: Sequence[float] = IPREC_LEVELS, round_up: float = 0.5) -> Values:
    # summed one by one from the highest level down, as trec_eval's loop adds them (the same last bits: a mean on
    # a printed rounding boundary prints as trec_eval's does)
    values = torch.flip(_iprec(r, ks, levels, round_up)[0], [1])
    return _one_column(_sum_in_order(values) / len(levels), ks), r.no_relevant


def _rprec_mult(r: Ranking, ks: Ks, multiples: Sequence[float] = RPREC_MULTIPLES) -> Values:
    # precision at (long)(x * R + 0.9) items, counting missing items as non-relevant (trec_eval's Rprec_mult)
    mult = torch.tensor(list(multiples), dtype=r.dtype, device=r.labels.device)
    cut = torch.floor(mult * r.num_relevant.unsqueeze(1) + 0.9)
    index = (cut - 1).clamp(0, r.list_size - 1).long()
    value = at_cutoffs(r.hits, index) / cut.clamp_min(1)
    return torch.where(cut > 0, value, 0), r.no_relevant


def _relative_precision(r: Ranking, ks: Ks) -> Values:
    # relevant items in the top k / min(k, R): precision that a perfect ranking could reach 1 in
    index, k_eff = cutoff_index(r, ks)
    denominator = torch.minimum(k_eff, r.num_relevant.unsqueeze(1)).clamp_min(1)
    return at_cutoffs(r.hits, index) / denominator, r.no_relevant


def _unjudged(r: Ranking, ks: Ks) -> Values:
    # fraction of the top k that has no judgment (k also when fewer items were retrieved; trec_eval's unj); linear in
    # the per-position flags, so the tie groups' means give its expectation
    unjudged = torch.cumsum(r.expected((r.valid & ~_judged(r)).to(r.dtype)), 1)
    index, k_eff = cutoff_index(r, ks)
    return at_cutoffs(unjudged, index) / k_eff.clamp_min(1), _none(r)


def _set_measure(r: Ranking, ks: Ks, which: str = "map", beta: float = 1.0) -> Values:
    """trec_eval's ``set_map`` (``which="map"``) and ``set_F`` (``"F"``, with ``beta``) of the retrieved set (the
    registry declares set_P, set_recall and set_relative_P on precision's, recall's and relative precision's)."""
    rel_ret, ret, big_r = r.relevant.sum(1), r.num_valid, r.num_relevant
    if which == "map":
        value = rel_ret * rel_ret / (ret * big_r).clamp_min(1)
    elif which == "F":
        p, rc = rel_ret / ret.clamp_min(1), rel_ret / big_r.clamp_min(1)
        value = torch.where(rel_ret > 0, (beta + 1) * p * rc / (beta * p + rc).clamp_min(1e-300), 0)
    else:
        raise ValueError(f"Unknown set measure {which!r}: expected 'map' or 'F'.")
    return _one_column(value, ks), r.no_relevant


def _utility(r: Ranking, ks: Ks, weights: Sequence[float] = (1.0, -1.0, 0.0, 0.0)) -> Values:
    # a * rel_ret + b * nonrel_ret + c * rel_not_ret + d * nonrel_not_ret, with trec_eval's default collection size
    # (-N) of 0: nonrel_not_ret = 0 - ret - R + rel_ret
    a, b, c, d = weights
    rel_ret, ret, big_r = r.relevant.sum(1), r.num_valid, r.num_relevant
    value = a * rel_ret + b * (ret - rel_ret) + c * (big_r - rel_ret) + d * (rel_ret - ret - big_r)
    return _one_column(value, ks), _none(r)


def _count(r: Ranking, ks: Ks, what: str = "ret") -> Values:
    """``ret`` (retrieved items), ``rel`` (R), ``rel_ret`` or ``nonrel_judged_ret`` per query."""
    counts = {"ret": lambda: r.num_valid, "rel": lambda: r.num_relevant, "rel_ret": lambda: r.relevant.sum(1),
              "nonrel_judged_ret": lambda: _judged_nonrelevant(r).sum(1)}
    if what not in counts:
        raise ValueError(f"Unknown count {what!r}: expected 'ret', 'rel', 'rel_ret' or 'nonrel_judged_ret'.")
    return _one_column(counts[what](), ks), _none(r)


def _padded(x: Tensor, width: int) -> Tensor:
    return torch.nn.functional.pad(x, (0, width - x.shape[1])) if x.shape[1] < width else x[:, :width]


def _gains_and_ideal(r: Ranking) -> tuple[Tensor, Tensor, Tensor]:
    """Ranked gains, ideal gains (descending) and ``log2(rank + 1)``, all ``[Q, W]`` (zero-padded, W past both)."""
    ideal = r.ideal_gains("linear")
    width = max(r.list_size, ideal.shape[1]) + 1
    gains = _padded(torch.where(r.valid, r.labels, 0).to(r.dtype), width)
    log2_rank = torch.log2(torch.arange(2, width + 2, device=gains.device, dtype=r.dtype))
    return gains, _padded(ideal.to(r.dtype), width), log2_rank


def _bin_g(r: Ranking, ks: Ks) -> Values:
    _refuse_tie_average(r, "binG")
    rel = torch.where(r.valid, r.relevant, 0)
    nonrel_above = r.positions - torch.cumsum(rel, 1)  # at a relevant rank: the non-relevant documents above it
    terms = torch.where(rel > 0, 1 / torch.log2(2 + nonrel_above), 0)
    value = _sum_in_order(terms) / r.num_relevant.clamp_min(1)
    return _one_column(torch.where(rel.sum(1) > 0, value, 0), ks), r.no_relevant


def _g(r: Ranking, ks: Ks) -> Values:
    _refuse_tie_average(r, "G")
    gains, ideal, _ = _gains_and_ideal(r)
    cost = torch.cumsum(torch.where(ideal >= 1, ideal, 1), 1)
    gained = torch.cumsum(gains, 1)
    terms = torch.where(gains != 0, gains / torch.log2(2 + cost - gained).where(gains != 0, 1), 0)
    total_ideal = _sum_in_order(torch.where(ideal > 0, ideal, 0))
    value = torch.where(total_ideal > 0, _sum_in_order(terms) / total_ideal.where(total_ideal > 0, 1), 0)
    return _one_column(value, ks), ~r.has_positive_label


def _cumulative_dcg(r: Ranking) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Ranked and ideal gains, and their running DCGs (the ideal's of positive gains only), all ``[Q, W]``."""
    gains, ideal, log2_rank = _gains_and_ideal(r)
    dcg = torch.cumsum(torch.where(gains != 0, gains / log2_rank, 0), 1)
    return gains, ideal, dcg, torch.cumsum(torch.where(ideal > 0, ideal / log2_rank, 0), 1)


def _ndcg_rel(r: Ranking, ks: Ks) -> Values:
    _refuse_tie_average(r, "ndcg_rel")
    gains, ideal, dcg, ideal_dcg = _cumulative_dcg(r)
    positive = gains > 0
    terms = torch.where(positive, dcg / ideal_dcg.where(positive, 1), 0)
    num_positive = (ideal > 0).sum(1)
    missed = (num_positive - positive.sum(1)).to(r.dtype)
    final = dcg[:, -1] / ideal_dcg[:, -1]  # 0/0 without positive gains: the sum is then NaN, and not > 0
    total = _sum_in_order(terms) + missed * final
    value = torch.where(total > 0, total / num_positive.clamp_min(1), 0)
    return _one_column(value, ks), ~r.has_positive_label


def _rndcg(r: Ranking, ks: Ks) -> Values:
    _refuse_tie_average(r, "Rndcg")
    _, ideal, dcg, ideal_dcg = _cumulative_dcg(r)
    zero = dcg.new_zeros(dcg.shape[0], 1)
    dcg_before, ideal_before = torch.cat([zero, dcg[:, :-1]], 1), torch.cat([zero, ideal_dcg[:, :-1]], 1)
    # R levels: the ranks b >= 1 where the ideal gain changes from a positive one; the NDCG there reads the first b
    # ranked documents (all of them when the list is shorter) against the ideal's first b
    previous = torch.cat([ideal[:, :1], ideal[:, :-1]], 1)
    level = (ideal != previous) & (previous > 0)
    level[:, 0] = False
    terms = torch.where(level, dcg_before / ideal_before.where(level, 1), 0)  # the gains past the list are 0
    num_positive = (ideal > 0).sum(1)
    # trec_eval adds the NDCG at the list's end when its loop over the ideal stops two ranks or more before the end
    tail = num_positive + 1 < r.num_valid.to(torch.int64)
    whole = torch.where(tail, dcg[:, -1] / ideal_dcg[:, -1].where(tail, 1), 0)
    count = level.sum(1) + tail.to(torch.int64)
    value = (_sum_in_order(terms) + whole) / count  # 0/0 (NaN) as in trec_eval when no gain is positive (-l 0)
    return _one_column(torch.where(r.no_relevant, 0, value), ks), r.no_relevant


def judged_counts(num_judged: object, ideal_target: object, measure: str = "bpref") -> Tensor | None:
    """``num_judged`` checked (None or an integer tensor of counts, one per query) and flattened to ``[Q]``; required
    with an ``ideal_target``, whose 0-padding ``measure`` (bpref) cannot tell from judged non-relevant items."""
    if num_judged is None:
        if ideal_target is not None:
            raise ValueError(f"{measure} needs `num_judged` (the number of judged items of each query, retrieved or "
                             "not) when `ideal_target` is given: its judged non-relevant items count, and its "
                             "0-padding cannot be told from them.")
        return None
    if not is_integer_tensor(num_judged):
        shown = f"dtype {num_judged.dtype}" if isinstance(num_judged, Tensor) else type(num_judged).__name__
        raise ValueError(f"Argument `num_judged` must be an integer tensor of counts, one per query, got {shown}.")
    return num_judged.reshape(-1)


@with_common_args
def bpref(
    preds: Tensor, target: Tensor, *, judged: Tensor | None = None, num_judged: Tensor | None = None,
    ties: Ties = "first", **options: Unpack[MeasureOptions],
) -> Tensor:
    """Binary preference (Buckley and Voorhees, SIGIR 2004; trec_eval ``bpref``), for incomplete judgments:
    ``1/R * sum over retrieved relevant items of (1 - min(n, R) / min(NR, R))``, ``n`` the judged non-relevant items
    above the relevant one, ``NR`` those of the query, retrieved or not. Ties: in ranking order, never averaged.

    {common_args}
        judged: Bool ``[..., N]``, True for an item with a judgment (default: every real item).
        num_judged: Integer ``[...]`` (one per query; flat input: in ascending id order), the number of judged
            items of each query, retrieved or not (:attr:`torchrank.io.TrecBatch.num_judged`): ``NR = num_judged
            - R``. Needed with ``ideal_target``; without both, the list holds every judged item. A count below R
            plus the judged non-relevant items listed is refused (``validate_args``).

    Example:
        >>> import torch
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
        >>> target = torch.tensor([1, 0, 0, 1, 0])
        >>> bpref(preds, target)  # second relevant item: 2 of the 3 judged non-relevant above it, R = 2
        tensor(0.5000)
        >>> bpref(preds, target, judged=torch.tensor([True, False, True, True, True]))
        tensor(0.7500)
        >>> bpref(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1]), ideal_target=torch.tensor([1, 1, 0]),
        ...       num_judged=torch.tensor(5))  # 3 judged non-relevant items, 2 not retrieved: 1 - min(1, 2) / 2
        tensor(0.7500)
    """
    num_judged = judged_counts(num_judged, options["ideal_target"])
    return run_measure(_bpref, preds, target, **options, judged=judged, ties=ties, num_judged=num_judged)


def judged_only_mask(mask: Tensor | None, judged: Tensor | None, judged_only: bool) -> Tensor | None:
    """The ``mask`` that keeps only judged items when ``judged_only`` (trec_eval ``-J``), else ``mask``: unjudged
    items become padding, so the judged items below them move up. Without ``judged`` nothing is dropped.

    Example:
        >>> import torch
        >>> judged_only_mask(torch.tensor([True, True, False]), torch.tensor([True, False, True]), True)
        tensor([ True, False, False])
    """
    if not isinstance(judged_only, bool):
        raise TypeError(f"Argument `judged_only` must be a bool, got {judged_only!r}.")
    if not judged_only or judged is None:
        return mask
    if not isinstance(judged, Tensor) or judged.dtype != torch.bool:
        raise TypeError("Argument `judged` must be a bool tensor when `judged_only=True`.")
    return judged if mask is None else mask & judged


def _judged_fraction(r: Ranking, ks: Ks) -> Values:
    # linear in the per-position judged flags: the tie groups' means give its exact expectation
    judged = torch.cumsum(r.expected(_judged(r).to(r.dtype)), 1)
    index, k_eff = cutoff_index(r, ks)
    shown = torch.minimum(k_eff, r.num_valid.unsqueeze(1))
    return at_cutoffs(judged, index) / shown.clamp_min(1), _none(r)  # defined without relevant items


def _pooled_above(r: Ranking, pooled_unjudged: Tensor) -> Tensor:
    """Pooled but unjudged items ranked above each position ``[Q, N]``, from ``pooled_unjudged`` in descending score
    order (:func:`pooled_in_score_order`), which the ranking permutes only within tie groups (keeping their order for
    ``"first"``): ``"optimistic"`` puts none of a group above, ``"pessimistic"`` all."""
    if pooled_unjudged.shape[0] != r.num_queries or pooled_unjudged.shape[1] < r.list_size:
        raise ValueError(f"Argument `pooled_unjudged` must be [queries, items] like the ranking ({r.num_queries}, "
                         f">= {r.list_size}), got {tuple(pooled_unjudged.shape)}.")
    pooled = (pooled_unjudged[:, : r.list_size] & r.valid).to(r.dtype)
    before = torch.cumsum(pooled, 1) - pooled
    if r.ties == "first":
        return before
    above_group = before.gather(1, r.tie_groups[1])
    return above_group if r.ties == "optimistic" else above_group + r.group_sum(pooled)  # pessimistic: the whole group


def _inferred_ap(r: Ranking, ks: Ks, pooled_unjudged: Tensor | None = None) -> Values:
    _refuse_tie_average(r, "infAP")
    # trec_eval's m_infAP.c (inferred_average_precision's docstring writes it out)
    rel, judged = r.relevant * r.valid, _judged(r).to(r.dtype)
    rel_above, judged_above = torch.cumsum(rel, 1) - rel, torch.cumsum(judged, 1) - judged
    pooled = judged_above if pooled_unjudged is None else judged_above + _pooled_above(r, pooled_unjudged)
    precision = (rel_above + INFAP_EPSILON) / (judged_above + 2 * INFAP_EPSILON)  # judged: relevant + non-relevant
    terms = (1 + pooled * precision) / r.positions * rel
    return _one_column(_sum_in_order(terms) / r.num_relevant.clamp_min(1), ks), r.no_relevant


@with_common_args
def judged_fraction(
    preds: Tensor, target: Tensor, *, k: Cutoffs = None, indexes: Tensor | None = None, mask: Tensor | None = None,
    judged: Tensor | None = None, ties: Ties = "average", reduction: Reduction = "mean", validate_args: bool = True,
) -> Tensor:
    """Judged@k: the share of the top ``min(k, items retrieved)`` items that have a judgment (ir_measures'
    ``Judged@k``); 0 for an empty list. It reads no label: queries without relevant items count like any other.

    {common_args}
        judged: Bool ``[..., N]``, True for an item with a judgment (default: every real item).

    Example:
        >>> import torch
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
        >>> target = torch.tensor([1, 0, 0, 0])
        >>> judged_fraction(preds, target, k=[2, 10], judged=torch.tensor([True, False, True, False]))
        tensor([0.5000, 0.5000])
    """
    return run_measure(  # it reads no label: no relevance threshold, no empty queries
        _judged_fraction, preds, target, k=k, indexes=indexes, mask=mask, ideal_target=None, judged=judged, ties=ties,
        empty_target_action="neg", reduction=reduction, relevance_threshold=1, validate_args=validate_args)


@with_common_args
def inferred_average_precision(
    preds: Tensor, target: Tensor, *, judged: Tensor | None = None, pooled_unjudged: Tensor | None = None,
    ties: Ties = "first", **options: Unpack[MeasureOptions],
) -> Tensor:
    """Inferred AP (Yilmaz and Aslam, CIKM 2006), as trec_eval's ``infAP``: the relevant item at rank ``i`` adds
    ``(1 + P * (r + eps) / (r + n + 2 eps)) / i``, with ``r`` and ``n`` the relevant and judged non-relevant items
    above it, ``P`` those above in the pool (judged, or pooled but unjudged) and ``eps = 1e-5``; the sum is divided
    by R. With every item judged it is AP. ``ties="average"`` is refused.

    {common_args}
        judged: Bool ``[..., N]``, True for an item with a judgment (default: every real item).
        pooled_unjudged: Bool ``[..., N]``, True for an item in the pool that was not judged (qrels label -1;
            default: none, every unjudged item lies outside the pool). Dense input only.

    Example:
        >>> import torch
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
        >>> target = torch.tensor([1, 0, 1, 0])
        >>> judged = torch.tensor([True, False, True, True])
        >>> inferred_average_precision(preds, target, judged=judged)  # (1 + (1 + 1 * 1) / 3) / 2
        tensor(0.8333)
        >>> inferred_average_precision(preds, target, judged=judged, pooled_unjudged=~judged)
        tensor(1.)
    """
    if pooled_unjudged is not None:
        preds, target, options["mask"], judged, pooled_unjudged = pooled_in_score_order(
            preds, target, options["mask"], judged, pooled_unjudged, options["indexes"])
    params = {"judged": judged, "pooled_unjudged": pooled_unjudged}
    return run_measure(_inferred_ap, preds, target, ties=ties, **options, **params)


def pooled_in_score_order(
    preds: Tensor, target: Tensor, mask: Tensor | None, judged: Tensor | None, pooled_unjudged: object,
    indexes: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None, Tensor]:
    """``pooled_unjudged`` checked, and the dense inputs with columns in descending score order (real items first,
    stable; no value depends on it), the flags as ``[Q, N]`` rows: infAP's kernel reads the flags per column."""
    if indexes is not None:
        raise ValueError("Argument `pooled_unjudged` takes dense input only, not `indexes`.")
    if not isinstance(pooled_unjudged, Tensor) or pooled_unjudged.dtype != torch.bool:
        raise TypeError("Argument `pooled_unjudged` must be a bool tensor of the shape of `preds`.")
    if pooled_unjudged.shape != preds.shape:
        raise ValueError(f"Argument `pooled_unjudged` must have the shape of `preds` {tuple(preds.shape)}, "
                         f"got {tuple(pooled_unjudged.shape)}.")
    # real items first (a stable sort of the mask), then by descending score (stable: ties keep that order)
    order = torch.sort(preds, dim=-1, descending=True, stable=True).indices
    if mask is not None:
        order = order.gather(-1, torch.sort(mask.gather(-1, order).byte(), descending=True, stable=True).indices)

    def take(x: Tensor | None) -> Tensor | None:
        return None if x is None else x.gather(-1, order)

    return (take(preds), take(target), take(mask), take(judged),
            take(pooled_unjudged).reshape(-1, preds.shape[-1]))  # fmt: skip


@with_common_args
def recall_cap(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """Capped recall at k: relevant items in the top k / ``min(k, R)`` (BEIR's ``R_cap@k``, trec_eval's
    ``relative_P``): a perfect ranking brings it to 1 at every cut-off.

    {common_args}

    Example:
        >>> import torch
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
        >>> target = torch.tensor([1, 0, 1, 1, 1])
        >>> recall_cap(preds, target, k=[2, 4])  # 1 / min(2, 4), 3 / min(4, 4)
        tensor([0.5000, 0.7500])
    """
    return run_measure(_relative_precision, preds, target, **options)
