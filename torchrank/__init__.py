"""torchrank: GPU-accelerated ranking metrics and differentiable ranking losses for PyTorch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchrank import functional
    from torchrank.functional.backends import get_backend, set_backend, use_backend

__version__ = "0.1.0"

__all__ = ["__version__", "functional", "get_backend", "set_backend", "use_backend"]

# Names imported on first use, not with the package: `torchrank --help` (torchrank.cli) then answers without
# importing torch (tests/test_cli.py checks it)
_LAZY = {
    "functional": ("torchrank.functional", None),
    "get_backend": ("torchrank.functional.backends", "get_backend"),
    "set_backend": ("torchrank.functional.backends", "set_backend"),
    "use_backend": ("torchrank.functional.backends", "use_backend"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'torchrank' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = importlib.import_module(module)
    return value if attribute is None else getattr(value, attribute)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
