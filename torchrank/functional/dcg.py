"""DCG and NDCG: linear in the per-position gains, so tie groups' mean gains make them exact under
``ties="average"`` (scikit-learn's tie-averaged ``ndcg_score``; definitions: docs/measures.md)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from torchrank.functional._fused_columns import DCG, DCG_EXP, NDCG, NDCG_EXP
from torchrank.functional._measure import measure
from torchrank.functional._options import RankingOptions, Unpack, with_common_args
from torchrank.functional._pipeline import deepest, run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index, fixed_cutoffs
from torchrank.functional.core import (
    Discount,
    Gain,
    check_gain_discount,
    discounted_gains,
    gain_values,
    largest_exponent,
    rank_weights,
)

# weights(n, dtype, device) -> the discount weights of ranks 1..n
Weights = Callable[[int, torch.dtype, torch.device], Tensor]


def _dcg_options(*, gain: Gain, discount: Discount, log_base: float, power: float) -> dict[str, object]:
    """DCG's and NDCG's kernel parameters, checked (shared with ``evaluate``'s names)."""
    check_gain_discount(gain, discount, log_base)
    if callable(discount):
        return {"gain": gain, "weights": lambda n, dtype, device: rank_weights(discount, n, dtype=dtype, device=device)}
    return {"gain": gain, "weights": functools.partial(_named_weights, discount, float(log_base), float(power))}


def _dcg_at(r: Ranking, ks: Ks, gain: Gain, weights: Weights, top: Tensor | None = None, ideal: bool = False) -> Values:
    """DCG at each cut-off ``[Q, K]`` of the ranking, or with ``ideal`` of the judged labels sorted descending, and
    the gains it sums ``[Q, <=depth]``; ``top`` divides exponential gains by ``2^top`` (NDCG's ratio)."""
    depth = deepest(ks)
    if ideal:  # the exponential gain never decreases with the label: the sorted labels' gains are sorted
        gains = r.ideal_gains(gain, depth) if top is None else gain_values(r.ideal_gains("linear", depth), gain, top)
    elif r.averages_ties:  # a tie group may run past the depth: average whole groups first
        gains = r.expected(gain_values(r.labels, gain, top))[:, :depth]
    else:
        gains = gain_values(r.labels[:, :depth], gain, top)
    n = gains.shape[1]
    discounted = discounted_gains(gains, weights(n, r.dtype, gains.device))
    if len(ks) == 1 and depth is not None:  # one cut-off, at the last position kept (or past it): a sum
        return discounted.sum(1, keepdim=True), gains
    if ideal:  # the whole list (None) is cut-off n; the index is cached, not built per call
        index = fixed_cutoffs(tuple(n if k is None else k for k in ks), n, r.dtype, gains.device)[0]
    else:
        index = cutoff_index(r, ks)[0]
    return at_cutoffs(torch.cumsum(discounted, 1), index), gains


def _fused_code(linear: int, exponential: int) -> Callable[[dict], int | None]:
    """The fused kernel's code for DCG or NDCG: ``linear`` or ``exponential`` gains with the default log2 discount."""

    def rule(params: dict) -> int | None:
        weights, gain = params.get("weights"), params.get("gain")
        log2 = isinstance(weights, functools.partial) and weights.func is _named_weights
        if set(params) != {"gain", "weights"} or not log2 or weights.args != ("log", 2.0, 1.0):
            return None
        return exponential if gain == "exponential" else linear if gain == "linear" else None

    return rule


def _dcg_label_limit(params: dict, dtype: torch.dtype) -> int | None:
    """Exponential DCG refuses labels past the largest power of 2 ``dtype`` holds rather than sum them to inf."""
    return largest_exponent(dtype) if params.get("gain") == "exponential" else None


@measure(fused=_fused_code(DCG, DCG_EXP), label_limit=_dcg_label_limit)
def _dcg(r: Ranking, ks: Ks, gain: Gain, weights: Weights) -> Values:
    return _dcg_at(r, ks, gain, weights)[0], ~_has_ideal_gain(r, gain)


@measure(fused=_fused_code(NDCG, NDCG_EXP))
def _ndcg(r: Ranking, ks: Ks, gain: Gain, weights: Weights) -> Values:
    # exponential gains over 2^(the query's top label): at most 1, so 2^label never overflows (labels > 127 in
    # float32); DCG / ideal DCG is the same ratio
    top = r.top_label(None) if gain == "exponential" else None
    ideal, ideal_gains = _dcg_at(r, ks, gain, weights, top, ideal=True)
    achieved = _dcg_at(r, ks, gain, weights, top)[0]
    if callable(gain) or ideal_gains.shape[1] == 0:  # gains of any sign: a query's ideal DCG may be <= 0
        return achieved / torch.where(ideal > 0, ideal, 1), ~_has_ideal_gain(r, gain)
    # linear and exponential gains are >= 0: an ideal DCG of 0 is a query without a positive label, whose value the
    # empty-query rule replaces (whatever the division gave); the largest gain is > 0 iff a label is
    return achieved / ideal.clamp_min(torch.finfo(ideal.dtype).tiny), ideal_gains[:, 0] <= 0


def _has_ideal_gain(r: Ranking, gain: Gain) -> Tensor:
    if not callable(gain):  # linear and exponential gains are > 0 exactly for labels > 0
        return r.has_positive_label
    return r.backend.rows_any(r.gains(gain, r.ideal_labels) > 0)


@functools.lru_cache(maxsize=64)
def _named_weights(
    discount: str, log_base: float, power: float, n: int, dtype: torch.dtype, device: torch.device
) -> Tensor:
    """Weights of a named discount, built once per list length (read-only: shared between calls)."""
    return rank_weights(discount, n, dtype=dtype, device=device, log_base=log_base, power=power)


@with_common_args
def dcg(
    preds: Tensor, target: Tensor, *, gain: Gain = "linear", discount: Discount = "log", log_base: float = 2.0,
    power: float = 1.0, **options: Unpack[RankingOptions],
) -> Tensor:
    """Discounted cumulative gain at k: ``sum_{i<=k} gain(label_i) / discount(i)``; graded (no ``relevance_threshold``).

    {common_args}

    Example:
        >>> import torch
        >>> labels = torch.tensor([3, 3, 0, 3, 2])  # in rank order
        >>> dcg(torch.arange(5, 0, -1.0), labels, k=5)
        tensor(6.9585)
    """
    params = _dcg_options(gain=gain, discount=discount, log_base=log_base, power=power)
    return run_measure(_dcg, preds, target, **options, **params)


@with_common_args
def ndcg(
    preds: Tensor, target: Tensor, *, gain: Gain = "linear", discount: Discount = "log", log_base: float = 2.0,
    power: float = 1.0, **options: Unpack[RankingOptions],
) -> Tensor:
    """Normalised DCG at k: DCG@k over the ideal DCG@k of the judged labels (trec_eval ``ndcg_cut_k``; ``k=None``:
    ``ndcg``). A query whose ideal DCG is 0 gets ``empty_target_action``'s value.

    {common_args}

    Example:
        >>> import torch
        >>> labels = torch.tensor([3, 3, 0, 3, 2])  # in rank order: DCG 6.958, ideal 7.254
        >>> ndcg(torch.arange(5, 0, -1.0), labels, k=5)
        tensor(0.9592)
    """
    params = _dcg_options(gain=gain, discount=discount, log_base=log_base, power=power)
    return run_measure(_ndcg, preds, target, **options, **params)
