"""Where a measure at cut-offs ``ks`` (ints, None for the whole list) reads its per-position quantity ``[Q, N]``:
:func:`cutoff_index` finds the positions (shared by the measures of one ranking), :func:`at_cutoffs` reads them."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from torchrank.functional._ranked import Ranking


def cutoff_index(ranking: Ranking, ks: Sequence[int | None]) -> tuple[Tensor, Tensor]:
    """For each cut-off, the index into the rank axis (past the list's end: its last position) and the effective k
    (None: each query's ranked items), ``[Q, K]`` each, or ``[K]`` and ``[1, K]`` when every cut-off is a number."""
    key = tuple(ks)
    if key not in ranking.cutoffs:  # measures of one evaluate() often share their cut-offs
        n = ranking.list_size
        if None in ks:  # filled on the device from Python numbers: no host-to-device copy
            valid = ranking.num_valid
            k_eff = torch.stack([valid if k is None else torch.full_like(valid, k) for k in ks], 1)
            index = (k_eff - 1).clamp(0, n - 1).long()
        else:  # the same for every query: two small constant rows (cached), nothing built per call
            index, k_eff = fixed_cutoffs(key, n, ranking.dtype, ranking.labels.device)
        ranking.cutoffs[key] = (index, k_eff)
    return ranking.cutoffs[key]


@functools.lru_cache(maxsize=256)
def fixed_cutoffs(ks: tuple[int, ...], n: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(index [K], k_eff [1, K])`` of integer cut-offs on lists of ``n`` positions (cached: constants)."""
    index = torch.tensor([min(k, n) - 1 for k in ks], device=device)
    return index, torch.tensor([float(k) for k in ks], dtype=dtype, device=device).unsqueeze(0)


def sum_to_cutoffs(values: Tensor, index: Tensor, ks: Sequence[int | None]) -> Tensor:
    """Sums of per-position ``values`` (0 past each list's end) down to each cut-off ``[Q, K]``."""
    if all(k is None for k in ks):
        return values.sum(1, keepdim=True).expand(-1, len(ks))
    return at_cutoffs(torch.cumsum(values, 1), index)


def at_cutoffs(cumulative: Tensor, index: Tensor) -> Tensor:
    """Read a per-position quantity ``[Q, N]`` at each query's cut-offs ``[Q, K]``, or at the same ``[K]`` in all."""
    return cumulative.index_select(1, index) if index.ndim == 1 else cumulative.gather(1, index)
