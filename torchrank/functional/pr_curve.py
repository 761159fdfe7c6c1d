"""The precision-recall curve over cut-offs ``k = 1..max_k`` (P@k and R@k, as torchmetrics'
``retrieval_precision_recall_curve``), and the best recall at a fixed precision (docs/recommenders.md)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._options import ListOptions, Unpack, with_common_args
from torchrank.functional.precision import precision, recall


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
