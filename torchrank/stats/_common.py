"""Input handling shared by the tests of :mod:`torchrank.stats`."""

from __future__ import annotations

import torch
from torch import Tensor


def _differences(a: Tensor, b: Tensor) -> Tensor:
    """Validate two score tensors and return ``a - b`` in float64 with shape ``[M, Q]``."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Tensor):
            raise TypeError(f"Argument `{name}` must be a tensor of per-query scores, got {type(x).__name__}.")
        if x.dim() == 0 or x.shape[-1] == 0:
            raise ValueError(f"Argument `{name}` must hold at least one query on its last dim, got {tuple(x.shape)}.")
    if a.shape != b.shape:
        raise ValueError(f"Arguments `a` and `b` must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}.")
    if a.device != b.device:
        raise ValueError(f"Arguments `a` and `b` must be on the same device, got {a.device} and {b.device}.")
    # float64 throughout: sums of ~10^4 sign-flipped differences must not lose the ties that decide p.
    return (a.to(torch.float64) - b.to(torch.float64)).reshape(-1, a.shape[-1])


def _check_resamples(n_resamples: int) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"Argument `n_resamples` must be a positive int, got {n_resamples!r}.")


def _check_generator(generator: torch.Generator | None, device: torch.device) -> None:
    if generator is not None and generator.device.type != device.type:
        raise ValueError(
            f"Argument `generator` must be on the device of the scores ({device.type}), got {generator.device.type}."
        )


def _chunk(n_queries: int) -> int:
    """Resamples per chunk: about ``torchrank.stats._CHUNK_ELEMENTS`` (resample x query) elements.

    The size is the package's setting, read from it at each call (one place to bound the memory of every
    resampling test).
    """
    from torchrank import stats

    return max(1, stats._CHUNK_ELEMENTS // n_queries)
