"""The one stateful mechanism behind every torchrank metric.

Dense input (``[..., N]`` rows, whole lists): ``update`` computes per-query values with the functional
and adds them to float64 sums and counts (``dist_reduce_fx="sum"``), so memory stays constant over an
epoch and a sync is one collective per state, exact for uneven shards and ranks without data.
Flat input with ``indexes`` (a query may span updates and ranks): the items are kept and grouped at
``compute``. ``keep_per_query=True`` also keeps each query's value, for the median, plots and tests.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import warnings
from collections.abc import Callable, Collection, Sequence
from typing import Any, ClassVar

import torch
import torchmetrics
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat
from torchmetrics.utilities.distributed import gather_all_tensors

from torchrank._extras import require
from torchrank.functional.backends import raises_at_once
from torchrank.functional.checks import (
    TORCHMETRICS_NAMES,
    VALUE_PROBLEMS,
    check_choice,
    deferred_value_checks,
    keyword_error,
    value_problems,
)
from torchrank.functional.ids import ids_to_dense

AGGREGATIONS = ("mean", "median", "min", "max")
# where a metric's compute passes through wrappers of its own: a warning points past them, at the caller's line
_WRAPPER_DIRS = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(torchmetrics.__file__)))


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the function calling this point at the first frame outside
    torchrank's metrics and torchmetrics: the user's line, however many compute wrappers stand between.

    Example:
        >>> caller_stacklevel() >= 2
        True
    """
    frame, level = sys._getframe(2), 2  # the frame that called the function which calls this
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)).startswith(_WRAPPER_DIRS):
        frame, level = frame.f_back, level + 1
    return level
_NOTHING_TO_COMPUTE = (
    "{name}.compute() was called before any update() since the metric was created or reset: no query has been "
    "scored, so its value is NaN (under DDP, a process without data of its own gets the others' synced value)."
)
_TORCHMETRICS_NOTHING_TO_COMPUTE = r"The ``compute`` method of metric \w+ was called before the ``update`` method"
_NESTED_NOTHING_TO_COMPUTE = r"\w+\.compute\(\) was called before any update\(\)"  # a metric held by the one asked


def refuse_torchmetrics_names(owner: str, given: Collection[str], accepted: Collection[str]) -> None:
    """Raise :func:`~torchrank.functional.checks.keyword_error`'s ``TypeError`` (what to write instead) where the
    keyword arguments ``given`` to ``owner``, left for torchmetrics' ``Metric`` (which would answer only "Unexpected
    keyword arguments"), hold a torchmetrics retrieval argument's name; ``accepted``: the names ``owner`` takes."""
    misnamed = [name for name in given if name in TORCHMETRICS_NAMES]
    if misnamed:
        raise keyword_error(owner, misnamed, accepted)


class KeepStateOnError:
    """Mixin for a torchmetrics ``Metric``: a ``forward`` whose batch is refused leaves the metric as it was, and a
    synced ``compute`` that raises leaves the process's own states in place (not every process's, still synced).

    torchmetrics' ``forward`` saves the accumulated state, resets the metric, updates it with the batch alone, then
    merges the saved state back: a batch that ``update`` (or ``compute``) refuses lost everything accumulated
    before it, although a refused ``update`` leaves the state unchanged. The instance's attributes are put back as
    they were (``reset`` clears list states in place: their items are kept in a copy; tensor states are replaced,
    not written, by the reset and the batch's update). Public as ``torchrank.metrics.KeepStateOnError`` for metrics
    built outside this package (``torchrank.compat``'s curve, your own); put it before ``Metric`` in the bases.

    Example:
        >>> import torch
        >>> from torchmetrics import Metric
        >>> from torchrank.metrics import KeepStateOnError
        >>> class Total(KeepStateOnError, Metric):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.add_state("total", torch.tensor(0.0), dist_reduce_fx="sum")
        ...     def update(self, x):
        ...         if (x < 0).any():
        ...             raise ValueError("x must be >= 0")
        ...         self.total += x.sum()
        ...     def compute(self):
        ...         return self.total
        >>> m = Total()
        >>> _ = m(torch.tensor([1.0, 2.0]))
        >>> try:
        ...     m(torch.tensor([-1.0]))
        ... except ValueError:
        ...     pass
        >>> m.compute()
        tensor(3.)
    """

    @torch.jit.unused  # as torchmetrics' own forward: a scripted metric has no forward
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        saved = {name: list(value) if isinstance(value, list) else value for name, value in vars(self).items()}
        try:
            return super().forward(*args, **kwargs)  # type: ignore[misc]
        except Exception:
            for name in set(vars(self)) - set(saved):
                delattr(self, name)
            vars(self).update(saved)
            raise

    def _wrap_compute(self, compute: Callable[..., Any]) -> Callable[..., Any]:
        """torchmetrics' wrapper of ``compute``, which puts the process's own states back after a synced compute
        but not after one that raised (its ``sync_context`` has no ``finally``): the metric stayed synced, holding
        every process's states, and each later ``compute`` raised "already synced". Here they are put back too."""
        wrapped = super()._wrap_compute(compute)  # type: ignore[misc]

        @functools.wraps(compute)
        def compute_or_unsync(*args: Any, **kwargs: Any) -> Any:
            synced_before = self._is_synced  # a sync the caller made stays theirs to undo
            try:
                return wrapped(*args, **kwargs)
            except Exception:
                if not synced_before and self._cache is not None:  # synced (or syncing) for this compute
                    for name, value in self._cache.items():
                        setattr(self, name, value)
                    self._is_synced, self._cache = False, None
                raise

        return compute_or_unsync


class NothingToComputeInOurWords:
    """Mixin for a torchmetrics ``Metric``: a ``compute`` before any ``update`` warns once, in torchrank's words
    (what the value is and why), instead of torchmetrics' "may lead to errors"; put it before ``Metric`` in the
    bases. ``_torchmetrics_words = True`` (torchrank.compat's drop-ins) keeps torchmetrics' own warning."""

    # True: torchmetrics' own errors and warnings, word for word (torchrank.compat's drop-ins); else torchrank's
    _torchmetrics_words: ClassVar[bool] = False

    def _wrap_compute(self, compute: Callable[..., Any]) -> Callable[..., Any]:
        """torchmetrics' wrapper of ``compute`` (sync, cache), saying in torchrank's words what a ``compute`` before
        any ``update`` gives: torchmetrics warns that it "may lead to errors"."""
        wrapped = super()._wrap_compute(compute)  # type: ignore[misc]
        if self._torchmetrics_words:
            return wrapped

        @functools.wraps(compute)
        def compute_or_warn(*args: Any, **kwargs: Any) -> Any:
            if self.update_called:
                return wrapped(*args, **kwargs)
            message = _NOTHING_TO_COMPUTE.format(name=type(self).__name__)
            warnings.warn(message, UserWarning, stacklevel=caller_stacklevel())
            with warnings.catch_warnings():  # the same news once, in torchrank's words
                warnings.filterwarnings("ignore", message=_TORCHMETRICS_NOTHING_TO_COMPUTE, category=UserWarning)
                warnings.filterwarnings("ignore", message=_NESTED_NOTHING_TO_COMPUTE, category=UserWarning)
                return wrapped(*args, **kwargs)

        return compute_or_warn


class RankingMetric(KeepStateOnError, NothingToComputeInOurWords, Metric):
    """Accumulates one or several ranking measures; subclasses say which (``_values``) and how they are named.

    Args:
        num_outputs: Values per query (one per cut-off or measure).
        config: What identifies the metric's configuration (name and parameters): metrics of different
            configurations never share a ``MetricCollection`` compute group, even when their states
            happen to be equal after a first update (the configuration names an empty state, and
            torchmetrics merges only metrics with the same state names).
        keep_per_query: Also keep every query's values (memory grows with the number of queries).
        aggregation: ``"mean"`` over queries, or ``"median"``, ``"min"``, ``"max"`` (these keep the
            per-query values).
        options: The options the subclass's constructor took from its caller, for the error that a
            torchmetrics argument left in ``kwargs`` gets (``top_k``: use ``k``, where ``k`` is one of them).
        kwargs: torchmetrics' ``Metric`` options (``sync_on_compute``, ``dist_sync_on_step``,
            ``process_group``, ``compute_on_cpu``, ...).
    """

    is_differentiable = False
    higher_is_better: bool | None = True
    full_state_update = False
    plot_lower_bound: float | None = 0.0
    plot_upper_bound: float | None = 1.0

    # [2 * num_outputs + len(VALUE_PROBLEMS)]: value sums, value counts, 1 / the first update with each of
    # VALUE_PROBLEMS (0: none; device backends)
    sums: Tensor

    def __init__(
        self,
        num_outputs: int,
        config: str,
        keep_per_query: bool = False,
        aggregation: str = "mean",
        *,
        options: Collection[str] = (),
        **kwargs: Any,
    ) -> None:
        if not self._torchmetrics_words:
            refuse_torchmetrics_names(type(self).__name__, kwargs, {*options, "keep_per_query", "aggregation", "mask"})
        super().__init__(**kwargs)
        check_choice("aggregation", aggregation, AGGREGATIONS)
        if not isinstance(keep_per_query, bool):
            raise TypeError(f"Argument `keep_per_query` must be a bool, got {keep_per_query!r}.")
        self.num_outputs = num_outputs
        self.aggregation = aggregation
        self.keep_per_query = keep_per_query or aggregation != "mean"
        self._mode: str | None = None  # "dense" or "flat", fixed by the first update until reset
        # few states, as each costs collectives in a sync: sums and counts share one tensor; on the device backends
        # a dense batch's values are checked without reading the host: a bad batch adds nothing, and the first
        # update with each problem is raised at compute
        sums = torch.zeros(2 * num_outputs + len(VALUE_PROBLEMS), dtype=torch.float64)
        self.add_state("sums", sums, dist_reduce_fx=_reduce_sums)
        # MetricCollection merges metrics whose states are equal after a first update (P@1 and R@1 on a batch
        # without relevant items); a state named by the configuration keeps different ones apart. It stays an
        # empty list with no reduction: no collective in a sync, no entry in state_dict
        self.add_state(configuration_state(config), [], dist_reduce_fx=None)
        if self.keep_per_query:
            self.add_state("per_query", [], dist_reduce_fx="cat")
        # flat input: scores, labels, judged and ideal labels (NaN: not given) as float64 columns; query ids apart
        self.add_state("flat_items", [], dist_reduce_fx="cat")
        self.add_state("flat_indexes", [], dist_reduce_fx="cat")

    @property
    def total(self) -> Tensor:
        """Sum of the per-query values seen in dense updates ``[num_outputs]``."""
        return self.sums[: self.num_outputs]

    @property
    def count(self) -> Tensor:
        """Number of (not skipped) queries behind :attr:`total` ``[num_outputs]``."""
        return self.sums[self.num_outputs : 2 * self.num_outputs]

    # ------------------------------------------------------------------ what subclasses provide
    def _values(self, preds: Tensor, target: Tensor, **inputs: Tensor | None) -> Tensor:
        """Per-query values ``[Q, num_outputs]`` (NaN where a query is skipped), from the functional."""
        raise NotImplementedError

    def _format_output(self, values: Tensor) -> Any:
        """The user-facing form of ``[num_outputs]`` values (a tensor, or a dict of named values)."""
        return values[0] if self.num_outputs == 1 and not getattr(self, "_k_is_sequence", False) else values

    # ------------------------------------------------------------------ torchmetrics contract
    def update(
        self,
        preds: Tensor | None = None,
        target: Tensor | None = None,
        indexes: Tensor | None = None,
        mask: Tensor | None = None,
        ideal_target: Tensor | None = None,
        judged: Tensor | None = None,
        *,
        ranked_ids: Tensor | None = None,
        relevant_ids: Tensor | None = None,
        relevant_labels: Tensor | None = None,
        pad_id: int = -1,
        num_judged: Tensor | None = None,
        pooled_unjudged: Tensor | None = None,
    ) -> None:
        """Add a batch: dense ``[..., N]`` whole lists, flat items with their query ``indexes``, or id lists.

        ``num_judged`` (the judged items of each query, retrieved or not) and ``pooled_unjudged`` (per item: in the
        pool but not judged), dense and id-list updates only, go to the measures that read them (bpref, which needs
        ``num_judged`` with ``ideal_target``; infAP).

        Id lists (a retriever's or recommender's output): ``ranked_ids [B, K]`` best first and ``relevant_ids
        [B, M]`` (``relevant_labels`` graded, else binary; ``pad_id`` pads both; ``preds`` optional scores of the
        ranked items), read as :func:`torchrank.functional.ids_to_dense` reads them: relevant items missing from
        the top K still count in R and the ideal.

        Nothing is stored unless the whole batch is valid, so a failed update leaves the state unchanged.
        With flat input, ``judged`` is used only when every flat update gave it; ``ideal_target`` (one label per
        item) stands for the item's ``target`` where an update did not give it.

        Example:
            >>> import torch
            >>> from torchrank.metrics import Recall
            >>> metric = Recall(k=2)
            >>> metric.update(ranked_ids=torch.tensor([[7, 3, 9]]), relevant_ids=torch.tensor([[3, 8]]))
            >>> metric.compute()  # item 3 found in the top 2, item 8 never retrieved
            tensor(0.5000)
        """
        if ranked_ids is not None or relevant_ids is not None:
            inputs = _id_list_inputs(preds, target, indexes, mask, ideal_target, ranked_ids, relevant_ids,
                                     relevant_labels, pad_id)
            preds, target, mask, ideal_target = (inputs[n] for n in ("preds", "target", "mask", "ideal_target"))
        elif preds is None or target is None:
            raise TypeError(
                f"{type(self).__name__}.update takes `preds` and `target` (dense or flat input), or `ranked_ids` and "
                "`relevant_ids` (id lists)."
            )
        mode = "dense" if indexes is None else "flat"
        if self._mode is not None and mode != self._mode:
            raise ValueError(
                f"This metric received {self._mode} input before and {mode} input now; use one layout "
                "(dense rows, or flat items with `indexes`) until `reset()`."
            )
        counts = {name: x for name, x in (("num_judged", num_judged), ("pooled_unjudged", pooled_unjudged))
                  if x is not None}
        if mode == "flat":
            for name in counts:  # a flat query may span updates: a count per query of one update has no query
                raise ValueError(f"Argument `{name}` takes dense or id-list updates, not flat ones (`indexes`).")
            self._update_flat(preds, target, indexes, mask, ideal_target, judged)
        elif self._checks_values() and isinstance(preds, Tensor) and not raises_at_once(preds.device):
            self._update_dense_unchecked(preds, target, mask, ideal_target, judged, counts)
        else:
            values = self._values(preds, target, mask=mask, ideal_target=ideal_target, judged=judged, **counts)
            self._add(_per_query_rows(values, self.num_outputs))
        if self._mode != mode:  # a module attribute set costs more than the comparison: set once, not per update
            self._mode = mode

    def _skips_queries(self) -> bool:
        """Whether per-query values may be NaN, for queries left out (``empty_target_action="skip"``; the functionals'
        default is ``"neg"``)."""
        return getattr(self, "_params", {}).get("empty_target_action", "neg") == "skip"

    def _checks_values(self) -> bool:
        """Whether the measure checks values (NaN scores, negative labels): its ``validate_args``."""
        return getattr(self, "_params", {}).get("validate_args", True)

    def _update_dense_unchecked(
        self,
        preds: Tensor,
        target: Tensor,
        mask: Tensor | None,
        ideal_target: Tensor | None,
        judged: Tensor | None,
        counts: dict[str, Tensor],
    ) -> None:
        """A dense update on a device backend: the value checks run on the device beside the measure, and a batch
        that fails one adds nothing; :meth:`compute` raises for it (no host read here: the stream never waits)."""
        with deferred_value_checks() as found:  # the functional's checks run on the device (the fused kernel's own)
            values = self._values(preds, target, mask=mask, ideal_target=ideal_target, judged=judged, **counts)
        if not found:  # every path reports; a functional that did not is checked here
            found.append(value_problems(preds, target, ideal_target, mask=mask))
        problems = found[0] if len(found) == 1 else torch.stack(found).any(0)  # chunked calls report per chunk
        self._add(_per_query_rows(values, self.num_outputs), bad=problems.any())
        # the first bad update n is kept as the largest 1 / n (one multiply and one maximum, no host-to-device copy)
        invalid = self.sums[2 * self.num_outputs : 2 * self.num_outputs + len(VALUE_PROBLEMS)]
        torch.maximum(invalid, problems * (1.0 / self._update_count), out=invalid)

    def _raise_for_invalid_updates(self) -> None:
        """Raise for the first problem a device-checked update found (one host read, at compute)."""
        inverse_first = self.sums[2 * self.num_outputs : 2 * self.num_outputs + len(VALUE_PROBLEMS)].tolist()
        for (name, problem), inverse in zip(VALUE_PROBLEMS, inverse_first, strict=True):
            if inverse > 0:
                raise ValueError(
                    f"Argument `{name}` {problem} in update {round(1 / inverse)} (counted from 1 since the last reset, "
                    "on the process that saw it); that batch was left out. Fix the input, then `reset()`."
                )

    def _update_flat(
        self,
        preds: Tensor,
        target: Tensor,
        indexes: Tensor,
        mask: Tensor | None,
        ideal_target: Tensor | None,
        judged: Tensor | None,
    ) -> None:
        # validate the batch the way compute will read it, before storing anything; a batch may hold part
        # of a query, so whether a query has a relevant item is judged at compute only
        self._values(
            preds, target, indexes=indexes, mask=mask, ideal_target=ideal_target, judged=judged,
            empty_target_action="neg",
        )
        keep = slice(None) if mask is None else mask
        not_given = torch.full_like(preds[keep], torch.nan, dtype=torch.float64)
        columns = [preds[keep], target[keep]] + [not_given if x is None else x[keep] for x in (judged, ideal_target)]
        self.flat_items.append(torch.stack([c.to(torch.float64) for c in columns], 1))
        self.flat_indexes.append(indexes[keep].to(torch.int64))  # one dtype on every process

    def _add(self, values: Tensor, bad: Tensor | None = None) -> None:
        """Add per-query ``values`` ``[Q, num_outputs]``; ``bad`` (a bool on the device) True adds nothing."""
        # sums and counts in one add: a validation epoch calls this once per batch
        if self._skips_queries():  # NaN marks a skipped query: left out of sums and counts
            known = values == values
            added = torch.cat([torch.nansum(values, 0, dtype=torch.float64), known.sum(0, dtype=torch.float64)])
        else:  # every query counts
            added = torch.nn.functional.pad(values.sum(0, dtype=torch.float64), (0, self.num_outputs),
                                            value=float(values.shape[0]))
        self.sums[: 2 * self.num_outputs].add_(added if bad is None else added.masked_fill(bad, 0))
        if self.keep_per_query:
            kept = values.to(torch.float64)
            self.per_query.append(kept if bad is None else kept.masked_fill(bad, torch.nan))

    def compute(self) -> Any:
        """The mean (or ``aggregation``) over every query seen, across updates and processes."""
        self._raise_for_invalid_updates()
        total, count = self.total.clone(), self.count.clone()
        kept = _concatenated(self.per_query) if self.keep_per_query else None
        per_query = [] if kept is None else [kept]
        items = _concatenated(self.flat_items)
        if items is not None:
            preds, target, judged, ideal = items.unbind(1)
            no_ideal = torch.isnan(ideal)
            flat = self._values(
                preds, target, indexes=_concatenated(self.flat_indexes),
                judged=None if bool(torch.isnan(judged).any()) else judged.bool(),
                ideal_target=None if bool(no_ideal.all()) else torch.where(no_ideal, target, ideal),
            ).reshape(-1, self.num_outputs).to(torch.float64)
            known = ~torch.isnan(flat)
            total += torch.where(known, flat, 0).sum(0)
            count += known.sum(0)
            per_query.append(flat)
        if self.aggregation == "mean":
            value = total / count  # NaN where no query was counted, as for an empty mean
        else:
            value = _aggregate(torch.cat(per_query) if per_query else total.new_zeros(0, self.num_outputs),
                               self.aggregation)
        return self._format_output(value.to(torch.get_default_dtype()))

    def per_query_values(self) -> Tensor:
        """Each query's values ``[Q, num_outputs]`` from dense updates, in update order (needs
        ``keep_per_query=True``); flat queries are only grouped, and valued, at ``compute``."""
        if not self.keep_per_query:
            raise RuntimeError("Per-query values are kept only with `keep_per_query=True`.")
        kept = _concatenated(self.per_query)
        return self.total.new_zeros(0, self.num_outputs) if kept is None else kept

    def _sync_dist(self, dist_sync_fn: Callable = gather_all_tensors, process_group: Any = None) -> None:
        """Sync as torchmetrics does, after giving empty list states an empty tensor of their dtype and
        trailing shape: torchmetrics' own placeholder (float32, 1-D) would not match the other processes'
        tensors, and gloo aborts on the size mismatch."""
        for name, empty in self._empty_list_states().items():
            if isinstance(getattr(self, name), list) and not getattr(self, name):
                setattr(self, name, [empty])
        super()._sync_dist(dist_sync_fn, process_group)

    def _empty_list_states(self) -> dict[str, Tensor]:
        empty = {
            "flat_items": torch.zeros(0, 4, dtype=torch.float64, device=self.device),
            "flat_indexes": torch.zeros(0, dtype=torch.int64, device=self.device),
        }
        if self.keep_per_query:
            empty["per_query"] = torch.zeros(0, self.num_outputs, dtype=torch.float64, device=self.device)
        return empty

    def reset(self) -> None:
        super().reset()
        self._mode = None

    def plot(self, val: Any = None, ax: Any = None) -> Any:
        """Plot a value (default: ``compute()``) or a sequence of values; needs matplotlib (the ``plot`` extra)."""
        require("matplotlib", f"{type(self).__name__}.plot()")
        return self._plot(val, ax)


def _per_query_rows(values: Tensor, num_outputs: int) -> Tensor:
    """``values`` as ``[Q, num_outputs]`` rows (no view op where they are already: an update counts its ops)."""
    return values if values.ndim == 2 and values.shape[1] == num_outputs else values.reshape(-1, num_outputs)


def _id_list_inputs(
    scores: Tensor | None,
    target: Tensor | None,
    indexes: Tensor | None,
    mask: Tensor | None,
    ideal_target: Tensor | None,
    ranked_ids: Tensor | None,
    relevant_ids: Tensor | None,
    relevant_labels: Tensor | None,
    pad_id: int,
) -> dict[str, Tensor]:
    """The dense input of an id-list update (both id tensors given, no dense or flat argument but optional scores)."""
    if ranked_ids is None or relevant_ids is None:
        raise TypeError("An id-list update takes both `ranked_ids` and `relevant_ids`.")
    given = [name for name, x in (("target", target), ("indexes", indexes), ("mask", mask),
                                  ("ideal_target", ideal_target)) if x is not None]
    if given:
        raise TypeError(
            f"An id-list update builds target, mask and ideal_target from the ids; it takes no {given} "
            "(`preds` may hold the ranked items' scores)."
        )
    return ids_to_dense(ranked_ids, relevant_ids, relevant_labels, pad_id=pad_id, scores=scores)


def configuration_state(config: str) -> str:
    """The name of the (always empty) state that tells a metric's configuration ``config`` apart: the same in every
    process (unlike ``hash``), a valid attribute name whatever the configuration's text.

    Example:
        >>> configuration_state("NDCG(k=10)") == configuration_state("NDCG(k=10)") != configuration_state("NDCG(k=5)")
        True
    """
    return "configuration_" + hashlib.sha256(config.encode()).hexdigest()[:16]


def _reduce_sums(stacked: Tensor) -> Tensor:
    """Reduce ``[processes, 2K + len(VALUE_PROBLEMS)]`` sums states: add sums and counts, keep the first bad update
    of each problem (the largest 1 / n)."""
    kept = -len(VALUE_PROBLEMS)
    return torch.cat([stacked[:, :kept].sum(0), stacked[:, kept:].amax(0)])


def _concatenated(state: Tensor | list[Tensor]) -> Tensor | None:
    """A list state as one tensor, or None when it holds nothing. After a sync torchmetrics leaves a
    tensor (empty where no process had data) in place of the list."""
    if isinstance(state, list) and not state:
        return None
    value = dim_zero_cat(state)
    return value if value.numel() else None


def _aggregate(values: Tensor, aggregation: str) -> Tensor:
    """Median / min / max over queries of each column, ignoring NaN (skipped queries)."""
    if aggregation == "median":
        return torch.nanmedian(values, 0).values if values.numel() else values.new_full(values.shape[1:], torch.nan)
    fill = float("inf") if aggregation == "min" else -float("inf")
    filled = torch.where(torch.isnan(values), fill, values)
    if values.shape[0] == 0:
        return values.new_full(values.shape[1:], torch.nan)
    out = filled.amin(0) if aggregation == "min" else filled.amax(0)
    return torch.where(torch.isinf(out) & (out == fill), torch.nan, out)


def metric_config(name: str, params: dict[str, Any]) -> str:
    """A stable text form of a metric's configuration (callables by qualified name)."""

    def show(value: Any) -> str:
        if callable(value):
            return getattr(value, "__qualname__", repr(value))
        return repr(value)

    return name + "(" + ", ".join(f"{key}={show(value)}" for key, value in sorted(params.items())) + ")"


ValuesFn = Callable[..., Tensor]
KS = int | Sequence[int] | None
