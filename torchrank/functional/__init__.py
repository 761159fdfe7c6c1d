"""Stateless, batched ranking metrics on dense ``[..., N]`` or flat ``(preds, target, indexes)`` input: the functions
the registry declares (:data:`MEASURES`), :func:`evaluate` for several measures by name over one sort, and a few more.

Example:
    >>> import torchrank.functional as F
    >>> F.MEASURES["map"].function is F.average_precision
    True
"""

from torchrank.functional._chunking import current_memory_budget, memory_budget
from torchrank.functional.average_precision import average_precision, average_recall, graded_average_precision
from torchrank.functional.corpus_search import merge_top_k, search
from torchrank.functional.dcg import dcg, ndcg
from torchrank.functional.err import err
from torchrank.functional.first_relevant import first_relevant_position, hit_rate, mean_rank, reciprocal_rank
from torchrank.functional.ids import catalogue_to_dense, ids_to_dense, top_k_ids
from torchrank.functional.kendall import kendall_tau
from torchrank.functional.measures import evaluate, parse_measure
from torchrank.functional.per_query_auc import auroc, gauc
from torchrank.functional.precision import (
    f1,
    precision,
    precision_recall_curve,
    r_precision,
    recall,
    recall_at_fixed_precision,
)
from torchrank.functional.rbp import rbp
from torchrank.functional.registry import MEASURES
from torchrank.functional.trec_extra import bpref, inferred_average_precision, judged_fraction, recall_cap

# imported by name (a test checks every declared one is), so that type checkers see them with their parameters
__all__ = [
    "MEASURES", "auroc", "average_precision", "average_recall", "bpref", "catalogue_to_dense", "current_memory_budget",
    "dcg", "err", "evaluate", "f1", "first_relevant_position", "gauc", "graded_average_precision", "hit_rate",
    "ids_to_dense", "inferred_average_precision", "judged_fraction", "kendall_tau", "mean_rank", "memory_budget",
    "merge_top_k", "ndcg", "parse_measure", "precision", "precision_recall_curve", "r_precision", "rbp", "recall",
    "recall_at_fixed_precision", "recall_cap", "reciprocal_rank", "search", "top_k_ids",
]
