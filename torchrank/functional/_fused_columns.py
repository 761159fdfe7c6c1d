"""The triton fused kernel's output columns, one measure code each (which a kernel declares with ``_measure.measure``).
It imports nothing of torchrank, nor triton."""

from __future__ import annotations

from typing import NamedTuple

# what a column of the kernel's output holds (the kernel's constexpr codes, eight bits each)
PRECISION, RECALL, F1, SUCCESS, AP, RR, DCG, DCG_EXP, NDCG, NDCG_EXP, ERR, RPREC, FRP, MEAN_RANK, RBP = range(15)
#: Every code the kernel computes.
CODES = (PRECISION, RECALL, F1, SUCCESS, AP, RR, DCG, DCG_EXP, NDCG, NDCG_EXP, ERR, RPREC, FRP, MEAN_RANK, RBP)
# the longest list the kernel ranks in registers; longer lists run on the torch backend
TRITON_MAX_ITEMS = 4096
# the columns whose empty query is one without a relevant item (binary); the others': no positive label (graded)
BINARY_CODES = (PRECISION, RECALL, F1, SUCCESS, AP, RR, RPREC, FRP, MEAN_RANK)


class Column(NamedTuple):
    """One output column: a measure code, its cut-off (0: the whole list) and, for RBP, the persistence and the top
    of the label scale (0: each query's largest label)."""

    code: int
    k: int
    p: float = 0.0
    top: float = 0.0
