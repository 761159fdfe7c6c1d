"""trec_eval's experimental gain measures of ``-m all_trec``: binG, G, ndcg_rel and Rndcg, each following trec_eval
10.0's C code with its default gains, sums in its order (definitions: docs/measures.md, "trec_eval measures beyond
the functions above"). With no tie-averaged form, they refuse ``ties="average"`` on tied input."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._ranked import Ks, Ranking, Values
from torchrank.functional.trec_extra import _one_column, _refuse_tie_average

__all__: list[str] = []


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
