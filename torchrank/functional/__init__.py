"""Stateless, batched ranking metrics on dense ``[..., N]`` or flat ``(preds, target, indexes)`` input.

Every function ranks each list once (:mod:`torchrank.functional._ranking`) and returns the mean over
queries, their sum, or per-query values (``reduction="none"``).
"""

from torchrank.functional._chunking import memory_budget
from torchrank.functional.average_precision import average_precision, average_recall
from torchrank.functional.dcg import dcg, ndcg
from torchrank.functional.err import err
from torchrank.functional.first_relevant import first_relevant_position, hit_rate, mean_rank, reciprocal_rank
from torchrank.functional.kendall import kendall_tau
from torchrank.functional.measures import evaluate, parse_measure
from torchrank.functional.precision import f1, precision, r_precision, recall
from torchrank.functional.rbp import rbp

__all__ = [
    "average_precision",
    "average_recall",
    "dcg",
    "err",
    "evaluate",
    "f1",
    "first_relevant_position",
    "hit_rate",
    "kendall_tau",
    "mean_rank",
    "memory_budget",
    "ndcg",
    "parse_measure",
    "precision",
    "r_precision",
    "rbp",
    "recall",
    "reciprocal_rank",
]
