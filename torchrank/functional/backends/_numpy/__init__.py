"""The numpy backend: CPU tensors ranked by numpy's SIMD sorts of packed keys, tied rows planned on the host, value
checks read on the host (their bounds size the keys' bits), and numpy's passes where they beat torch's on a CPU."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from torchrank.functional._descending import descending_rows
from torchrank.functional._inputs import IDEAL_MISSES_LABELS, RankingInput, _raise_problem
from torchrank.functional._ranked import Ranking, _gather_ranking
from torchrank.functional.backends._numpy.ids import _NUMPY_FIRST_MIN_IDS, _first_numpy, _match_numpy
from torchrank.functional.backends._numpy.keys import value_range
from torchrank.functional.backends._numpy.order import _rank_tied_rows_apart
from torchrank.functional.backends._numpy.tied_rows import rows_any
from torchrank.functional.backends._torch import TorchBackend, _sorted_ranking, _width, in_rank_order


class NumpyBackend(TorchBackend):
    """The torch backend's seam (:class:`TorchBackend`), with numpy's routes for CPU tensors."""

    name = "numpy"
    checks_on_host = True

    def order(self, inputs: RankingInput, ties: str, relevance_threshold: float, depth: int | None) -> Ranking:
        """Every row ranked once, ties aside; the few that tie items of different labels (or judged flags) within
        ``depth`` get a ranking of their own applying ``ties`` (:attr:`Ranking.apart`, merged by ``apply_measure``)."""
        if in_rank_order(inputs):  # no row ties: an untied row ranks as "first", as the sorting routes label it
            return _gather_ranking(inputs, _width(inputs, depth), "first" if ties == "average" else ties,
                                   relevance_threshold)
        ranked = _rank_tied_rows_apart(inputs, ties, relevance_threshold, depth)
        return ranked if ranked is not None else _sorted_ranking(inputs, ties, relevance_threshold)

    def descending(self, values: Tensor, depth: int | None) -> Tensor:
        return descending_rows(values, depth)

    def may_tie(self, ranking: Ranking) -> bool:
        return ranking.holds_tie

    def tie_means(self, ranking: Ranking, values: Tensor) -> Tensor:
        # the group sums over the cached sizes (scatter_reduce's mean is slower on CPU)
        return ranking.group_sum(values) / ranking._group_sizes

    def rows_any(self, x: Tensor) -> Tensor:
        return rows_any(x)

    def real_mask(self, mask: Tensor | None) -> Tensor | None:
        return None if mask is not None and bool(mask.numpy().all()) else mask

    def check_values(
        self, given: tuple[Tensor, Tensor, Tensor | None], target: Tensor, ideal: Tensor, label_limit: float | None
    ) -> tuple[tuple[float, float], tuple[float, float]]:
        """The checks read on the host, raising for the first problem; the smallest and largest score and label, which
        the CPU keys reuse."""
        preds, labels, ideal_target = given
        scores = value_range(preds)
        if math.isnan(scores[0]):
            _raise_problem(0)
        bounds = value_range(labels)
        # a NaN makes both bounds NaN, an infinity is a bound; an infinite gain makes the measures NaN or inf, unraised
        if not all(map(math.isfinite, bounds)):
            _raise_problem(1)
        if bounds[0] < 0:
            _raise_problem(2)
        if label_limit is not None and bounds[1] > label_limit:
            _raise_problem(4)
        if ideal_target is not None and ideal_target.dtype != torch.bool and ideal_target.numel():
            ideal_bounds = value_range(ideal_target)
            if ideal_bounds[0] < 0 or not all(map(math.isfinite, ideal_bounds)):  # a NaN passes `< 0`, not this
                _raise_problem(3)
            if label_limit is not None and ideal_bounds[1] > label_limit:
                _raise_problem(5)
        if ideal is not target:
            top = None if labels.is_floating_point() else bounds[1]
            if _misses_labels(target, ideal, top):
                _raise_problem(IDEAL_MISSES_LABELS)
        return scores, bounds

    def grouped(self, indexes: Tensor) -> bool:
        return bool((indexes[1:] >= indexes[:-1]).all())

    def scatter_rows(self, x: Tensor, mask: Tensor) -> Tensor:
        if x.dtype == torch.bfloat16:  # numpy has no bfloat16
            return super().scatter_rows(x, mask)
        out = x.new_zeros(mask.shape)
        out.numpy()[mask.numpy()] = x.numpy()  # numpy's boolean assignment: faster on CPU than masked_scatter_
        return out

    def match_ids(
        self, ranked_ids: Tensor, relevant_ids: Tensor, relevant_labels: Tensor | None, pad_id: int
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        # on CPU numpy's comparison beats torch's (benchmarks/notes/code_comment_timings.md)
        mask = torch.from_numpy(ranked_ids.numpy() != pad_id)
        return mask, _match_numpy(ranked_ids, relevant_ids, relevant_labels, pad_id, mask)

    def first_occurrence(self, ids: Tensor) -> Tensor | None:
        return _first_numpy(ids) if ids.numel() >= _NUMPY_FIRST_MIN_IDS else None


def _misses_labels(target: Tensor, ideal: Tensor, top: float | None) -> bool:
    """``ideal_misses_labels`` of CPU rows by numpy's sorts; ``top``: the largest of integer labels, else None."""
    listed, judged = (x.numpy() if x.dtype != torch.bfloat16 else x.float().numpy() for x in (target, ideal))
    if top is not None and top <= _COUNTED_LABELS:
        return any(bool((np.count_nonzero(listed >= t, 1) > np.count_nonzero(judged >= t, 1)).any())
                   for t in range(1, int(top) + 1))
    listed, judged = np.sort(listed, 1)[:, ::-1], np.sort(judged, 1)[:, ::-1]  # descending views
    n, m = listed.shape[1], judged.shape[1]
    return bool((listed[:, :m] > judged[:, :n]).any()) or bool((listed[:, m:] > 0).any())


_COUNTED_LABELS = 4  # integer labels up to this are compared by counts at each value (a pass each), others by sorts
