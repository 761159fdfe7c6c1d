"""Train neural rankers with :mod:`torchrank.losses`, validated with :mod:`torchrank.metrics` (Lightning).

``python -m torchrank.training fit --config configs/train/neural_ndcg.yaml`` trains :class:`MLPRanker` on
:class:`LetorDataModule`'s data (by default the bundled LightGBM lambdarank example); see docs/training.md.
Importing it hides Lightning's device probes, cloud-service tips and a few harmless warnings
(:func:`torchrank.training._notices.hide_lightning_noise`), as the command line does.
"""

from torchrank.training._notices import hide_lightning_noise
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

hide_lightning_noise()
