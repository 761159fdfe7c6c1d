"""Which code ranks the lists and computes the measures: one setting, ``"auto"`` (default), ``"numpy"``, ``"torch"``
or ``"triton"`` (docs/backends.md), each backend an object implementing one seam, :class:`Backend`."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator

import torch

from torchrank.functional._compile import constant_when_compiled
from torchrank.functional._fused_columns import TRITON_MAX_ITEMS as TRITON_MAX_ITEMS  # re-exported
from torchrank.functional.backends._numpy import NumpyBackend
from torchrank.functional.backends._torch import TorchBackend
from torchrank.functional.backends._triton import TritonBackend

Backend = TorchBackend  # the seam: every backend is one (the torch backend's methods are the defaults)

BACKENDS = ("auto", "numpy", "torch", "triton")

_ENV = "TORCHRANK_BACKEND"
_chosen: contextvars.ContextVar[str | None] = contextvars.ContextVar("torchrank_backend", default=None)
_process_wide: list[str | None] = [None]  # set_backend's choice; None: the environment's, else "auto"


def _checked(name: object, source: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"{source} must be one of {BACKENDS}, got {name!r}.")
    return name  # type: ignore[return-value]


def set_backend(name: str) -> None:
    """Use backend ``name`` from now on, in this process: ``"numpy"`` (CPU), ``"torch"``, ``"triton"`` (CUDA) or
    ``"auto"``, the default: triton on CUDA where it imports, numpy on CPU, torch elsewhere (docs/backends.md).

    Example:
        >>> import torchrank
        >>> torchrank.set_backend("torch"); torchrank.get_backend()
        'torch'
        >>> torchrank.set_backend("auto")
    """
    _process_wide[0] = _checked(name, "Argument `name` of set_backend")


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Use backend ``name`` inside a ``with`` block (this thread or task only), then return to the previous one.

    Example:
        >>> import torchrank
        >>> with torchrank.use_backend("numpy"):
        ...     torchrank.get_backend()
        'numpy'
    """
    token = _chosen.set(_checked(name, "Argument `name` of use_backend"))
    try:
        yield
    finally:
        _chosen.reset(token)


@constant_when_compiled  # torch.compile reads the setting once, at tracing, as a constant
def get_backend() -> str:
    """The backend in force: :func:`use_backend`'s, else :func:`set_backend`'s, else ``TORCHRANK_BACKEND`` (read at the
    first call: a later change of the environment is not seen), else ``"auto"``."""
    return _chosen.get() or _process_wide[0] or _from_environment()


@functools.cache
def _from_environment() -> str:
    """``TORCHRANK_BACKEND``, read once per process (every ranking call asks)."""
    return _checked(os.environ.get(_ENV, "auto").strip().lower() or "auto", f"Environment variable {_ENV}")


def backend_for(device: torch.device) -> Backend:
    """The backend (its ``name`` says which) that ranks tensors on ``device``; ``ValueError`` for one that cannot run
    there (``"numpy"`` off the CPU, ``"triton"`` where triton does not import)."""
    name = get_backend()
    if name == "auto":
        if device.type == "cpu":
            return _NUMPY
        return _TRITON if device.type == "cuda" and triton_available() else _TORCH
    if name == "numpy" and device.type != "cpu":
        raise ValueError(f"The 'numpy' backend ranks CPU tensors only, got tensors on {device}; use 'torch' or 'auto'.")
    if name == "triton":
        if not triton_available():
            raise ValueError("The 'triton' backend needs the triton package, which does not import here.")
        if device.type != "cuda" and not (device.type == "cpu" and triton_interprets()):
            return _TORCH  # no kernel runs there: the torch backend, as for any request the kernels do not cover
    return _BY_NAME[name]


def raises_at_once(device: torch.device) -> bool:
    """Whether bad values on ``device`` raise where they arrive (numpy reads them on the host) rather than in a
    metric's ``compute`` (torch, triton: no host read in ``update``).

    Example:
        >>> raises_at_once(torch.device("cpu"))  # numpy, under the default "auto"
        True
    """
    return backend_for(device).checks_on_host


_NUMPY, _TORCH, _TRITON = NumpyBackend(), TorchBackend(), TritonBackend()
_BY_NAME = {b.name: b for b in (_NUMPY, _TORCH, _TRITON)}


@functools.cache
def triton_available() -> bool:
    """Whether triton imports (the fused kernels' compiler, or its CPU interpreter)."""
    try:
        import triton
        import triton.language  # noqa: F401
    except Exception:  # ImportError, or a triton build that fails to load on this machine
        return False
    return True


def triton_interprets() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
