"""Stateful ranking metrics (``torchmetrics.Metric`` subclasses) over :mod:`torchrank.functional`."""

from torchrank.metrics._base import RankingMetric
from torchrank.metrics.classes import (
    DCG,
    ERR,
    F1,
    MAP,
    MAR,
    MRR,
    NDCG,
    RBP,
    FirstRelevantPosition,
    FunctionalMetric,
    HitRate,
    KendallTau,
    MeanRank,
    Precision,
    RankingMetrics,
    Recall,
    RPrecision,
)

__all__ = [
    "DCG",
    "ERR",
    "F1",
    "MAP",
    "MAR",
    "MRR",
    "NDCG",
    "RBP",
    "FirstRelevantPosition",
    "FunctionalMetric",
    "HitRate",
    "KendallTau",
    "MeanRank",
    "Precision",
    "RPrecision",
    "RankingMetric",
    "RankingMetrics",
    "Recall",
]
