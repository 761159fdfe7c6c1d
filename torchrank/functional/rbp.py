"""Rank-biased precision (Moffat and Zobel, TOIS 2008) and its residual: linear in the gains, so exact under
``ties="average"`` (definitions, and how trec_eval 10 differs: docs/measures.md)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._fused_columns import RBP
from torchrank.functional._measure import measure
from torchrank.functional._options import RankingOptions, Unpack, with_common_args
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index
from torchrank.functional.checks import check_max_label


# the fused kernel computes RBP, not the residual, which reads judgments the kernel does not take
@measure(fused=lambda params: None if params["residual"] else RBP)
def _rbp(r: Ranking, ks: Ks, p: float, max_label: float | None, residual: bool) -> Values:
    index, k_eff = cutoff_index(r, ks)
    # p^i as trec_eval computes them (each the previous times p) and (1 - p) applied to the sum: the same last bits,
    # so values on a printed rounding boundary (513/4000) print as trec_eval's do
    factors = torch.full((r.list_size + 1,), p, dtype=r.dtype, device=r.labels.device)
    factors[0] = 1
    powers = torch.cumprod(factors, 0)
    weights = powers[:-1]
    if residual:
        unjudged = torch.zeros_like(r.labels) if r.judged is None else (r.valid & ~r.judged).to(r.dtype)
        depth = torch.minimum(k_eff, r.num_valid.unsqueeze(1)).to(torch.int64)
        unseen = powers[depth.clamp(max=r.list_size)]
        residual_values = unseen + (1 - p) * at_cutoffs(torch.cumsum(r.expected(unjudged) * weights, 1), index)
        # what unseen items could add does not depend on the judged ones: no empty-query action
        return residual_values, torch.zeros_like(r.has_positive_label)
    gains = r.labels / r.top_label(max_label)
    return (1 - p) * at_cutoffs(torch.cumsum(r.expected(gains) * weights, 1), index), ~r.has_positive_label


def _rbp_options(*, p: float, max_label: float | None, residual: bool) -> dict[str, object]:
    """RBP's kernel parameters, checked (shared with ``evaluate``'s ``rbp.95``)."""
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p < 1:
        raise ValueError(f"Argument `p` must lie in (0, 1), got {p}.")
    check_max_label(max_label)
    return {"p": p, "max_label": max_label, "residual": bool(residual)}


@with_common_args
def rbp(
    preds: Tensor, target: Tensor, *, p: float = 0.9, max_label: float | None = None, residual: bool = False,
    judged: Tensor | None = None, **options: Unpack[RankingOptions],
) -> Tensor:
    """Rank-biased precision at k with persistence ``p``, or its residual.

    {common_args}
        p: Persistence, the probability of looking at the next item, in (0, 1); 0.9 as trec_eval.
        max_label: Top of the label scale: gains are ``label / max_label``. Default: each query's largest
            label (of ``ideal_target`` and the ranked items; trec_eval 10).
        residual: Return the residual (the most unjudged and unseen items could add; no ``empty_target_action``).
        judged: Bool like ``preds``, True for a judged item (default: all); only the residual reads it.

    Example:
        >>> import torch
        >>> rbp(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1]), p=0.5)  # 0.5 * (1 + 0.25)
        tensor(0.6250)
        >>> rbp(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1]), p=0.5, residual=True)  # 0.5 ** 3
        tensor(0.1250)
    """
    params = _rbp_options(p=p, max_label=max_label, residual=residual)
    check_max_label(max_label, target, options["validate_args"])
    return run_measure(_rbp, preds, target, **options, judged=judged, **params)
