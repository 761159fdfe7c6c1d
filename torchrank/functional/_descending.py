"""Rows sorted descending (:func:`descending_rows`: the ideal ranking's labels or gains, for
:meth:`~torchrank.functional._ranked.Ranking.ideal_gains`)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from torchrank.functional.backends import uses_numpy


def descending_rows(values: Tensor, depth: int | None) -> Tensor:
    """Each row of ``values`` sorted descending, the first ``depth`` (all for None) ``[Q, <=M]``: the ideal ranking's
    labels or gains (:meth:`Ranking.ideal_gains`), by the fastest route of their device."""
    if uses_numpy(values) and values.dtype != torch.bfloat16:  # numpy holds every other dtype
        # numpy's SIMD sort of the values, ascending, read backwards: faster on CPU than torch.sort, and
        # than torch.topk for any cut-off past a handful
        descending = np.sort(values.numpy(), axis=1)[:, ::-1]
        return torch.from_numpy((descending if depth is None else descending[:, :depth]).copy())
    if depth is not None and depth < values.shape[1]:
        return torch.topk(values, depth, dim=1).values
    return torch.sort(values, dim=1, descending=True).values
