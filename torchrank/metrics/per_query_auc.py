"""Per-query AUROC and GAUC as stateful metrics (:func:`torchrank.functional.auroc` and `gauc`).

``AUROC`` is a :class:`~torchrank.metrics.FunctionalMetric`: dense rows or flat items with ``indexes``, the
mean over queries, exact DDP sync, as every ranking class. ``GAUC`` keeps two sums (weighted AUROC, weight),
so its epoch value is ``sum_q w_q AUROC_q / sum_q w_q`` over every query of every update and process.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor
from torchmetrics import Metric

from torchrank.functional.per_query_auc import auroc
from torchrank.metrics.classes import FunctionalMetric

__all__ = ["AUROC", "GAUC"]


class AUROC(FunctionalMetric):
    """AUROC per query (Mann-Whitney, exact under ties), averaged over queries.

    Example:
        >>> import torch
        >>> metric = AUROC()
        >>> metric.update(torch.tensor([[0.9, 0.5, 0.5, 0.1]]), torch.tensor([[1, 1, 0, 0]]))
        >>> metric.update(torch.tensor([[0.2, 0.8]]), torch.tensor([[1, 0]]))
        >>> metric.compute()  # (0.875 + 0) / 2
        tensor(0.4375)
    """

    _function: ClassVar = staticmethod(auroc)
    higher_is_better = True


class GAUC(Metric):
    """Group AUC over an epoch: ``sum_q w_q AUROC_q / sum_q w_q`` over queries with both kinds of item, ``w_q``
    the query's number of items (impressions) or the ``weights`` given to ``update`` (e.g. clicks).

    Dense rows only (a query lies within one update): the states are two float64 sums, synced exactly.

    Example:
        >>> import torch
        >>> metric = GAUC()
        >>> metric.update(torch.tensor([[0.9, 0.1, 0.5, 0.3]]), torch.tensor([[1, 0, 0, 0]]))
        >>> metric.update(torch.tensor([[0.2, 0.8]]), torch.tensor([[1, 0]]))
        >>> metric.compute()  # (4 * 1 + 2 * 0) / 6
        tensor(0.6667)
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def __init__(self, relevance_threshold: float = 1, validate_args: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.relevance_threshold, self.validate_args = relevance_threshold, validate_args
        self.add_state("sums", torch.zeros(2, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, preds: Tensor, target: Tensor, mask: Tensor | None = None, weights: Tensor | None = None) -> None:
        """Add dense rows ``[..., N]``; ``weights`` ``[...]`` per query (default: its number of items)."""
        values = auroc(preds, target, mask=mask, empty_target_action="skip", reduction="none",
                       relevance_threshold=self.relevance_threshold, validate_args=self.validate_args).reshape(-1)
        if weights is None:  # the query's number of items: its impressions
            weights = preds.shape[-1] if mask is None else mask.sum(-1)
            weights = torch.as_tensor(weights, device=values.device).expand(preds.shape[:-1])
        elif not isinstance(weights, Tensor) or weights.numel() != values.numel():
            raise ValueError(f"Argument `weights` must hold one weight per query ({values.numel()}).")
        defined = ~torch.isnan(values)  # queries with both relevant and non-relevant items
        w = torch.where(defined, weights.reshape(-1).to(torch.float64), 0)
        values = torch.where(defined, values.to(torch.float64), 0)
        self.sums += torch.stack([(w * values).sum(), w.sum()])

    def compute(self) -> Tensor:
        return (self.sums[0] / self.sums[1]).to(torch.get_default_dtype())
