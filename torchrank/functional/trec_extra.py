"""trec_eval's measures beyond the shared families (bpref, iprec_at_recall, Rprec_mult, relative_P, set, unj,
utility, counts, and ``-m all_trec``'s experimental gain measures binG, G, ndcg_rel and Rndcg with trec_eval 10.0's
default gains), each following its C code (``m_bpref.c``, ...) on the ranking's order: with ``ties="first"`` on
lists ordered as :func:`torchrank.io.read_trec` orders them, trec_eval's numbers, sums in its order. Those without a
tie-averaged form (bpref, interpolated precision, the gain measures) refuse ``ties="average"`` on tied input."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from torchrank.functional._inputs import is_integer_tensor, judged_count_problems
from torchrank.functional._measure import measure
from torchrank.functional._options import MeasureOptions, Ties, Unpack, with_common_args
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index

__all__ = ["bpref"]

IPREC_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
RPREC_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


def _none(r: Ranking) -> Tensor:
    return torch.zeros(r.num_queries, dtype=torch.bool, device=r.labels.device)


def _one_column(values: Tensor, ks: Ks) -> Tensor:
    return values.unsqueeze(1).expand(-1, len(ks))


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
    # summed one by one in rank order as trec_eval does (a cumulative sum's end): bpref often lands exactly on a
    # printed rounding boundary (71/160 = 0.44375), where a pairwise sum's last bit would print 0.4438 for 0.4437
    value = torch.cumsum(terms, 1)[:, -1:] / big_r.clamp_min(1)
    return value.expand(-1, len(ks)), r.no_relevant


def _interpolated_precision(r: Ranking, levels: Sequence[float], round_up: float = 0.5) -> Tensor:
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
    return torch.where((needed <= retrieved) & (retrieved > 0), value, 0)


def _iprec(r: Ranking, ks: Ks, levels: Sequence[float] = IPREC_LEVELS, round_up: float = 0.5) -> Values:
    return _interpolated_precision(r, levels, round_up), r.no_relevant


def _eleven_point(r: Ranking, ks: Ks, levels: Sequence[float] = IPREC_LEVELS, round_up: float = 0.5) -> Values:
    # summed one by one from the highest level down, as trec_eval's loop adds them (the same last bits: a mean on
    # a printed rounding boundary prints as trec_eval's does)
    values = torch.flip(_interpolated_precision(r, levels, round_up), [1])
    return (torch.cumsum(values, 1)[:, -1:] / len(levels)).expand(-1, len(ks)), r.no_relevant


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
    # fraction of the top k that has no judgment (k also when fewer items were retrieved; trec_eval's unj)
    unjudged = torch.cumsum((r.valid & ~_judged(r)).to(r.dtype), 1)
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


def _sum_in_order(terms: Tensor) -> Tensor:
    """Each row's terms added one by one, left to right, as trec_eval's loops add them ``[Q]``."""
    return torch.cumsum(terms, 1)[:, -1] if terms.shape[1] else terms.new_zeros(terms.shape[0])


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
