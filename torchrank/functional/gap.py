"""Graded average precision (Robertson, Kanoulas and Yilmaz, SIGIR 2010): a ``g``-weighted AP over the grade
thresholds j, so AP's closed form for ties at each threshold makes it exact under ``ties="average"``; by default
(uniform ``g``) a query's value does not depend on the rest of the batch (definition: docs/measures.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from torchrank.functional._options import RankingOptions, Unpack, with_common_args
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, cutoff_index, sum_to_cutoffs

Probabilities = tuple[float, ...]


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
