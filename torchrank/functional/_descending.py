"""Rows sorted descending: the ideal ranking's labels or gains, for the backends and ``core.ideal_dcg``."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def descending_rows(values: Tensor, depth: int | None) -> Tensor:
    """Each row of ``values`` sorted descending, the first ``depth`` (None: all) ``[Q, <=M]``: on CPU numpy's SIMD
    sort read backwards (faster than torch's sort or topk past a handful), else or under ``torch.compile`` torch's."""
    if values.is_cpu and values.dtype != torch.bfloat16 and not torch.compiler.is_compiling():
        descending = np.sort(values.numpy(), axis=1)[:, ::-1]
        return torch.from_numpy((descending if depth is None else descending[:, :depth]).copy())
    return torch_descending_rows(values, depth)


def torch_descending_rows(values: Tensor, depth: int | None) -> Tensor:
    """:func:`descending_rows` by torch's ops on any device: a top-k of a head, else a sort of whole rows."""
    if depth is not None and depth < values.shape[1]:
        return torch.topk(values, depth, dim=1).values
    return torch.sort(values, dim=1, descending=True).values
