"""Differentiable ranking losses on ``[B, N]`` scores, graded labels and an optional padding mask.

Each loss is a function and a thin :class:`torch.nn.Module`; each returns a loss to minimise (the NDCG and
ERR surrogates return ``-metric``), reduced over lists by one helper (``"mean"``, ``"sum"`` or ``"none"``).
Gains, discounts, cut-offs and ``empty_target_action`` follow :mod:`torchrank.functional`.
"""

from torchrank.losses._neuralsort import neural_sort
from torchrank.losses.err import SoftERRLoss, soft_err
from torchrank.losses.lambdaloss import LambdaLoss, RankNetLoss, lambda_loss, ranknet
from torchrank.losses.listwise import ListMLELoss, ListNetLoss, listmle, listnet
from torchrank.losses.ndcg import ApproxNDCGLoss, NeuralNDCGLoss, approx_ndcg, neural_ndcg

__all__ = [
    "ApproxNDCGLoss",
    "LambdaLoss",
    "ListMLELoss",
    "ListNetLoss",
    "NeuralNDCGLoss",
    "RankNetLoss",
    "SoftERRLoss",
    "approx_ndcg",
    "lambda_loss",
    "listmle",
    "listnet",
    "neural_ndcg",
    "neural_sort",
    "ranknet",
    "soft_err",
]
