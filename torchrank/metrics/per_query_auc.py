"""Per-query AUROC and GAUC as stateful metrics (:func:`torchrank.functional.auroc` and `gauc`).

``AUROC`` is a :class:`~torchrank.metrics.FunctionalMetric`: dense rows or flat items with ``indexes``, the
mean over queries, exact DDP sync, as every ranking class. ``GAUC`` keeps two sums (weighted AUROC, weight),
so its epoch value is ``sum_q w_q AUROC_q / sum_q w_q`` over every query of every update and process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.distributed import gather_all_tensors

from torchrank.functional.checks import is_integer_tensor
from torchrank.functional.per_query_auc import auroc
from torchrank.metrics._base import KeepStateOnError
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


class GAUC(KeepStateOnError, Metric):
    """Group AUC over an epoch: ``sum_q w_q AUROC_q / sum_q w_q`` over queries with both kinds of item, ``w_q``
    the query's number of items (impressions) or the ``weights`` given to ``update`` (e.g. clicks).

    Dense rows ``[..., N]`` (a query lies within one update) go into two float64 sums, synced exactly. Flat items
    with ``indexes`` (torchmetrics' layout: a query may span updates and processes) are kept and grouped at
    ``compute``, after the sync, each query then weighted by its number of items; the two kinds of update may be
    mixed, a query being one or the other.

    Example:
        >>> import torch
        >>> metric = GAUC()
        >>> metric.update(torch.tensor([[0.9, 0.1, 0.5, 0.3]]), torch.tensor([[1, 0, 0, 0]]))
        >>> metric.update(torch.tensor([0.2, 0.8]), torch.tensor([1, 0]), indexes=torch.tensor([4, 4]))
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
        # flat items (score, label, mask) in float64, exact for every score dtype, and their queries: kept until
        # compute, as a query may span updates and processes
        self.add_state("flat_items", [], dist_reduce_fx="cat")
        self.add_state("flat_indexes", [], dist_reduce_fx="cat")

    def update(
        self, preds: Tensor, target: Tensor, mask: Tensor | None = None, weights: Tensor | None = None,
        indexes: Tensor | None = None,
    ) -> None:
        """Add dense rows ``[..., N]`` (``weights`` ``[...]`` per query; default: its number of items), or flat
        items ``[N]`` of the queries ``indexes`` (each query weighted by its number of items)."""
        if indexes is not None:
            self._update_flat(preds, target, mask, weights, indexes)
            return
        values = auroc(preds, target, mask=mask, empty_target_action="skip", reduction="none",
                       relevance_threshold=self.relevance_threshold, validate_args=self.validate_args).reshape(-1)
        if weights is None:  # the query's number of items: its impressions
            weights = preds.shape[-1] if mask is None else mask.sum(-1)
            weights = torch.as_tensor(weights, device=values.device).expand(preds.shape[:-1])
        elif not isinstance(weights, Tensor) or weights.numel() != values.numel():
            raise ValueError(f"Argument `weights` must hold one weight per query ({values.numel()}).")
        self.sums += _weighted_sums(values, weights.reshape(-1))

    def _update_flat(
        self, preds: Tensor, target: Tensor, mask: Tensor | None, weights: Tensor | None, indexes: Tensor,
    ) -> None:
        if weights is not None:
            raise ValueError("Argument `weights` needs dense rows (one weight per row); with `indexes` each query "
                             "is weighted by its number of items. Group the items into rows to weight otherwise.")
        tensors = {"preds": preds, "target": target, "indexes": indexes, "mask": mask}
        for name, x in tensors.items():
            if x is not None and (not isinstance(x, Tensor) or x.ndim != 1 or x.shape != indexes.shape):
                shown = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
                raise ValueError(f"With `indexes`, argument `{name}` must be 1-D with one entry per item "
                                 f"({tuple(indexes.shape)}), got {shown}.")
        if not is_integer_tensor(indexes):
            raise ValueError(f"Argument `indexes` must be an integer tensor, got dtype {indexes.dtype}.")
        kept = torch.ones_like(preds, dtype=torch.bool) if mask is None else mask.bool()
        self.flat_items.append(torch.stack([preds.to(torch.float64), target.to(torch.float64),
                                            kept.to(torch.float64)], 1))
        self.flat_indexes.append(indexes.to(torch.int64))

    def compute(self) -> Tensor:
        sums = self.sums
        indexes = _joined(self.flat_indexes)
        if indexes is not None and indexes.numel() > 0:
            preds, target, kept = _joined(self.flat_items).unbind(1)
            kept = kept.bool()  # masked items are dropped before grouping: a query may lose every item
            values = auroc(preds[kept], target[kept], indexes=indexes[kept], empty_target_action="skip",
                           reduction="none", relevance_threshold=self.relevance_threshold,
                           validate_args=self.validate_args)
            counts = torch.unique(indexes[kept], return_counts=True)[1]  # ascending ids: auroc's query order
            sums = sums + _weighted_sums(values, counts)
        return (sums[0] / sums[1]).to(torch.get_default_dtype())

    def _sync_dist(self, dist_sync_fn: Callable = gather_all_tensors, process_group: Any = None) -> None:
        """Sync as torchmetrics does, after giving an empty flat state an empty tensor of its dtype and shape
        (torchmetrics' own placeholder, float32 and 1-D, would not match the other processes' tensors)."""
        if isinstance(self.flat_items, list) and not self.flat_items:
            self.flat_items = [torch.zeros(0, 3, dtype=torch.float64, device=self.device)]
        if isinstance(self.flat_indexes, list) and not self.flat_indexes:
            self.flat_indexes = [torch.zeros(0, dtype=torch.int64, device=self.device)]
        super()._sync_dist(dist_sync_fn, process_group)


def _weighted_sums(values: Tensor, weights: Tensor) -> Tensor:
    """``[sum w AUROC, sum w]`` in float64 over the queries whose AUROC is defined (not NaN)."""
    defined = ~torch.isnan(values)  # queries with both relevant and non-relevant items
    w = torch.where(defined, weights.to(device=values.device, dtype=torch.float64), 0)
    return torch.stack([(w * torch.where(defined, values.to(torch.float64), 0)).sum(), w.sum()])


def _joined(parts: list[Tensor] | Tensor) -> Tensor | None:
    """A cat state as one tensor (a list before a sync, a tensor after it); None when empty."""
    if isinstance(parts, Tensor):
        return parts
    return torch.cat(parts) if parts else None
