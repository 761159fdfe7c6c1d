"""Rows sorted descending (:func:`descending_rows`): the ideal ranking's labels or gains, for the numpy backend's
:meth:`~torchrank.functional.backends.Backend.descending` and the losses' :func:`~torchrank.functional.core.ideal_dcg`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def descending_rows(values: Tensor, depth: int | None) -> Tensor:
    """Each row of ``values`` sorted descending, the first ``depth`` (all for None) ``[Q, <=M]``: numpy's sort on a
    CPU, torch's elsewhere and under ``torch.compile``, which cannot trace numpy's (a sort has one answer: the same
    values either way)."""
    if values.is_cpu and values.dtype != torch.bfloat16 and not torch.compiler.is_compiling():
        # numpy's SIMD sort of the values, ascending, read backwards: faster on CPU than torch.sort, and
        # than torch.topk for any cut-off past a handful
        descending = np.sort(values.numpy(), axis=1)[:, ::-1]
        return torch.from_numpy((descending if depth is None else descending[:, :depth]).copy())
    return torch_descending_rows(values, depth)


def torch_descending_rows(values: Tensor, depth: int | None) -> Tensor:
    """:func:`descending_rows` by torch's ops on any device: a top-k of a head, else a sort of whole rows."""
    if depth is not None and depth < values.shape[1]:
        return torch.topk(values, depth, dim=1).values
    return torch.sort(values, dim=1, descending=True).values
