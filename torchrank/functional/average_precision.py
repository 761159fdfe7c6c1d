"""Average precision (AP, MAP), average recall (MAR) and graded average precision (GAP), from
:meth:`Ranking.times_count`, exact under ``ties="average"`` (definitions: docs/measures.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from torchrank.functional._fused_columns import AP
from torchrank.functional._measure import measure
from torchrank.functional._options import RankingOptions, Unpack, with_common_args
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index, sum_to_cutoffs
from torchrank.functional.checks import check_choice

#: What AP@k divides by: ``"relevant"``, all R relevant items of the query (trec_eval ``map_cut``, ranx); ``"found"``,
#: the relevant items in the top k (torchmetrics' ``retrieval_average_precision(top_k=k)``; 0 when none is there).
DENOMINATORS = ("relevant", "found")
Probabilities = tuple[float, ...]


def _average_precision_options(*, denominator: str) -> dict[str, object]:
    """AP's kernel parameters, checked; none for the default, which the fused kernel computes."""
    check_choice("denominator", denominator, DENOMINATORS)
    return {} if denominator == "relevant" else {"denominator": denominator}


@measure(fused=AP)
def _average_precision(r: Ranking, ks: Ks, denominator: str = "relevant") -> Values:
    index, _ = cutoff_index(r, ks)
    if denominator == "found":
        return _ap_over_found(r, ks, index), r.no_relevant
    # hits / i summed one by one in rank order, trec_eval's arithmetic: AP often lands exactly on a printed rounding
    # boundary (71/160 = 0.44375), where a product by 1/i or a pairwise sum would print 0.4437 for its 0.4438
    precision_sum = at_cutoffs(torch.cumsum(r.relevant_times_count / r.positions, 1), index)
    return precision_sum / r.num_relevant.clamp_min(1).unsqueeze(1), r.no_relevant


def _ap_over_found(r: Ranking, ks: Ks, index: Tensor) -> Tensor:
    """AP@k over the relevant items in the top k ``[Q, K]`` (0 where none is), exact under ``ties="average"`` by the
    derivation in docs/measures.md (average_precision), whose s, a, m, r, t, h, S0, S1, D are ``s``, ``a``, ``m``,
    ``rel``, ``t``, ``h``, ``s0``, ``s1``, ``above`` here."""
    terms = torch.cumsum(r.relevant_times_count * r.reciprocal_positions, 1)  # expected precision sums
    index = index if index.ndim == 2 else index.unsqueeze(0).expand(r.num_queries, -1)
    fixed = at_cutoffs(terms, index) / at_cutoffs(r.hits, index).clamp_min(1)  # exact where no group spans k
    ints = [k for k in ks if k is not None]
    if not r.averages_ties or not ints or r.list_size == 0:  # a whole list ends with its last group
        return fixed
    m, group_relevant, prior, offset = (x.gather(1, index) for x in r.tie_group_stats)
    start = index - offset.long()  # each cut-off's group: its first position (0-based), positions inside (t)
    s, t = start.to(torch.float64), (offset + 1).to(torch.float64)
    before = (start - 1).clamp_min(0)
    above = torch.where(start > 0, terms.gather(1, before), 0).to(torch.float64)
    harmonic = torch.cumsum(r.reciprocal_positions.to(torch.float64), 0)
    s0 = harmonic[index] - torch.where(start > 0, harmonic[before], 0)  # sum_{j<=t} 1/(s + j)
    s1 = t - (s + 1) * s0  # sum_{j<=t} (j - 1)/(s + j)
    # h = 0 .. the deepest cut-off: a static width (no host read)
    h = torch.arange(min(max(ints), r.list_size) + 1, device=index.device, dtype=torch.float64)
    m, rel, t, a, s0, s1, above = (x.to(torch.float64).unsqueeze(-1) for x in (m, group_relevant, t, prior, s0, s1,
                                                                              above))
    possible = (h <= rel) & (h <= t) & (t - h <= m - rel)
    log_p = _log_choose(rel, h.minimum(rel)) + _log_choose(m - rel, (t - h).clamp_min(0).minimum(m - rel))
    p = torch.where(possible, torch.exp(log_p - _log_choose(m, t)), 0)
    group = h / t * ((a + 1) * s0 + (h - 1).clamp_min(0) / (t - 1).clamp_min(1) * s1)
    value = (p * torch.where(a + h > 0, (above + group) / (a + h).clamp_min(1), 0)).sum(-1)
    spans = (t < m).squeeze(-1) & torch.tensor([k is not None for k in ks], device=index.device)
    return torch.where(spans, value.to(r.dtype), fixed)


def _log_choose(n: Tensor, k: Tensor) -> Tensor:
    """``log C(n, k)`` for ``0 <= k <= n``."""
    return torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)


def _average_recall(r: Ranking, ks: Ks) -> Values:
    index, _ = cutoff_index(r, ks)
    num_relevant = r.num_relevant.clamp_min(1).unsqueeze(1)
    recall_sum = sum_to_cutoffs(r.relevant_times_count, index, ks) / num_relevant
    return recall_sum / num_relevant, r.no_relevant


@with_common_args
def average_precision(
    preds: Tensor, target: Tensor, *, denominator: str = "relevant", **options: Unpack[RankingOptions]
) -> Tensor:
    """Average precision at k: the sum of P@i over the relevant ranks i <= k, divided by R (trec_eval's ``map_cut``,
    ranx). The mean over queries is MAP.

    {common_args}
        denominator: ``"relevant"`` (all R relevant items of the query, default) or ``"found"``: the relevant items
            in the top k, 0 where none is (torchmetrics' ``retrieval_average_precision(top_k=k)``).

    Example:
        >>> import torch
        >>> ranks = torch.tensor([1, 2, 4, 5, 7, 9])  # relevant ranks, 6 relevant of 10
        >>> target = torch.zeros(10).index_fill(0, ranks - 1, 1)
        >>> preds = torch.arange(10, 0, -1.0)
        >>> average_precision(preds, target)
        tensor(0.8218)
        >>> average_precision(preds, target, k=5), average_precision(preds, target, k=5, denominator="found")
        (tensor(0.5917), tensor(0.8875))
    """
    params = _average_precision_options(denominator=denominator)
    return run_measure(_average_precision, preds, target, **options, **params)


@with_common_args
def average_recall(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """Average recall at k: R@i summed over the relevant ranks i <= k, divided by R (AP with recall for precision).
    The mean over queries is MAR.

    {common_args}

    Example:
        >>> import torch
        >>> # relevant at ranks 1 and 3 of 2 relevant: (R@1 + R@3) / 2 = (1/2 + 2/2) / 2
        >>> average_recall(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1]))
        tensor(0.7500)
    """
    return run_measure(_average_recall, preds, target, **options)


def _gap_options(*, grade_probabilities: Sequence[float] | None) -> dict[str, object]:
    """GAP's kernel parameters (shared with ``evaluate``'s ``gap``): the probabilities as a tuple of floats, checked."""
    if grade_probabilities is None:
        return {"grade_probabilities": None}
    given = grade_probabilities.tolist() if isinstance(grade_probabilities, Tensor) else grade_probabilities
    values = tuple(given) if isinstance(given, Sequence) and not isinstance(given, str | bytes) else ()
    if not values or not all(isinstance(g, int | float) and not isinstance(g, bool) for g in values):
        raise TypeError(f"Argument `grade_probabilities` must be a nonempty sequence of numbers (g_1, ..., g_c), "
                        f"got {given!r}.")
    if not all(math.isfinite(g) and g >= 0 for g in values) or abs(sum(values) - 1) > 1e-6:
        raise ValueError(f"Argument `grade_probabilities` must hold probabilities >= 0 that sum to 1 (g_j: the "
                         f"user's threshold is grade j), got {values!r}.")
    return {"grade_probabilities": tuple(float(g) for g in values)}


# the default probabilities visit every grade 1..top while there are at most this many; past it, only the grades
# the labels hold (one sort of them), so a label of 10^6 costs a few passes, not a million
_EVERY_GRADE_UP_TO = 64


def _grade_weights(r: Ranking, grade_probabilities: Probabilities | None) -> list[tuple[float, float]]:
    """``(j, weight)`` pairs with ``sum weight [grade >= j] = G(grade)``: the given ``(j, g_j)``; by default (the
    ``1/c`` left out: it cancels) each grade up to the top one (one host read) with weight 1, or past
    :data:`_EVERY_GRADE_UP_TO` the grades the labels hold, weighted by the distance to the next lower one held."""
    if grade_probabilities is not None:
        return list(enumerate(grade_probabilities, start=1))
    tops = [labels.amax().to(r.dtype) for labels in (r.labels, r.ideal_labels) if labels.numel()]
    top = torch.stack(tops).amax().item() if tops else 0.0  # one host read: the number of grades sets the passes
    if not math.isfinite(top):
        raise ValueError("Graded average precision needs finite labels (grades), got an infinite one.")
    if top < _EVERY_GRADE_UP_TO + 1:
        return [(float(j), 1.0) for j in range(1, int(top) + 1)]
    held = sorted({g for labels in (r.labels, r.ideal_labels) for g in torch.unique(labels.floor()).tolist() if g >= 1})
    return [(g, g - lower) for g, lower in zip(held, [0.0, *held[:-1]], strict=True)]


def _graded_average_precision(r: Ranking, ks: Ks, grade_probabilities: Probabilities | None = None) -> Values:
    index, _ = cutoff_index(r, ks)
    numerator = torch.zeros_like(r.labels)
    denominator = torch.zeros(r.num_queries, dtype=r.dtype, device=r.labels.device)
    # one pass per grade, never per query; grades summed in order, so grades a query lacks add exact zeros
    for j, g in _grade_weights(r, grade_probabilities):
        at_least = (r.labels >= j).to(r.dtype)  # padding holds label 0
        numerator = numerator + g * r.times_count(at_least)
        denominator = denominator + g * r.per_ideal_row(lambda labels, j=j: (labels >= j).sum(1).to(r.dtype))
    total = sum_to_cutoffs(numerator * r.reciprocal_positions, index, ks)
    no_relevant = denominator <= 0
    return total / torch.where(no_relevant, 1, denominator).unsqueeze(1), no_relevant


@with_common_args
def graded_average_precision(
    preds: Tensor, target: Tensor, *, grade_probabilities: Sequence[float] | None = None,
    **options: Unpack[RankingOptions],
) -> Tensor:
    """Graded average precision at k (Robertson, Kanoulas and Yilmaz, SIGIR 2010): AP for graded labels.

    A label's grade is its integer part; a user whose threshold is grade j (probability ``g_j``) counts grades
    ``>= j`` as relevant. Graded: ``relevance_threshold`` does not apply. With one grade it is AP.

    {common_args}
        grade_probabilities: ``(g_1, ..., g_c)``, summing to 1 (a label of grade above c is an error with
            ``validate_args``). Default: uniform over the grades 1 to the query's top grade.

    Example:
        >>> import torch
        >>> labels = torch.tensor([2, 0, 1, 2])  # in rank order
        >>> preds = torch.arange(4, 0, -1.0)
        >>> graded_average_precision(preds, labels)  # (2/1 + (1 + 1)/3 + (2 + 1 + 2)/4) / (2 + 1 + 2)
        tensor(0.7833)
        >>> graded_average_precision(preds, labels, grade_probabilities=[1.0, 0.0])  # AP of grades >= 1
        tensor(0.8056)
    """
    params = _gap_options(grade_probabilities=grade_probabilities)
    top = len(params["grade_probabilities"] or ())  # explicit probabilities: no label of a grade above theirs
    for name, values in {"target": target, "ideal_target": options["ideal_target"]}.items():
        if top and options["validate_args"] and isinstance(values, Tensor) and bool((values.double() >= top + 1).any()):
            raise ValueError(f"Argument `{name}` holds a label of grade above {top}, the number of "
                             "`grade_probabilities`.")
    return run_measure(_graded_average_precision, preds, target, **options, **params)
