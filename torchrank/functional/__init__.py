"""Stateless, batched ranking metrics on dense ``[..., N]`` or flat ``(preds, target, indexes)`` input.

Every function ranks each list once (:mod:`torchrank.functional._ranked`) and returns the mean over
queries, their sum, or per-query values (``reduction="none"``). The functions exported here are those the
measure registry declares (:data:`MEASURES`, read-only; :mod:`torchrank.functional.registry`), with
:func:`evaluate` for several measures by name over one sort.

Example:
    >>> import torchrank.functional as F
    >>> F.MEASURES["map"].function is F.average_precision
    True
"""

from torchrank.functional._chunking import current_memory_budget, memory_budget
from torchrank.functional.corpus_search import merge_top_k, search
from torchrank.functional.ids import catalogue_to_dense, ids_to_dense, top_k_ids
from torchrank.functional.measures import evaluate, parse_measure
from torchrank.functional.per_query_auc import auroc, gauc
from torchrank.functional.pr_curve import precision_recall_curve, recall_at_fixed_precision
from torchrank.functional.registry import MEASURES, public_functions

# every declared measure's public function under its own name: declaring a measure exports it
globals().update(public_functions())

__all__ = [
    "MEASURES", "auroc", "catalogue_to_dense", "current_memory_budget", "evaluate", "gauc", "ids_to_dense",
    "memory_budget", "merge_top_k",
    "parse_measure", "precision_recall_curve", "recall_at_fixed_precision", "search", "top_k_ids",
]
__all__ += sorted(public_functions())
