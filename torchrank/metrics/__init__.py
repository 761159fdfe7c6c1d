"""Stateful ranking metrics (``torchmetrics.Metric`` subclasses) over :mod:`torchrank.functional`.

Every class :mod:`torchrank.metrics.classes` derives from the measure registry is exported here under its own
name, so declaring a measure with a class name exports its class (``GAP`` included).

Example:
    >>> import torchrank.metrics
    >>> from torchrank.metrics import classes
    >>> all(getattr(torchrank.metrics, name) is getattr(classes, name) for name in classes.__all__)
    True
"""

from torchrank.metrics import classes as _classes
from torchrank.metrics._base import KeepStateOnError, RankingMetric
from torchrank.metrics.classes import *  # noqa: F403  every derived class (type checkers read them in classes.pyi)
from torchrank.metrics.classes import FunctionalMetric, RankingMetrics
from torchrank.metrics.per_query_auc import AUROC, GAUC
from torchrank.metrics.recommenders import (
    AveragePopularity,
    Coverage,
    ExposureEntropy,
    GiniIndex,
    IntraListDiversity,
    LongTailShare,
    Novelty,
    Personalization,
)
from torchrank.metrics.retrieval import CorpusRetrieval

__all__ = [  # a literal list first: linters see these
    "AUROC",
    "GAUC",
    "AveragePopularity",
    "CorpusRetrieval",
    "Coverage",
    "ExposureEntropy",
    "FunctionalMetric",
    "GiniIndex",
    "IntraListDiversity",
    "KeepStateOnError",
    "LongTailShare",
    "Novelty",
    "Personalization",
    "RankingMetric",
    "RankingMetrics",
]
__all__ += sorted(set(_classes.__all__) - set(__all__))
