"""``torchrank compare``: the command is in :mod:`torchrank.compare._command`; this package is its import path."""

from __future__ import annotations

from torchrank.compare._command import (
    DEFAULT_MEASURES,
    add_parser,
    plot_comparison,
    plot_differences,
    plot_distributions,
    run,
)
from torchrank.compare._command import (
    _lower_is_better as _lower_is_better,  # read by tests/test_registry.py
)

__all__ = ["DEFAULT_MEASURES", "add_parser", "plot_comparison", "plot_differences", "plot_distributions", "run"]
