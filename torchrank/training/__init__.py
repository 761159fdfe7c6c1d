"""Train neural rankers with :mod:`torchrank.losses`, validated with :mod:`torchrank.metrics` (Lightning).

``python -m torchrank.training fit --config configs/train/neural_ndcg.yaml`` trains :class:`MLPRanker` on
:class:`LetorDataModule`'s data (by default the bundled LightGBM lambdarank example); see docs/training.md.
Building a :class:`LetorDataModule` or an :class:`MLPRanker` hides Lightning's device probes, cloud-service tips
and a few harmless warnings (:func:`torchrank.training._notices.hide_lightning_noise`), as the command line does;
importing the package changes no warning filter.

The classes import Lightning when first used, so that without the ``train`` extra the first use says what to
install (``pip install 'torchrank[train]'``) rather than raising a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from torchrank._extras import require

if TYPE_CHECKING:
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
# where each public name lives
_MODULES = {
    "EVAL_K": "model",
    "LIGHTGBM_LAMBDARANK": "data",
    "LetorDataModule": "data",
    "MLPRanker": "model",
    "ndcg_metric": "model",
    "read_letor": "data",
    "split_queries": "data",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require("lightning", f"torchrank.training.{name}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
