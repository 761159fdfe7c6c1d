"""Drop-in replacements for ``torchmetrics.retrieval``'s classes, computed by torchrank's kernels.

Migrating is a change of import::

    from torchmetrics.retrieval import RetrievalNormalizedDCG  # before
    from torchrank.compat import RetrievalNormalizedDCG  # after

Each class takes torchmetrics' constructor arguments (``empty_target_action``, ``ignore_index``, ``top_k``,
``adaptive_k``, ``max_fpr``, ``max_k``, ``aggregation``, a callable included, and ``Metric`` kwargs) and its input
(``update(preds, target, indexes)``, flattened). The ranking measures and AUROC are thin subclasses of the
:mod:`torchrank.metrics` class that computes them; torchmetrics' definitions are options of the torchrank measure
(AP's ``denominator="found"``, precision's ``adaptive_k``, AUROC's ``k`` and ``max_fpr``) and its input (the score
filter below zeroes the ranked labels, the query's own labels stay its ``ideal_target``). Its quirks are
reproduced where they are defined: the labels of items scored ``<= 0`` count as 0 in MAP, MRR, precision and
recall; ``empty_target_action="error"`` raises at ``compute``, for a query without relevant item over all updates;
``"skip"`` on every query gives 0. The precision-recall curve and the recall at a fixed precision read
:func:`torchrank.functional.precision_recall_curve` per query.

What is not reproduced (see ``docs/migrating_from_torchmetrics.md``):

- Tied scores: torchmetrics' AP, MRR, precision, recall, hit rate, R-precision, fall-out and the curve take
  whatever order its sorts return (not input order; it changes with the data size and the device). These classes
  give the expected value over random orders of the tied items (``ties="average"``; pass ``ties="first"``,
  ``"optimistic"`` or ``"pessimistic"`` for another rule). NDCG averages ties in both, and AUROC scores tied items
  exactly in both: identical, but for AUROC's tie group across ``top_k`` (compat keeps input order there).
- Fractional labels in binary metrics and negative NDCG labels raise.

Example:
    >>> import torch
    >>> from torchrank.compat import RetrievalNormalizedDCG
    >>> metric = RetrievalNormalizedDCG(top_k=2)
    >>> metric.update(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 2, 1]), indexes=torch.tensor([0, 0, 0]))
    >>> metric.update(torch.tensor([0.4, 0.3]), torch.tensor([1, 0]), indexes=torch.tensor([1, 1]))
    >>> metric.compute()
    tensor(0.7398)
"""

from __future__ import annotations

from typing import Any

from torchrank.compat._curves import RetrievalPrecisionRecallCurve, RetrievalRecallAtFixedPrecision
from torchrank.compat._retrieval import (
    RetrievalAUROC,
    RetrievalFallOut,
    RetrievalHitRate,
    RetrievalMAP,
    RetrievalMRR,
    RetrievalNormalizedDCG,
    RetrievalPrecision,
    RetrievalRecall,
    RetrievalRPrecision,
)

__all__ = [
    "CompatWarning",
    "RetrievalAUROC",
    "RetrievalFallOut",
    "RetrievalHitRate",
    "RetrievalMAP",
    "RetrievalMRR",
    "RetrievalNormalizedDCG",
    "RetrievalPrecision",
    "RetrievalPrecisionRecallCurve",
    "RetrievalRPrecision",
    "RetrievalRecall",
    "RetrievalRecallAtFixedPrecision",
]

class CompatWarning(UserWarning):
    """A ``torchrank.compat`` class was configured where its value differs from torchmetrics' by definition (no
    configuration does at present: kept so that filters naming it keep working)."""


#: torchmetrics.retrieval classes without a drop-in here, with the reason (none at present).
NOT_PROVIDED: dict[str, str] = {}


def __getattr__(name: str) -> Any:
    if name in NOT_PROVIDED:
        raise ImportError(
            f"torchrank.compat does not provide {name} ({NOT_PROVIDED[name]}); keep "
            f"`from torchmetrics.retrieval import {name}`."
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
