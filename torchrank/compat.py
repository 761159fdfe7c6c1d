"""Drop-in replacements for ``torchmetrics.retrieval``'s classes, computed by torchrank's kernels.

Migrating is a change of import::

    from torchmetrics.retrieval import RetrievalNormalizedDCG  # before
    from torchrank.compat import RetrievalNormalizedDCG  # after

Each class takes torchmetrics' constructor arguments (``empty_target_action``, ``ignore_index``, ``top_k``,
``adaptive_k``, ``aggregation`` and ``Metric`` kwargs) and its input (``update(preds, target, indexes)``,
flattened), and is a thin subclass of the :mod:`torchrank.metrics` class that computes it. torchmetrics'
semantics are reproduced where they are defined, including its quirks: the labels of items scored ``<= 0``
count as 0 in MAP, MRR, precision and recall; ``empty_target_action="error"`` raises at ``compute``, for a
query without relevant item over all updates; ``"skip"`` on every query gives 0.

What is not reproduced (see ``docs/migrating_from_torchmetrics.md``):

- ``RetrievalMAP(top_k=k)`` divides by all R relevant items of the query (trec_eval ``map_cut_k``), not by
  the relevant items found in the top k. A :class:`CompatWarning` says so at construction.
- Tied scores: torchmetrics' AP, MRR, precision, recall, hit rate, R-precision and fall-out take whatever
  order its sorts return (not input order; it changes with the data size and the device). These classes give
  the expected value over random orders of the tied items (``ties="average"``; pass ``ties="first"``,
  ``"optimistic"`` or ``"pessimistic"`` for another rule). NDCG averages ties in both: identical.
- A callable ``aggregation``, fractional labels in binary metrics and negative NDCG labels raise.
- ``RetrievalAUROC``, ``RetrievalPrecisionRecallCurve`` and ``RetrievalRecallAtFixedPrecision`` are not
  provided; importing them from here raises an ``ImportError`` that says so.

Example:
    >>> import torch
    >>> from torchrank.compat import RetrievalNormalizedDCG
    >>> metric = RetrievalNormalizedDCG(top_k=2)
    >>> metric.update(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 2, 1]), indexes=torch.tensor([0, 0, 0]))
    >>> metric.update(torch.tensor([0.4, 0.3]), torch.tensor([1, 0]), indexes=torch.tensor([1, 1]))
    >>> metric.compute()
    tensor(0.7398)
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor

from torchrank.metrics import MAP, MRR, NDCG, HitRate, Precision, Recall, RPrecision

__all__ = [
    "CompatWarning",
    "RetrievalFallOut",
    "RetrievalHitRate",
    "RetrievalMAP",
    "RetrievalMRR",
    "RetrievalNormalizedDCG",
    "RetrievalPrecision",
    "RetrievalRPrecision",
    "RetrievalRecall",
]

NOT_PROVIDED = {
    "RetrievalAUROC": "no drop-in with torchmetrics' top_k and max_fpr yet; torchrank.metrics.AUROC is per-query AUROC "
    "over whole lists",
    "RetrievalPrecisionRecallCurve": "torchrank has no precision-recall curve",
    "RetrievalRecallAtFixedPrecision": "torchrank has no precision-recall curve",
}

_ACTIONS = ("error", "skip", "neg", "pos")
_AGGREGATIONS = ("mean", "median", "min", "max")
_FILL = {"neg": 0.0, "pos": 1.0, "skip": float("nan"), "error": float("nan")}
# torchmetrics' positional constructor arguments (name, default) of most retrieval classes, and of the others
_ARGUMENTS = (("empty_target_action", "neg"), ("ignore_index", None), ("top_k", None), ("aggregation", "mean"))
_PRECISION_ARGUMENTS = (*_ARGUMENTS[:3], ("adaptive_k", False), _ARGUMENTS[3])
_R_PRECISION_ARGUMENTS = (*_ARGUMENTS[:2], _ARGUMENTS[3])  # no top_k
_FALL_OUT_ARGUMENTS = (("empty_target_action", "pos"), *_ARGUMENTS[1:])  # an empty query has no non-relevant item
# what each constructor argument means, for the classes' docstrings (a class may say more in its `_argument_docs`)
_ARGUMENT_DOCS = {
    "empty_target_action": 'Score of a query without relevant item: ``"neg"``, ``"pos"``, ``"skip"``, ``"error"``.',
    "ignore_index": "Items whose label equals it are dropped.",
    "top_k": "Cut-off, or None for the whole list.",
    "adaptive_k": "Divide by ``min(top_k, list length)`` instead of ``top_k``.",
    "aggregation": '``"mean"``, ``"median"``, ``"min"`` or ``"max"`` over queries (not a callable).',
    "ties": 'torchrank\'s tie rule (default ``"average"``, the expectation over orders of tied items).',
    "validate_args": "Run the checks that read values (binary labels, NaN scores).",
    "kwargs": "torchmetrics' ``Metric`` options.",
}


class CompatWarning(UserWarning):
    """A ``torchrank.compat`` class was configured where its value differs from torchmetrics' by definition."""


def __getattr__(name: str) -> Any:
    if name in NOT_PROVIDED:
        raise ImportError(
            f"torchrank.compat does not provide {name} ({NOT_PROVIDED[name]}); keep "
            f"`from torchmetrics.retrieval import {name}`."
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _RetrievalCompat:
    """torchmetrics' constructor, ``update`` and empty-query rules over a :mod:`torchrank.metrics` class.

    The stored items are the flattened input less the ``ignore_index`` items; at ``compute`` the torchrank
    functional ranks them and the torchmetrics-specific parts (score filter, empty queries, denominators)
    are applied to its per-query values.
    """

    # torchmetrics sets the label of an item scored <= 0 to 0 before measuring (AP, RR, precision, recall)
    _zero_nonpositive: ClassVar[bool] = False
    _binary: ClassVar[bool] = True  # torchmetrics checks the labels are binary
    _empty_message: ClassVar[str] = "`compute` method was provided with a query with no positive target."
    # torchmetrics' positional constructor arguments of the class, in its order and with its defaults
    _arguments: ClassVar[tuple[tuple[str, object], ...]] = _ARGUMENTS
    _argument_docs: ClassVar[dict[str, str]] = {}  # the class's own words for an argument, over _ARGUMENT_DOCS
    _in_update: bool = False
    _scored: bool = False  # whether compute found stored items to score

    def __init_subclass__(cls, arguments: tuple[tuple[str, object], ...] | None = None, **kwargs: Any) -> None:
        """Each class's constructor takes its torchmetrics signature (``arguments``: name and default, in order;
        then ``ties``, ``validate_args`` and ``Metric`` kwargs), written once here for all of them."""
        super().__init_subclass__(**kwargs)
        if arguments is not None:
            cls._arguments = arguments
        cls.__init__ = _constructor(cls._arguments)  # type: ignore[method-assign]
        if cls.__doc__:  # None under python -OO
            cls.__doc__ = cls.__doc__.replace("    {arguments}\n", _arguments_section(cls))

    def _setup(self, arguments: dict[str, Any], ties: str, validate_args: bool, kwargs: dict[str, Any]) -> None:
        """torchmetrics' checks of the constructor ``arguments`` (the class's, by name), then the
        :mod:`torchrank.metrics` class's constructor with the ``Metric`` ``kwargs``."""
        empty_target_action, ignore_index = arguments["empty_target_action"], arguments["ignore_index"]
        aggregation = arguments["aggregation"]
        top_k, adaptive_k = arguments.get("top_k"), arguments.get("adaptive_k", False)
        name = type(self).__name__
        if empty_target_action not in _ACTIONS:
            raise ValueError(f"Argument `empty_target_action` received a wrong value `{empty_target_action}`.")
        if ignore_index is not None and not isinstance(ignore_index, int):
            raise ValueError("Argument `ignore_index` must be an integer or None.")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0):
            raise ValueError(f"Argument `top_k` has to be a positive integer or None, but got {top_k!r}.")
        if not isinstance(adaptive_k, bool):
            raise ValueError("`adaptive_k` has to be a boolean")
        if callable(aggregation):
            raise ValueError(
                f"Argument `aggregation` of {name} must be one of {_AGGREGATIONS}; a callable is not supported by "
                "torchrank.compat. Compute the per-query values with the torchrank.functional measure "
                "(`indexes=..., reduction='none'`) and aggregate them yourself, or keep torchmetrics' class."
            )
        if aggregation not in _AGGREGATIONS:
            raise ValueError(
                f"Argument `aggregation` must be one of {_AGGREGATIONS} or a custom callable function, "
                f"but got {aggregation!r}."
            )
        options = set(inspect.signature(type(self)._function).parameters) | {"k", "keep_per_query"}
        for option in kwargs:
            if option in options:
                raise TypeError(
                    f"{name} takes torchmetrics' arguments (and `ties`, `validate_args`), not `{option}`; "
                    f"for torchrank's options use torchrank.metrics.{_torchrank_class(type(self)).__name__}."
                )
        # torchrank scores the queries without relevant item; the filtered measures do it here instead
        inner_action = "neg" if self._zero_nonpositive else empty_target_action.replace("error", "skip")
        # the configuration keeps MetricCollection from merging metrics whose stored items differ
        # (ignore_index) though they were equal after a first update
        identity = {"empty_target_action": empty_target_action, "ignore_index": ignore_index, "top_k": top_k,
                    "adaptive_k": adaptive_k, "aggregation": aggregation, "ties": ties}
        super().__init__(  # type: ignore[call-arg]
            k=top_k, aggregation=aggregation, empty_target_action=inner_action, ties=ties,
            validate_args=validate_args, _identity={"compat": name, **identity}, **kwargs,
        )
        self.empty_target_action = empty_target_action
        self.ignore_index = ignore_index
        self.adaptive_k = adaptive_k
        if "top_k" in dict(self._arguments):  # RPrecision has none, as in torchmetrics
            self.top_k = top_k
        self._check_labels = validate_args
        self._warn_where_values_differ()

    def _warn_where_values_differ(self) -> None:
        """Issue a :class:`CompatWarning` where this configuration's values differ from torchmetrics' by definition."""

    def update(self, preds: Tensor, target: Tensor, indexes: Tensor) -> None:
        """Add a batch of items: ``preds``, ``target`` and the query ``indexes`` of equal shape (flattened)."""
        if indexes is None:
            raise ValueError("Argument `indexes` cannot be None")
        for arg, value in (("preds", preds), ("target", target), ("indexes", indexes)):
            if not isinstance(value, Tensor):
                raise TypeError(f"Argument `{arg}` must be a torch.Tensor, got {type(value).__name__}.")
        if indexes.shape != preds.shape or preds.shape != target.shape:
            raise ValueError("`indexes`, `preds` and `target` must be of the same shape")
        preds, target, indexes = preds.reshape(-1), target.reshape(-1), indexes.reshape(-1)
        if self.ignore_index is not None:
            keep = target != self.ignore_index
            preds, target, indexes = preds[keep], target[keep], indexes[keep]
        if target.numel() == 0:
            raise ValueError("`indexes`, `preds` and `target` must be non-empty and non-scalar tensors")
        if preds.is_floating_point():
            preds = preds.float()  # as torchmetrics: scores equal in float32 are ties
        if self._binary and self._check_labels and target.dtype != torch.bool:
            self._check_binary(target)
        self._in_update = True
        try:
            super().update(preds, target, indexes=indexes)  # type: ignore[misc]
        finally:
            self._in_update = False

    def _check_binary(self, target: Tensor) -> None:
        if bool(((target != 0) & (target != 1)).any()):
            if bool(((target < 0) | (target > 1)).any()):
                raise ValueError("`target` must contain `binary` values")
            raise ValueError(
                f"`target` of {type(self).__name__} must hold binary labels (0 or 1), got a fraction: torchmetrics "
                "would weigh it as a partial hit, torchrank's binary measures do not."
            )

    def _relabel(self, target: Tensor) -> Tensor:
        """The labels the torchrank measure reads (fall-out inverts them)."""
        return target

    def _rescale(self, values: Tensor, sums: Tensor) -> Tensor:
        """torchmetrics' denominator from torchrank's values; ``sums``: relevant, relevant kept, items."""
        return values

    def _values(self, preds: Tensor, target: Tensor, **inputs: Tensor | None) -> Tensor:
        if not self._zero_nonpositive:
            values = super()._values(preds, self._relabel(target), **inputs)  # type: ignore[misc]
            if self._in_update:
                return values
            self._scored = True
        else:
            kept = torch.where(preds > 0, target, torch.zeros_like(target))
            values = super()._values(preds, kept, **inputs)  # type: ignore[misc]
            if self._in_update:  # the batch is valid; its values are not used
                return values
            self._scored = True
            sums = _per_query_sums(inputs["indexes"], target, kept).to(values.dtype)
            values = self._rescale(values, sums)
            empty = sums[:, 0] == 0  # torchmetrics' empty query: no relevant label before the score filter
            values = torch.where(empty, torch.full_like(values, _FILL[self.empty_target_action]), values)
        if self.empty_target_action == "error" and bool(torch.isnan(values).any()):
            raise ValueError(self._empty_message)
        return values

    def compute(self) -> Tensor:
        """The aggregation over every query seen; 0 when every query was skipped, as in torchmetrics."""
        self._scored = False
        value = super().compute()  # type: ignore[misc]
        if not self._scored:  # torchmetrics raises too
            raise ValueError(f"{type(self).__name__}.compute() was called before any update: no query to score.")
        return torch.where(torch.isnan(value), torch.zeros_like(value), value)


def _torchrank_class(cls: type) -> type:
    """The :mod:`torchrank.metrics` class a compat class computes with."""
    return next(base for base in cls.__mro__ if base.__module__ == "torchrank.metrics.classes")


def _constructor(arguments: tuple[tuple[str, object], ...]) -> Callable[..., None]:
    """An ``__init__`` with torchmetrics' signature ``(self, <arguments>, *, ties, validate_args, **kwargs)`` (what
    ``inspect.signature`` and ``help`` show) that hands the bound arguments to :meth:`_RetrievalCompat._setup`."""
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d) for n, d in arguments]
    parameters += [
        inspect.Parameter("ties", inspect.Parameter.KEYWORD_ONLY, default="average"),
        inspect.Parameter("validate_args", inspect.Parameter.KEYWORD_ONLY, default=True),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
    ]
    signature = inspect.Signature(parameters)

    def __init__(self: _RetrievalCompat, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        del given["self"]
        # an argument the class does not take (RPrecision's top_k) stays in kwargs, which Metric refuses
        self._setup(given, given.pop("ties"), given.pop("validate_args"), given.pop("kwargs"))

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    return __init__


def _arguments_section(cls: type[_RetrievalCompat]) -> str:
    """The ``Args:`` section of a compat class's docstring, in its constructor's order."""
    docs = {**_ARGUMENT_DOCS, **cls._argument_docs}
    names = [*(name for name, _ in cls._arguments), "ties", "validate_args", "kwargs"]
    return "    Args:\n" + "".join(f"        {name}: {docs[name]}\n" for name in names)


def _per_query_sums(indexes: Tensor, target: Tensor, kept: Tensor) -> Tensor:
    """Per query, in ascending id order as torchrank's rows: relevant items, relevant kept, items ``[Q, 3]``."""
    ids, inverse = torch.unique(indexes, sorted=True, return_inverse=True)
    columns = torch.stack([target.double(), kept.double(), torch.ones_like(target, dtype=torch.float64)], 1)
    return columns.new_zeros(ids.numel(), 3).index_add_(0, inverse, columns)


class RetrievalNormalizedDCG(_RetrievalCompat, NDCG):
    """``torchmetrics.retrieval.RetrievalNormalizedDCG`` computed by :class:`torchrank.metrics.NDCG`.

    Same values as torchmetrics, ties included: both average the gain over tied scores (scikit-learn's rule),
    with linear gain and a ``log2(i + 1)`` discount. Graded labels ``>= 0`` (negative labels raise; torchmetrics
    accepts them).

    {arguments}

    Example:
        >>> import torch
        >>> metric = RetrievalNormalizedDCG()
        >>> metric.update(torch.tensor([0.9, 0.9, 0.1]), torch.tensor([0, 2, 1]), indexes=torch.tensor([0, 0, 0]))
        >>> metric.compute()  # the tied pair averaged, as torchmetrics does
        tensor(0.8100)
    """

    _binary = False
    _argument_docs: ClassVar[dict[str, str]] = {
        "empty_target_action": 'Score of a query whose labels are all 0: ``"neg"`` (0), ``"pos"`` (1), ``"skip"``\n'
        '            (left out; 0 if every query is) or ``"error"`` (raised at ``compute``).',
        "ties": 'torchrank\'s tie rule; ``"average"`` is torchmetrics\'.',
        "validate_args": "Run the checks that read values (NaN scores, negative labels).",
    }



class RetrievalMAP(_RetrievalCompat, MAP):
    """``torchmetrics.retrieval.RetrievalMAP`` computed by :class:`torchrank.metrics.MAP`.

    Without ``top_k`` the values are torchmetrics' (distinct scores). Items scored ``<= 0`` count as not
    relevant, as in torchmetrics; a query whose relevant items are all scored ``<= 0`` scores 0, not
    ``empty_target_action``'s value.

    **With ``top_k`` the value differs from torchmetrics'.** AP@k here is the sum of P@i over the relevant
    ranks i <= k divided by **all** relevant items R of the query (trec_eval ``map_cut_k``, ranx ``map@k``);
    torchmetrics divides by the relevant items found in the top k. A :class:`CompatWarning` is issued at
    construction. Labels ``[1, 0, 0, 1, 0, 1]`` in rank order with ``top_k=3`` give 1/3 here and 1.0 in
    torchmetrics.

    {arguments}

    Example:
        >>> import torch, warnings
        >>> preds, target = torch.tensor([0.6, 0.5, 0.4, 0.3, 0.2, 0.1]), torch.tensor([1, 0, 0, 1, 0, 1])
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", CompatWarning)
        ...     metric = RetrievalMAP(top_k=3)
        >>> metric.update(preds, target, indexes=torch.zeros(6, dtype=torch.long))
        >>> metric.compute()  # (1/1) / 3 relevant; torchmetrics: (1/1) / 1 found = 1.0
        tensor(0.3333)
    """

    _zero_nonpositive = True
    _argument_docs: ClassVar[dict[str, str]] = {"top_k": "Cut-off (see above), or None for the whole list."}

    def _warn_where_values_differ(self) -> None:
        if self.top_k is not None:
            warnings.warn(
                f"RetrievalMAP(top_k={self.top_k}) from torchrank.compat divides AP@k by all relevant items of the "
                "query (trec_eval map_cut); torchmetrics divides by the relevant items found in the top k, so values "
                "differ where a relevant item ranks below k. See docs/migrating_from_torchmetrics.md.",
                CompatWarning,
                stacklevel=4,  # the caller of RetrievalMAP(...), past __init__ and _setup
            )


class RetrievalMRR(_RetrievalCompat, MRR):
    """``torchmetrics.retrieval.RetrievalMRR`` computed by :class:`torchrank.metrics.MRR`.

    Same values as torchmetrics for distinct scores, ``top_k`` included. Items scored ``<= 0`` count as not
    relevant, as in torchmetrics. Tied scores: the expectation over their orders (``ties="average"``),
    where torchmetrics takes its sort's order.

    {arguments}

    Example:
        >>> import torch
        >>> metric = RetrievalMRR()
        >>> metric.update(torch.tensor([0.9, 0.8, -0.1]), torch.tensor([0, 1, 1]), indexes=torch.tensor([0, 0, 0]))
        >>> metric.update(torch.tensor([-0.2, -0.3]), torch.tensor([1, 0]), indexes=torch.tensor([1, 1]))
        >>> metric.compute()  # query 1's relevant item is scored <= 0: 0, as in torchmetrics
        tensor(0.2500)
    """

    _zero_nonpositive = True

class RetrievalPrecision(_RetrievalCompat, Precision, arguments=_PRECISION_ARGUMENTS):
    """``torchmetrics.retrieval.RetrievalPrecision`` computed by :class:`torchrank.metrics.Precision`.

    Same values as torchmetrics for distinct scores: P@k divides by k also when the list is shorter, or with
    ``adaptive_k=True`` by ``min(k, list length)``; without ``top_k`` by the list length. Items scored
    ``<= 0`` count as not relevant, as in torchmetrics.

    {arguments}

    Example:
        >>> import torch
        >>> preds, target, indexes = torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0])
        >>> metric = RetrievalPrecision(top_k=5, adaptive_k=True)
        >>> metric.update(preds, target, indexes=indexes)
        >>> metric.compute()  # 2 hits / min(5, 3)
        tensor(0.6667)
    """

    _zero_nonpositive = True


    def _rescale(self, values: Tensor, sums: Tensor) -> Tensor:
        if self.adaptive_k and self.top_k is not None:  # hits / k  ->  hits / min(k, n)
            return values * self.top_k / sums[:, 2].clamp_max(self.top_k)
        return values


class RetrievalRecall(_RetrievalCompat, Recall):
    """``torchmetrics.retrieval.RetrievalRecall`` computed by :class:`torchrank.metrics.Recall`.

    Same values as torchmetrics for distinct scores: the relevant items scored ``> 0`` in the top k, divided
    by all relevant items of the query (those scored ``<= 0`` included), as torchmetrics does.

    {arguments}

    Example:
        >>> import torch
        >>> metric = RetrievalRecall(top_k=2)
        >>> metric.update(torch.tensor([0.9, 0.8, 0.7, -0.5]), torch.tensor([1, 0, 1, 1]), torch.tensor([0, 0, 0, 0]))
        >>> metric.compute()  # 1 of 3 relevant in the top 2
        tensor(0.3333)
    """

    _zero_nonpositive = True


    def _rescale(self, values: Tensor, sums: Tensor) -> Tensor:
        # torchrank divided the kept hits by the kept relevant items; torchmetrics by all relevant items
        return values * sums[:, 1] / sums[:, 0].clamp_min(1)


class RetrievalHitRate(_RetrievalCompat, HitRate):
    """``torchmetrics.retrieval.RetrievalHitRate`` computed by :class:`torchrank.metrics.HitRate`.

    Same values as torchmetrics for distinct scores (no score filter here, as in torchmetrics). Tied scores:
    the probability of a hit over random orders of the tied items (``ties="average"``).

    {arguments}

    Example:
        >>> import torch
        >>> metric = RetrievalHitRate(top_k=1)
        >>> metric.update(torch.tensor([0.9, 0.8, 0.2, 0.1]), torch.tensor([0, 1, 1, 0]), torch.tensor([0, 0, 1, 1]))
        >>> metric.compute()
        tensor(0.5000)
    """



class RetrievalRPrecision(_RetrievalCompat, RPrecision, arguments=_R_PRECISION_ARGUMENTS):
    """``torchmetrics.retrieval.RetrievalRPrecision`` computed by :class:`torchrank.metrics.RPrecision`.

    Same values as torchmetrics for distinct scores: precision at R, the number of relevant items of the query.
    Takes no ``top_k``, as in torchmetrics.

    {arguments}

    Example:
        >>> import torch
        >>> metric = RetrievalRPrecision()
        >>> metric.update(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0]), torch.tensor([0, 0, 0, 0]))
        >>> metric.compute()
        tensor(0.5000)
    """



class RetrievalFallOut(_RetrievalCompat, Recall, arguments=_FALL_OUT_ARGUMENTS):
    """``torchmetrics.retrieval.RetrievalFallOut`` computed by :class:`torchrank.metrics.Recall` on inverted labels.

    Fall-out@k is the non-relevant items in the top k over all non-relevant items of the query: the recall of
    the non-relevant items. Same values as torchmetrics for distinct scores; lower is better. A query is
    "empty" when it has **no non-relevant** item, and ``empty_target_action`` defaults to ``"pos"``, as in
    torchmetrics.

    {arguments}

    Example:
        >>> import torch
        >>> metric = RetrievalFallOut(top_k=2)
        >>> metric.update(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0]), torch.tensor([0, 0, 0, 0]))
        >>> metric.compute()  # 1 of the 2 non-relevant items in the top 2
        tensor(0.5000)
    """

    higher_is_better = False
    _empty_message = "`compute` method was provided with a query with no negative target."
    _argument_docs: ClassVar[dict[str, str]] = {
        "empty_target_action": 'Score of a query without non-relevant item: ``"pos"`` (1, default), ``"neg"``,\n'
        '            ``"skip"``, ``"error"``.',
    }


    def _relabel(self, target: Tensor) -> Tensor:
        return target == 0
