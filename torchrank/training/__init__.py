"""Train neural rankers with :mod:`torchrank.losses`, validated with :mod:`torchrank.metrics` (Lightning).

``python -m torchrank.training fit --config configs/train/neural_ndcg.yaml`` trains :class:`MLPRanker` on
:class:`LetorDataModule`'s data (by default the bundled LightGBM lambdarank example); see docs/training.md.
"""

from torchrank.training.data import LIGHTGBM_LAMBDARANK, LetorDataModule, read_letor, split_queries
from torchrank.training.model import EVAL_K, MLPRanker, ndcg_metric

__all__ = [
    "EVAL_K",
    "LIGHTGBM_LAMBDARANK",
    "LetorDataModule",
    "MLPRanker",
    "ndcg_metric",
    "read_letor",
    "split_queries",
]
