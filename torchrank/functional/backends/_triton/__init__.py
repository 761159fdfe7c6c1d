"""The triton backend: the torch backend's ordering, and fused kernels that rank each list in registers and compute
every measure asked of it in one pass (:mod:`.kernel`; see :mod:`torchrank.functional.backends`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from torch import Tensor

from torchrank.functional._fused_columns import Column
from torchrank.functional._inputs import check_dense_inputs, check_options
from torchrank.functional.backends._torch import TorchBackend


class TritonBackend(TorchBackend):
    """The torch backend's seam (:class:`TorchBackend`) with the fused kernel, for the requests it covers."""

    name = "triton"

    def fused(self, preds: Tensor, target: Tensor, columns: Sequence[Column], **options: Any) -> tuple | None:
        # here, not above: the kernel's module imports triton, which `import torchrank` does not
        from torchrank.functional.backends._triton import kernel

        mask, ideal_target = options["mask"], options["ideal_target"]
        if preds.ndim == 0 or not kernel.fits(preds, target, ideal_target):
            return None
        check_options(options["ties"], options["empty_target_action"], "none", options["relevance_threshold"])
        check_dense_inputs(preds, target, mask=mask, ideal_target=ideal_target)
        try:
            return kernel.fused_values(preds, target, list(columns), **options)
        except kernel.KERNEL_ERRORS as error:  # this triton cannot build or run the kernel: the same values by torch
            _warn_kernel_failed(error)
            return None


def _warn_kernel_failed(error: Exception) -> None:
    """Say that the fused kernel did not run (the call goes on on the torch backend); Python's warning filters show
    it once per place."""
    warnings.warn(
        f"torchrank's fused Triton kernel failed to build or run ({type(error).__name__}: {str(error)[:200]}); "
        "this call ran on the torch backend instead, with the same values. Please report it with your triton and "
        "GPU versions; torchrank.set_backend('torch') silences this.",
        RuntimeWarning,
        stacklevel=5,
    )
