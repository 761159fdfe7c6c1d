"""torchrank's optional dependencies, the extra that installs each, and the one-line error when one is missing.

Every import of an optional package goes through :func:`require`, so that whatever needs it (reading a parquet
file, a DataFrame, a plot, training) fails with the same kind of message: what needed it and the ``pip install``
line. The command lines print that message as their one error line. This module imports nothing heavy.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: Optional package (top-level import name) -> (distribution, the torchrank extra that installs it), as in
#: pyproject.toml's optional-dependencies (tests/test_errors.py checks they agree).
EXTRAS: dict[str, tuple[str, str]] = {
    "pyarrow": ("pyarrow", "parquet"),
    "pandas": ("pandas", "pandas"),
    "matplotlib": ("matplotlib", "plot"),
    "lightning": ("lightning", "train"),
    "jsonargparse": ("jsonargparse[signatures]", "train"),
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def require(module: str, what: str) -> ModuleType:
    """``module`` imported, or :class:`MissingExtra` saying that ``what`` needs it and how to install it.

    Example:
        >>> require("json", "Reading JSON").__name__
        'json'
        >>> print(missing("pyarrow", "Reading parquet"))
        Reading parquet needs pyarrow: pip install 'torchrank[parquet]' (or pyarrow).
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        top = module.split(".")[0]
        if error.name is not None and error.name.split(".")[0] != top:
            raise  # the package is there but fails to import something of its own: its own error says more
        raise missing(top, what) from None


def missing(package: str, what: str) -> MissingExtra:
    """The :class:`MissingExtra` for ``package`` (a key of :data:`EXTRAS`), needed by ``what``."""
    dist, extra = EXTRAS[package]
    return MissingExtra(f"{what} needs {dist}: pip install 'torchrank[{extra}]' (or {dist}).")
