"""Graded average precision (Robertson, Kanoulas and Yilmaz, SIGIR 2010).

A user's relevance threshold is grade j with probability ``g_j`` (grades 1..c; an item of grade ``i``, the
integer part of its label, is relevant to that user when ``i >= j``). With ``i_n`` the grade at rank n and
``G(i) = g_1 + ... + g_i``:

``GAP = sum_{n: i_n > 0} (1/n) sum_{m <= n} G(min(i_m, i_n)) / sum_i R_i G(i)``

with ``R_i`` the judged items of grade i. Since ``G(min(a, b)) = sum_j g_j [a >= j] [b >= j]``, the numerator is
``sum_j g_j`` times AP's numerator at threshold j, ``sum_n [i_n >= j] c_j(n) / n`` (``c_j(n)``: items of grade
>= j in the top n), and the denominator ``sum_j g_j R_{>=j}``: GAP is a g-weighted AP over thresholds, and AP
when there is one grade.

Ties (``"average"``): ``E[[i_n >= j] c_j(n)]`` has McSherry and Najork's closed form per threshold (the one AP
uses, :attr:`Ranking.relevant_times_count`), so GAP is exact under random order of tie groups.

Default probabilities: uniform over the grades 1..c, ``g_j = 1/c``. ``G(i) = i/c`` is then linear, c cancels,
and any c at least the query's top grade gives the same value: a query's GAP does not depend on the rest of
the batch (:func:`_grade_weights`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from torchrank.functional._cutoffs import cutoff_index, sum_to_cutoffs
from torchrank.functional._options import RankingOptions, Unpack, with_common_args
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values

Probabilities = tuple[float, ...]


def _gap_options(*, grade_probabilities: Sequence[float] | None) -> dict[str, object]:
    """GAP's kernel parameters (shared with ``evaluate``'s ``gap``): the probabilities as a tuple of floats, checked.

    Example:
        >>> _gap_options(grade_probabilities=[0.25, 0.75])
        {'grade_probabilities': (0.25, 0.75)}
    """
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

    Each item's grade is the integer part of its label (0: not relevant); a user whose threshold is grade j
    (probability ``g_j``) counts grades ``>= j`` as relevant. Items past k add nothing; the denominator counts
    every judged item, as AP's R. Graded: ``relevance_threshold`` does not apply. With one grade it is AP.

    {common_args}
        grade_probabilities: ``(g_1, ..., g_c)``, probabilities summing to 1. Default: uniform over the
            grades 1 to the top grade (any top at least the query's largest grade gives the same value).
            A label of grade above c is an error when ``validate_args``.

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
