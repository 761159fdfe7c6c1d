"""torchrank: GPU-accelerated ranking metrics and differentiable ranking losses for PyTorch."""

from torchrank import functional

__version__ = "0.1.0"

__all__ = ["__version__", "functional"]
