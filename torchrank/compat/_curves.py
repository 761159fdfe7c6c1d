"""``RetrievalPrecisionRecallCurve`` and ``RetrievalRecallAtFixedPrecision``: torchmetrics' per-query
precision-recall curve over ``k = 1..max_k``, aggregated over queries, from
:func:`torchrank.functional.precision_recall_curve`.

The items are kept (float32 scores, labels, int64 query ids: ``"cat"`` states, synced exactly) and grouped at
``compute``; each query's P@k and R@k come from torchrank's kernels (ties averaged exactly), its empty rule and the
aggregation over queries from torchmetrics' definition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat
from torchmetrics.utilities.distributed import gather_all_tensors

import torchrank.functional as F
from torchrank.compat._retrieval import check_arguments, check_binary, flat_input
from torchrank.functional.checks import TIES, check_choice
from torchrank.metrics import KeepStateOnError

_EMPTY_MESSAGE = "`compute` method was provided with a query with no positive target."


class RetrievalPrecisionRecallCurve(KeepStateOnError, Metric):
    """``torchmetrics.retrieval.RetrievalPrecisionRecallCurve``: P@k and R@k for ``k = 1..max_k`` per query,
    aggregated over queries; ``compute`` returns ``(precision [max_k], recall [max_k], top_k [max_k])``.

    Same values as torchmetrics for distinct scores (:func:`torchrank.functional.precision_recall_curve`): P@k
    divides by k also past the end of a short list, or with ``adaptive_k=True`` by ``min(k, list length)``; R@k by
    the query's relevant items; no score filter. ``max_k=None`` is the longest query's length. A query without
    relevant item gives a curve of 0 (``"neg"``), of 1 (``"pos"``), none (``"skip"``; zeros if every query is
    skipped) or raises (``"error"``). Tied scores: the expectation over random orders of the tied items
    (``ties="average"``), where torchmetrics takes its sort's order.

    Args:
        max_k: The deepest cut-off, or None: the longest query.
        adaptive_k: Divide P@k by ``min(k, list length)`` instead of ``k``.
        empty_target_action: Curve of a query without relevant item: ``"neg"``, ``"pos"``, ``"skip"``, ``"error"``.
        ignore_index: Items whose label equals it are dropped.
        aggregation: ``"mean"``, ``"median"``, ``"min"``, ``"max"`` over queries, per k, or a callable
            ``f(values [queries, max_k], dim=0)``, as in torchmetrics.
        ties: torchrank's tie rule (default ``"average"``).
        validate_args: Run the checks that read values (binary labels, NaN scores).
        kwargs: torchmetrics' ``Metric`` options.

    Example:
        >>> import torch
        >>> metric = RetrievalPrecisionRecallCurve(max_k=4)
        >>> preds = torch.tensor([0.4, 0.01, 0.5, 0.6, 0.2, 0.3, 0.5])
        >>> target = torch.tensor([True, False, False, True, True, False, True])
        >>> precision, recall, top_k = metric(preds, target, indexes=torch.tensor([0, 0, 0, 0, 1, 1, 1]))
        >>> precision, recall, top_k
        (tensor([1.0000, 0.5000, 0.6667, 0.5000]), tensor([0.5000, 0.5000, 1.0000, 1.0000]), tensor([1, 2, 3, 4]))
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(
        self,
        max_k: int | None = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        *,
        ties: str = "average",
        validate_args: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_arguments({"max_k": max_k, "adaptive_k": adaptive_k, "empty_target_action": empty_target_action,
                         "ignore_index": ignore_index, "aggregation": aggregation})
        check_choice("ties", ties, TIES)
        self.max_k, self.adaptive_k, self.aggregation = max_k, adaptive_k, aggregation
        self.empty_target_action, self.ignore_index = empty_target_action, ignore_index
        self.ties, self.validate_args = ties, validate_args
        self.add_state("preds", [], dist_reduce_fx="cat")
        self.add_state("target", [], dist_reduce_fx="cat")
        self.add_state("indexes", [], dist_reduce_fx="cat")

    def update(self, preds: Tensor, target: Tensor, indexes: Tensor) -> None:
        """Add a batch of items: ``preds``, ``target`` and the query ``indexes`` of equal shape (flattened)."""
        preds, target, indexes = flat_input(preds, target, indexes, self.ignore_index)
        if self.validate_args:
            check_binary(type(self).__name__, target)
            if preds.is_floating_point() and bool(torch.isnan(preds).any()):
                raise ValueError("Argument `preds` must not hold NaN scores.")
        self.preds.append(preds.float())
        self.target.append(target.float())
        self.indexes.append(indexes.long())

    def compute(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(precision, recall, top_k)`` over every query seen, across updates and processes."""
        empty = isinstance(self.preds, list) and not self.preds  # a list until synced, then a tensor
        preds, target, indexes = (None, None, None) if empty else (
            dim_zero_cat(x) for x in (self.preds, self.target, self.indexes))
        if preds is None or preds.numel() == 0:
            raise ValueError(f"{type(self).__name__}.compute() was called before any update: no query to score.")
        max_k = self.max_k
        if max_k is None:  # the longest query, as torchmetrics
            max_k = int(torch.unique(indexes, return_counts=True)[1].max())
        precision, recall, top_k = F.precision_recall_curve(
            preds, target, max_k, indexes=indexes, ties=self.ties, empty_target_action="skip", reduction="none",
            adaptive_k=self.adaptive_k, validate_args=False,
        )
        empty = torch.isnan(precision[:, 0])
        if self.empty_target_action == "error" and bool(empty.any()):
            raise ValueError(_EMPTY_MESSAGE)
        if self.empty_target_action == "skip":
            precision, recall = precision[~empty], recall[~empty]
        else:
            fill = 1.0 if self.empty_target_action == "pos" else 0.0
            precision, recall = (torch.where(empty.unsqueeze(1), fill, x) for x in (precision, recall))
        if precision.shape[0] == 0:  # every query skipped
            zeros = torch.zeros(max_k, device=preds.device)
            return zeros, zeros.clone(), top_k
        return self._aggregate(precision.float()), self._aggregate(recall.float()), top_k

    def _aggregate(self, values: Tensor) -> Tensor:
        """torchmetrics' aggregation over queries (dim 0) of per-query curves ``[queries, max_k]``."""
        if callable(self.aggregation):
            return self.aggregation(values, dim=0)
        if self.aggregation == "mean":
            return values.mean(0)
        return getattr(values, self.aggregation)(0).values  # median (the lower one, as torch), min, max

    def _sync_dist(self, dist_sync_fn: Callable = gather_all_tensors, process_group: Any = None) -> None:
        """Sync as torchmetrics does, after giving an empty list state an empty tensor of its dtype: torchmetrics'
        own placeholder would not match the other processes' tensors."""
        empty = {"preds": torch.float32, "target": torch.float32, "indexes": torch.int64}
        for name, dtype in empty.items():
            if isinstance(getattr(self, name), list) and not getattr(self, name):
                setattr(self, name, [torch.zeros(0, dtype=dtype, device=self.device)])
        super()._sync_dist(dist_sync_fn, process_group)

    def plot(self, curve: tuple[Tensor, Tensor, Tensor] | None = None, ax: Any = None) -> Any:
        """Plot precision against recall (default: ``compute()``'s curve); needs matplotlib.

        Example:
            >>> import torch
            >>> metric = RetrievalPrecisionRecallCurve()
            >>> metric.update(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1]), indexes=torch.tensor([0, 0, 0]))
            >>> fig, ax = metric.plot()  # doctest: +SKIP
        """
        from torchmetrics.utilities.plot import plot_curve

        precision, recall, top_k = curve or self.compute()
        return plot_curve((recall, precision, top_k), ax=ax, label_names=("Recall", "Precision"),
                          name=type(self).__name__)


class RetrievalRecallAtFixedPrecision(RetrievalPrecisionRecallCurve):
    """``torchmetrics.retrieval.RetrievalRecallAtFixedPrecision``: the largest recall of the aggregated curve
    (:class:`RetrievalPrecisionRecallCurve`) among the cut-offs whose precision is at least ``min_precision``, and
    that cut-off (the deepest among equal recalls); ``(0, max_k)`` when none qualifies or the recall is 0.

    Args:
        min_precision: The precision floor, a float in [0, 1].
        max_k: The deepest cut-off, or None: the longest query.
        adaptive_k: Divide P@k by ``min(k, list length)`` instead of ``k``.
        empty_target_action: Curve of a query without relevant item: ``"neg"``, ``"pos"``, ``"skip"``, ``"error"``.
        ignore_index: Items whose label equals it are dropped.
        kwargs: ``aggregation``, ``ties``, ``validate_args`` (see :class:`RetrievalPrecisionRecallCurve`) and
            torchmetrics' ``Metric`` options.

    Example:
        >>> import torch
        >>> metric = RetrievalRecallAtFixedPrecision(min_precision=0.8)
        >>> preds = torch.tensor([0.4, 0.01, 0.5, 0.6, 0.2, 0.3, 0.5])
        >>> target = torch.tensor([True, False, False, True, True, False, True])
        >>> metric(preds, target, indexes=torch.tensor([0, 0, 0, 0, 1, 1, 1]))
        (tensor(0.5000), tensor(1))
    """

    higher_is_better = True
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def __init__(
        self,
        min_precision: float = 0.0,
        max_k: int | None = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_k=max_k, adaptive_k=adaptive_k, empty_target_action=empty_target_action,
                         ignore_index=ignore_index, **kwargs)
        if not (isinstance(min_precision, float) and 0.0 <= min_precision <= 1.0):
            raise ValueError("`min_precision` has to be a positive float between 0 and 1")
        self.min_precision = min_precision

    def compute(self) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        """``(max_recall, best_k)`` over every query seen."""
        precision, recall, top_k = super().compute()
        qualifies = precision >= self.min_precision
        best_recall = torch.where(qualifies, recall, -1.0).amax()
        best = torch.where(qualifies & (recall == best_recall), top_k, 0).argmax()  # the deepest k among equals
        found = qualifies[best] & (recall[best] > 0)
        return torch.where(found, recall[best], 0.0), torch.where(found, top_k[best], top_k.numel())

    def plot(self, val: Tensor | list[Tensor] | None = None, ax: Any = None) -> Any:  # type: ignore[override]
        """Plot a recall (default: ``compute()``'s) or a sequence of them; needs matplotlib."""
        return self._plot(val or self.compute()[0], ax)
