"""A ``torchmetrics.Metric`` for every declared measure of :mod:`torchrank.functional`, and :class:`RankingMetrics`.

The classes are derived from the measure registry (:data:`torchrank.functional.MEASURES`): each declaration
with a class name gives a :class:`FunctionalMetric` over its public function, with its direction
(``higher_is_better``) and plot bounds. Each class is its functional plus accumulation: keyword arguments the
functional takes (``k``, ``ties``, ``gain``, ``p``, ...) configure the measure, the others
(``sync_on_compute``, ``compute_on_cpu``, ...) go to ``torchmetrics.Metric``.

Example:
    >>> import torch
    >>> metric = Precision(k=2)
    >>> metric.update(torch.tensor([[0.9, 0.8, 0.1]]), torch.tensor([[1, 0, 1]]))
    >>> metric.update(torch.tensor([[0.2, 0.7, 0.1]]), torch.tensor([[0, 1, 1]]))
    >>> metric.compute()
    tensor(0.5000)
    >>> metric = NDCG(k=[1, 3])
    >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 2, 1]]))
    >>> metric.compute()
    tensor([0.0000, 0.6697])
    >>> MeanRank.higher_is_better, GAP.higher_is_better
    (False, True)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

import torchrank.functional as F
from torchrank.functional.checks import normalize_k
from torchrank.functional.measures import parse_measure
from torchrank.functional.registry import MEASURES, Declaration
from torchrank.functional.trec_extra import judged_only_mask
from torchrank.metrics._base import RankingMetric, metric_config

_INPUTS = ("preds", "target", "indexes", "mask", "ideal_target", "judged", "num_judged", "pooled_unjudged", "reduction")
_PROBE = (torch.tensor([[0.5, 0.25]]), torch.tensor([[1, 0]]))  # validates options at construction


@functools.cache
def _parameters(function: Callable[..., Tensor]) -> frozenset[str]:
    """The parameter names of a functional (read once: ``inspect.signature`` is slow)."""
    return frozenset(inspect.signature(function).parameters)


class FunctionalMetric(RankingMetric):
    """Accumulates the per-query values of ``_function`` (a :mod:`torchrank.functional` measure).

    Args:
        k: Cut-off(s), as in the functional: an int, a sequence (the value gains a last dimension) or None.
        keep_per_query: Keep every query's value (``per_query_values()``; needed for ``aggregation``
            other than the mean).
        aggregation: ``"mean"``, ``"median"``, ``"min"`` or ``"max"`` over queries.
        kwargs: The functional's own options (``ties``, ``empty_target_action``, ``relevance_threshold``,
            ``validate_args``, and e.g. ``gain`` for NDCG) and torchmetrics' ``Metric`` options.
    """

    _function: ClassVar[Callable[..., Tensor]]

    def __init__(
        self, k: int | Sequence[int] | None = None, *, keep_per_query: bool = False, aggregation: str = "mean",
        _identity: dict[str, Any] | None = None, **kwargs: Any,
    ) -> None:
        accepted = _parameters(type(self)._function) - set(_INPUTS)
        self._judged_only = kwargs.pop("judged_only", False)  # drops unjudged items before the functional ranks
        judged_only_mask(None, None, self._judged_only)  # checks it is a bool
        judged_only = {"judged_only": True} if self._judged_only else {}  # a setting that tells configurations apart
        if k is not None and "k" not in accepted:
            raise TypeError(f"{type(self).__name__} takes no cut-off `k`: it evaluates whole lists.")
        params = {name: kwargs.pop(name) for name in list(kwargs) if name in accepted}
        ks, k_is_sequence = normalize_k(k)
        if "k" in accepted:  # copies: mutating the caller's list must not change the measure silently
            params["k"] = list(k) if k_is_sequence else k
        self._params = params
        self._k_is_sequence = k_is_sequence
        type(self)._function(*_PROBE, **params)  # a bad option fails here, not at the first update
        super().__init__(  # _identity: more settings that tell configurations apart (subclasses' own)
            num_outputs=len(ks),
            config=metric_config(type(self).__name__, {**params, **(_identity or {}), **judged_only}),
            keep_per_query=keep_per_query, aggregation=aggregation, options=accepted, **kwargs,
        )
        self.k = list(k) if k_is_sequence else k

    def _values(self, preds: Tensor, target: Tensor, **inputs: Tensor | None) -> Tensor:
        if "k" in self._params and self.k != self._params["k"]:
            raise ValueError(
                f"`k` changed from {self._params['k']!r} to {self.k!r} after construction; the accumulated "
                "values are for the first. Create a new metric for another cut-off."
            )
        if self._judged_only:  # the judged flags become the mask; a functional without `judged` needs no more
            inputs["mask"] = judged_only_mask(inputs.get("mask"), inputs.get("judged"), True)
            if "judged" not in _parameters(type(self)._function):
                inputs.pop("judged", None)
        given = {name: value for name, value in inputs.items() if value is not None}
        if "empty_target_action" not in _parameters(type(self)._function):
            # the flat updates' validation asks for "neg" (a query may be split over updates); a functional with
            # no such option (judged@k) has no empty-query rule to override
            given.pop("empty_target_action", None)
        unread = set(given) - _parameters(type(self)._function)
        if unread:
            raise ValueError(f"{type(self).__name__} does not take {sorted(unread)}: its functional has no such input.")
        params = self._params | given
        if isinstance(params.get("k"), int):  # [Q, 1] as the state adds it, not [Q] to be reshaped
            params["k"] = [params["k"]]
        return type(self)._function(preds, target, reduction="none", **params)


def _check_fixed(name: str, fixed: Mapping[str, object], kwargs: dict[str, Any]) -> None:
    """A class whose declaration fixes an argument of its functional (Kendall's ``distance``) refuses another
    value, naming the class that has it."""
    for param, value in fixed.items():
        if param not in kwargs:
            continue
        given = kwargs.pop(param)
        if given != value:
            others = [s.metric for s in MEASURES.values() if s.metric and param in s.function_params
                      and s.function_params[param] == given]
            hint = f"use `{others[0]}`" if others else "call the functional"
            raise ValueError(f"{name} always has `{param}={value!r}`; for `{param}={given!r}` {hint}.")


def _derive(spec: Declaration) -> type[FunctionalMetric]:
    """The ``torchmetrics`` class of a declared family: its public function, direction and plot bounds."""
    function = spec.function
    fixed = dict(spec.function_params)

    def __init__(self: FunctionalMetric, k: int | Sequence[int] | None = None, **kwargs: Any) -> None:
        _check_fixed(type(self).__name__, fixed, kwargs)
        FunctionalMetric.__init__(self, k, **kwargs)

    return type(
        spec.metric,
        (FunctionalMetric,),
        {
            "__doc__": f"{spec.doc} Over queries (:func:`torchrank.functional.{function.__name__}`"
            + "".join(f", ``{p}={v!r}``" for p, v in fixed.items()) + ").",
            "__module__": __name__,
            "__qualname__": spec.metric,
            "__init__": __init__,
            "_function": staticmethod(spec.public_function),
            "higher_is_better": spec.higher_is_better,
            "plot_lower_bound": spec.plot_bounds[0],
            "plot_upper_bound": spec.plot_bounds[1],
        },
    )


# one class per declared family with a class name: declaring a measure gives it its class
_DERIVED = {spec.metric: _derive(spec) for spec in MEASURES.values() if spec.metric is not None}
globals().update(_DERIVED)
__all__ = sorted(["FunctionalMetric", "RankingMetrics", *_DERIVED])


class RankingMetrics(RankingMetric):
    """Several measures by name (``"ndcg@10"``, ``"map"``, ``"P@5"``, ``"rbp.95"``, ``"ndcg_cut_10"``, ...),
    ranked once per update; ``compute`` returns a dict keyed by the names as given (``self.log_dict``-ready).

    Args:
        measures: Names in the grammar of :func:`torchrank.functional.evaluate`.
        keep_per_query: Keep every query's values.
        aggregation: ``"mean"``, ``"median"``, ``"min"`` or ``"max"`` over queries.
        kwargs: ``evaluate``'s options (``ties``, ``empty_target_action``, ``relevance_threshold``,
            ``validate_args``) and torchmetrics' ``Metric`` options.

    Example:
        >>> import torch
        >>> metrics = RankingMetrics(["ndcg@2", "map", "P@1"])
        >>> metrics.update(torch.tensor([[0.9, 0.8, 0.1]]), torch.tensor([[1, 0, 1]]))
        >>> {name: round(value.item(), 4) for name, value in metrics.compute().items()}
        {'ndcg@2': 0.6131, 'map': 0.8333, 'P@1': 1.0}
    """

    def __init__(
        self, measures: Sequence[str], *, keep_per_query: bool = False, aggregation: str = "mean", **kwargs: Any
    ) -> None:
        if isinstance(measures, str):
            raise TypeError("Argument `measures` must be a sequence of names, got a single string.")
        measures = list(measures)
        for name in measures:
            parse_measure(name)
        if len(set(measures)) != len(measures):
            raise ValueError(f"Argument `measures` names a measure twice: {measures}.")
        accepted = set(inspect.signature(F.evaluate).parameters) - set(_INPUTS) - {"measures"}
        self._params = {name: kwargs.pop(name) for name in list(kwargs) if name in accepted}
        F.evaluate(*_PROBE, measures, **self._params)
        self.measures = measures
        super().__init__(
            num_outputs=len(measures), config=metric_config("RankingMetrics", {"measures": measures, **self._params}),
            keep_per_query=keep_per_query, aggregation=aggregation, options={*accepted, "measures"}, **kwargs,
        )

    def _values(self, preds: Tensor, target: Tensor, **inputs: Tensor | None) -> Tensor:
        given = {name: value for name, value in inputs.items() if value is not None}
        values = F.evaluate(preds, target, self.measures, reduction="none", **(self._params | given))
        return torch.stack([values[name].reshape(-1) for name in self.measures], 1)

    def _format_output(self, values: Tensor) -> dict[str, Tensor]:
        return {name: values[j] for j, name in enumerate(self.measures)}
