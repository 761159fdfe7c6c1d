"""Expected reciprocal rank (Chapelle, Metzler, Zhang and Grinspan, CIKM 2009; definition: docs/measures.md)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchrank.functional._fused_columns import ERR
from torchrank.functional._measure import measure
from torchrank.functional._options import RankingOptions, Unpack, with_common_args
from torchrank.functional._pipeline import deepest, run_measure
from torchrank.functional._ranked import Ks, Ranking, Values, at_cutoffs, cutoff_index, exclusive_cumprod
from torchrank.functional.checks import check_max_label
from torchrank.functional.core import Transform, check_transform, stop_probabilities


# the fused kernel computes the exponential transform with each query's largest label as the top
@measure(fused=lambda params: ERR if params == {"transform": "exponential", "max_label": None} else None)
def _err(r: Ranking, ks: Ks, transform: Transform, max_label: float | None) -> Values:
    prob = stop_probabilities(r.labels, r.valid, transform, r.top_label(max_label))  # R_i, 0 at padding
    index, _ = cutoff_index(r, ks)
    contributions = _expected_stops(r, prob, deepest(ks)) * r.reciprocal_positions
    return at_cutoffs(torch.cumsum(contributions, 1), index), ~r.has_positive_label


def _expected_stops(r: Ranking, prob: Tensor, depth: int | None) -> Tensor:
    """Probability that the user stops at each position ``[Q, N]``, exact under random order of ties down to
    ``depth`` (None: all)."""
    keep = 1 - prob
    reach = exclusive_cumprod(keep)
    if not r.averages_ties:
        return reach * prob
    group_id, start, size = r.tie_groups
    offset = (r.positions.long() - 1).unsqueeze(0) - start
    before_above, before_here = _subset_product_means(keep, group_id, offset, size.long(), depth)
    return reach.gather(1, start) * (before_above - before_here)


def _subset_product_means(keep: Tensor, group_id: Tensor, offset: Tensor, size: Tensor, depth: int | None) -> Values:
    """``(E_{j-1}, E_j)`` at each position, ``E_t`` the mean over the t-item subsets of its tie group of the product of
    their ``keep``: the item at group position j stops the user with expected probability ``E_{j-1} - E_j``. By the
    recurrence in docs/measures.md (ties), for the groups of two or more items all at once in a ``[G, M]`` matrix,
    ``t <= depth`` only (past it: values never read)."""
    above, here = torch.ones_like(keep), keep.clone()
    tied = size > 1
    if not bool(tied.any()):  # one host read: the matrix shape depends on the data
        return above, here
    rows, cols = tied.nonzero(as_tuple=True)
    _, group = torch.unique(rows * keep.shape[1] + (cols - offset[rows, cols]), return_inverse=True)
    num_groups, width = int(group.max()) + 1, int(size.max())
    subsets = width if depth is None else min(width, depth)  # the largest subset size read
    items = torch.ones(num_groups, width, dtype=keep.dtype, device=keep.device)
    items[group, offset[rows, cols]] = keep[rows, cols]
    group_size = torch.zeros(num_groups, dtype=torch.long, device=keep.device).scatter_(0, group, size[rows, cols])

    means = torch.zeros(num_groups, subsets + 1, dtype=keep.dtype, device=keep.device)
    means[:, 0] = 1
    t = torch.arange(1, subsets + 1, device=keep.device, dtype=keep.dtype)
    for n in range(1, width + 1):  # over the items of a tie group, all groups at once
        step = means.clone()
        step[:, 1:] = (n - t) / n * means[:, 1:] + t / n * items[:, n - 1 : n] * means[:, :-1]
        means = torch.where((group_size >= n).unsqueeze(1), step, means)
    j = offset[rows, cols].clamp(max=subsets - 1)  # past depth: a value never read
    above[rows, cols] = means[group, j]
    here[rows, cols] = means[group, j + 1]
    return above, here


def _err_options(*, transform: Transform, max_label: float | None) -> dict[str, object]:
    """ERR's kernel parameters, checked (shared with ``evaluate``'s ``err@k``)."""
    check_transform(transform)
    check_max_label(max_label)
    return {"transform": transform, "max_label": max_label}


@with_common_args
def err(
    preds: Tensor, target: Tensor, *, transform: Transform = "exponential", max_label: float | None = None,
    **options: Unpack[RankingOptions],
) -> Tensor:
    """Expected reciprocal rank at k (Chapelle et al., 2009); graded (no ``relevance_threshold``).

    {common_args}
        transform: Label to stop probability: ``"exponential"`` (``(2^g - 1) / 2^max_label``),
            ``"sigmoid"`` (``2 sigmoid(g) - 1``) or a callable returning probabilities in [0, 1].
        max_label: Top of the label scale ``g_max`` for ``"exponential"``. Default: each query's largest label (of
            ``ideal_target`` and the ranked items); the scale's top (4 for LETOR's 0-4) puts queries on one scale.

    Example:
        >>> import torch
        >>> labels = torch.tensor([3, 2, 3, 1, 0])  # in rank order
        >>> err(torch.arange(5, 0, -1.0), labels, max_label=3)
        tensor(0.9215)
    """
    params = _err_options(transform=transform, max_label=max_label)
    check_max_label(max_label, target, options["validate_args"])
    return run_measure(_err, preds, target, **options, **params)
