"""Precision, recall, F1 and R-precision: linear in the hits, so tie groups' means make them exact under
``ties="average"`` (definitions: docs/measures.md); the precision-recall curve over cut-offs ``k = 1..max_k`` (as
torchmetrics' ``retrieval_precision_recall_curve``) and the best recall at a fixed precision (docs/recommenders.md)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._fused_columns import F1, PRECISION, RECALL, RPREC
from torchrank.functional._measure import measure
from torchrank.functional._options import ListOptions, RankingOptions, Unpack, with_common_args
from torchrank.functional._pipeline import run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index


def _precision_options(*, adaptive_k: bool) -> dict[str, object]:
    """Precision's kernel parameters, checked; none for the default, which the fused kernel computes."""
    if not isinstance(adaptive_k, bool):
        raise ValueError(f"Argument `adaptive_k` must be a bool, got {adaptive_k!r}.")
    return {"adaptive_k": True} if adaptive_k else {}


@measure(fused=PRECISION)
def _precision(r: Ranking, ks: Ks, adaptive_k: bool = False) -> Values:
    index, k_eff = cutoff_index(r, ks)
    if adaptive_k:  # a list shorter than k: divided by its length
        k_eff = torch.minimum(k_eff, r.num_valid.unsqueeze(1))
    return at_cutoffs(r.hits, index) / k_eff.clamp_min(1), r.no_relevant


@measure(fused=RECALL)
def _recall(r: Ranking, ks: Ks) -> Values:
    index, _ = cutoff_index(r, ks)
    return at_cutoffs(r.hits, index) / r.num_relevant.clamp_min(1).unsqueeze(1), r.no_relevant


@measure(fused=F1)
def _f1(r: Ranking, ks: Ks) -> Values:
    # 2PR/(P+R) with P = h/k and R = h/|rel| is 2h/(k+|rel|): linear in the hits h
    index, k_eff = cutoff_index(r, ks)
    return 2 * at_cutoffs(r.hits, index) / (k_eff + r.num_relevant.unsqueeze(1)).clamp_min(1), r.no_relevant


@measure(fused=RPREC)
def _r_precision(r: Ranking, ks: Ks) -> Values:
    # one column per cut-off asked for (all None: evaluate groups 'rprec' and 'r_precision' in one call)
    index = (r.num_relevant - 1).clamp(0, r.list_size - 1).long().unsqueeze(1).expand(-1, len(ks))
    return at_cutoffs(r.hits, index) / r.num_relevant.clamp_min(1).unsqueeze(1), r.no_relevant


@with_common_args
def precision(preds: Tensor, target: Tensor, *, adaptive_k: bool = False, **options: Unpack[RankingOptions]) -> Tensor:
    """Precision at k: relevant items in the top k / k, also past a short list's end (trec_eval; ``k=None``: / N).

    {common_args}
        adaptive_k: Divide by ``min(k, number of ranked items)`` instead (torchmetrics' ``adaptive_k``).

    Example:
        >>> import torch
        >>> preds = torch.tensor([[0.9, 0.8, 0.7, 0.6], [0.2, 0.4, 0.3, 0.1]])
        >>> target = torch.tensor([[1, 0, 1, 0], [0, 0, 1, 1]])
        >>> precision(preds, target, k=2, reduction="none")
        tensor([0.5000, 0.5000])
        >>> precision(preds, target, k=8), precision(preds, target, k=8, adaptive_k=True)  # 4 items a list
        (tensor(0.2500), tensor(0.5000))
    """
    return run_measure(_precision, preds, target, **options, **_precision_options(adaptive_k=adaptive_k))


@with_common_args
def recall(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """Recall at k: relevant items in the top k divided by the number of relevant items R.

    {common_args}

    Example:
        >>> import torch
        >>> recall(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0]), k=2)
        tensor(0.5000)
    """
    return run_measure(_recall, preds, target, **options)


@with_common_args
def f1(preds: Tensor, target: Tensor, **options: Unpack[RankingOptions]) -> Tensor:
    """F1 at k: the harmonic mean ``2PR / (P + R)`` of precision and recall at k (0 when both are 0).

    {common_args}

    Example:
        >>> import torch
        >>> f1(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0]), k=2)
        tensor(0.5000)
    """
    return run_measure(_f1, preds, target, **options)


@with_common_args
def r_precision(preds: Tensor, target: Tensor, **options: Unpack[ListOptions]) -> Tensor:
    """R-precision: precision at R, the query's number of relevant items (trec_eval ``Rprec``); no ``k``.

    {common_args}

    Example:
        >>> import torch
        >>> r_precision(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0]))
        tensor(0.5000)
    """
    return run_measure(_r_precision, preds, target, **options)


@with_common_args
def precision_recall_curve(
    preds: Tensor, target: Tensor, max_k: int | None = None, *, adaptive_k: bool = False,
    **options: Unpack[ListOptions],
) -> tuple[Tensor, Tensor, Tensor]:
    """``(precision, recall, top_k)``: P@k and R@k for ``k`` in ``top_k = 1..max_k``, ``[max_k]`` each (mean over
    queries) or ``[..., max_k]`` per query (``reduction="none"``).

    {common_args}
        max_k: The deepest cut-off; None: the list length ``N`` of dense input (flat input must give it).
        adaptive_k: P@k divides by ``min(k, list length)`` (torchmetrics' ``adaptive_k``), not by k.

    Example:
        >>> import torch
        >>> from torchrank.functional import precision_recall_curve
        >>> p, r, k = precision_recall_curve(torch.tensor([[0.9, 0.7, 0.5]]), torch.tensor([[1, 0, 1]]))
        >>> p, r
        (tensor([1.0000, 0.5000, 0.6667]), tensor([0.5000, 0.5000, 1.0000]))
    """
    if max_k is None:
        if options["indexes"] is not None:
            raise ValueError("Argument `max_k` must be given with flat input (`indexes`): the lists' length is "
                             "known only after grouping.")
        max_k = preds.shape[-1]
    if isinstance(max_k, bool) or not isinstance(max_k, int) or max_k <= 0:
        raise ValueError(f"Argument `max_k` must be a positive int or None, got {max_k!r}.")
    ks = list(range(1, max_k + 1))
    p = precision(preds, target, k=ks, adaptive_k=adaptive_k, **options)
    return p, recall(preds, target, k=ks, **options), torch.arange(1, max_k + 1, device=preds.device)


def recall_at_fixed_precision(
    preds: Tensor, target: Tensor, min_precision: float, max_k: int | None = None, **options: object,
) -> tuple[Tensor, Tensor]:
    """``(recall, k)``: the largest mean R@k over the cut-offs whose mean P@k is at least ``min_precision``, and that
    cut-off (the deepest among equal recalls); ``(0, max_k)`` when none qualifies or the best recall is 0, as
    torchmetrics' ``RetrievalRecallAtFixedPrecision``. ``options``: :func:`precision_recall_curve`'s but ``reduction``.

    Example:
        >>> import torch
        >>> from torchrank.functional import recall_at_fixed_precision
        >>> recall_at_fixed_precision(torch.tensor([[0.9, 0.7, 0.5]]), torch.tensor([[1, 0, 1]]), 0.6)
        (tensor(1.), tensor(3))
    """
    if isinstance(min_precision, bool) or not isinstance(min_precision, int | float) or not 0 <= min_precision <= 1:
        raise ValueError(f"Argument `min_precision` must be a number in [0, 1], got {min_precision!r}.")
    if "reduction" in options:
        raise ValueError("recall_at_fixed_precision reads the mean curve over queries: it takes no `reduction`.")
    p, r, top_k = precision_recall_curve(preds, target, max_k, **options)  # type: ignore[arg-type]
    qualifies = p >= min_precision
    best_recall = torch.where(qualifies, r, -1.0).amax()
    best = torch.where(qualifies & (r == best_recall), top_k, 0).argmax()  # the deepest k among equal recalls
    found = qualifies[best] & (r[best] > 0)
    return torch.where(found, r[best], 0.0), torch.where(found, top_k[best], top_k.numel())
