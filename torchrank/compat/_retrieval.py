"""The ``torchmetrics.retrieval`` drop-ins over :mod:`torchrank.metrics` classes (see :mod:`torchrank.compat`).

:class:`_RetrievalCompat` holds what they share: torchmetrics' constructor and checks, its flat ``update`` and its
rules (score filter, empty queries, aggregation); each class then names the torchrank class and kernel options that
compute it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor

import torchrank.functional as F
from torchrank.functional.checks import is_integer_tensor
from torchrank.metrics import AUROC, MAP, MRR, NDCG, HitRate, Precision, Recall, RPrecision

_ACTIONS = ("error", "skip", "neg", "pos")
_AGGREGATIONS = ("mean", "median", "min", "max")
_FILL = {"neg": 0.0, "pos": 1.0, "skip": float("nan"), "error": float("nan")}
# torchmetrics' positional constructor arguments (name, default) of most retrieval classes, and of the others
_ARGUMENTS = (("empty_target_action", "neg"), ("ignore_index", None), ("top_k", None), ("aggregation", "mean"))
_PRECISION_ARGUMENTS = (*_ARGUMENTS[:3], ("adaptive_k", False), _ARGUMENTS[3])
_R_PRECISION_ARGUMENTS = (*_ARGUMENTS[:2], _ARGUMENTS[3])  # no top_k
_FALL_OUT_ARGUMENTS = (("empty_target_action", "pos"), *_ARGUMENTS[1:])  # an empty query has no non-relevant item
_AUROC_ARGUMENTS = (*_ARGUMENTS[:3], ("max_fpr", None), _ARGUMENTS[3])
# what each constructor argument means, for the classes' docstrings (a class may say more in its `_argument_docs`)
_ARGUMENT_DOCS = {
    "empty_target_action": 'Score of a query without relevant item: ``"neg"``, ``"pos"``, ``"skip"``, ``"error"``.',
    "ignore_index": "Items whose label equals it are dropped.",
    "top_k": "Cut-off, or None for the whole list.",
    "adaptive_k": "Divide by ``min(top_k, list length)`` instead of ``top_k``.",
    "aggregation": '``"mean"``, ``"median"``, ``"min"``, ``"max"`` over queries, or a callable\n'
    "            ``f(values, dim=None)`` of the values of the queries not skipped, as in torchmetrics.",
    "ties": 'torchrank\'s tie rule (default ``"average"``, the expectation over orders of tied items).',
    "validate_args": "Run the checks that read values (binary labels, NaN scores).",
    "kwargs": "torchmetrics' ``Metric`` options.",
}


def flat_input(preds: Any, target: Any, indexes: Any, ignore_index: int | None) -> tuple[Tensor, Tensor, Tensor]:
    """torchmetrics' checks of a flat batch, in its order and with its exception types, then the batch flattened,
    less the ``ignore_index`` items, scores in float32 (scores equal in float32 tie, as in torchmetrics)."""
    if indexes is None:
        raise ValueError("Argument `indexes` cannot be None")
    for arg, value in (("preds", preds), ("target", target), ("indexes", indexes)):
        if not isinstance(value, Tensor):
            raise TypeError(f"Argument `{arg}` must be a torch.Tensor, got {type(value).__name__}.")
    if indexes.shape != preds.shape or preds.shape != target.shape:
        raise ValueError("`indexes`, `preds` and `target` must be of the same shape")
    if not is_integer_tensor(indexes):
        raise ValueError("`indexes` must be a tensor of long integers")  # other integer dtypes are accepted
    preds, target, indexes = preds.reshape(-1), target.reshape(-1), indexes.reshape(-1)
    if ignore_index is not None:
        keep = target != ignore_index
        preds, target, indexes = preds[keep], target[keep], indexes[keep]
    if target.numel() == 0:
        raise ValueError("`indexes`, `preds` and `target` must be non-empty and non-scalar tensors")
    if preds.dtype == torch.bool or preds.is_complex():
        raise ValueError("`preds` must be a tensor of floats")  # integer scores are accepted
    return (preds.float() if preds.is_floating_point() else preds), target, indexes


def check_binary(name: str, target: Tensor) -> None:
    """torchmetrics' check that labels lie in [0, 1], and compat's own: no fraction (binary measures read
    ``label >= 1``)."""
    if target.dtype == torch.bool or not bool(((target != 0) & (target != 1)).any()):
        return
    if bool(((target < 0) | (target > 1)).any()):
        raise ValueError("`target` must contain `binary` values")
    raise ValueError(
        f"`target` of {name} must hold binary labels (0 or 1), got a fraction: torchmetrics would weigh it as a "
        "partial hit, torchrank's binary measures do not."
    )


def check_arguments(arguments: dict[str, Any]) -> None:
    """torchmetrics' checks of the constructor arguments a class takes (by name), with its messages."""
    empty_target_action, ignore_index = arguments["empty_target_action"], arguments["ignore_index"]
    if empty_target_action not in _ACTIONS:
        raise ValueError(f"Argument `empty_target_action` received a wrong value `{empty_target_action}`.")
    if ignore_index is not None and not isinstance(ignore_index, int):
        raise ValueError("Argument `ignore_index` must be an integer or None.")
    for cutoff in ("top_k", "max_k"):
        k = arguments.get(cutoff)
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
            raise ValueError(f"Argument `{cutoff}` has to be a positive integer or None, but got {k!r}.")
    if not isinstance(arguments.get("adaptive_k", False), bool):
        raise ValueError("`adaptive_k` has to be a boolean")
    aggregation = arguments.get("aggregation", "mean")
    if not (callable(aggregation) or aggregation in _AGGREGATIONS):
        raise ValueError(
            f"Argument `aggregation` must be one of {_AGGREGATIONS} or a custom callable function, "
            f"but got {aggregation!r}."
        )


class _RetrievalCompat:
    """torchmetrics' constructor, ``update`` and empty-query rules over a :mod:`torchrank.metrics` class.

    The stored items are the flattened input less the ``ignore_index`` items, labels filtered by score where
    torchmetrics filters them, with the unfiltered labels as ``ideal_target`` (R and the empty-query test); at
    ``compute`` the torchrank functional ranks them with the options of torchmetrics' definition
    (:meth:`_kernel_options`). Only the rules about whole queries stay here: ``"error"`` raised once every update
    has arrived, a callable aggregation, AUROC's undefined queries (:meth:`_fill_undefined`).
    """

    # torchmetrics sets the label of an item scored <= 0 to 0 before measuring (AP, RR, precision, recall)
    _zero_nonpositive: ClassVar[bool] = False
    _binary: ClassVar[bool] = True  # torchmetrics checks the labels are binary
    _empty_message: ClassVar[str] = "`compute` method was provided with a query with no positive target."
    # torchmetrics' positional constructor arguments of the class, in its order and with its defaults
    _arguments: ClassVar[tuple[tuple[str, object], ...]] = _ARGUMENTS
    _argument_docs: ClassVar[dict[str, str]] = {}  # the class's own words for an argument, over _ARGUMENT_DOCS
    _fills_undefined: ClassVar[bool] = False  # whether the class scores undefined queries itself (AUROC)
    _torchmetrics_words: ClassVar[bool] = True  # torchmetrics' warnings and argument errors, word for word
    _in_update: bool = False
    _scored: bool = False  # whether compute found stored items to score
    _per_query: Tensor | None = None  # the last compute's per-query values

    def __init_subclass__(cls, arguments: tuple[tuple[str, object], ...] | None = None, **kwargs: Any) -> None:
        """Each class's constructor takes its torchmetrics signature (``arguments``: name and default, in order;
        then ``ties`` where the measure takes it, ``validate_args`` and ``Metric`` kwargs), written once here for all
        of them."""
        super().__init_subclass__(**kwargs)
        if arguments is not None:
            cls._arguments = arguments
        cls.__init__ = _constructor(cls._arguments, _takes_ties(cls))  # type: ignore[method-assign]
        if cls.__doc__:  # None under python -OO
            cls.__doc__ = cls.__doc__.replace("    {arguments}\n", _arguments_section(cls))

    def _setup(self, arguments: dict[str, Any], ties: str | None, validate_args: bool, kwargs: dict[str, Any]) -> None:
        """torchmetrics' checks of the constructor ``arguments`` (the class's, by name), then the
        :mod:`torchrank.metrics` class's constructor with the kernel options and the ``Metric`` ``kwargs``."""
        name = type(self).__name__
        check_arguments(arguments)
        empty_target_action, ignore_index = arguments["empty_target_action"], arguments["ignore_index"]
        aggregation = arguments["aggregation"]
        top_k, adaptive_k = arguments.get("top_k"), arguments.get("adaptive_k", False)
        options = set(inspect.signature(type(self)._function).parameters) | {"k", "keep_per_query"}
        for option in kwargs:
            if option in options:
                raise TypeError(
                    f"{name} takes torchmetrics' arguments (and `ties`, `validate_args`), not `{option}`; "
                    f"for torchrank's options use torchrank.metrics.{_torchrank_class(type(self)).__name__}."
                )
        # "error" raises at compute, once every update has arrived: the kernel leaves such queries out meanwhile
        inner_action = "skip" if self._fills_undefined else empty_target_action.replace("error", "skip")
        # the configuration keeps MetricCollection from merging metrics whose stored items differ
        # (ignore_index) though they were equal after a first update
        identity = {"empty_target_action": empty_target_action, "ignore_index": ignore_index, "top_k": top_k,
                    "adaptive_k": adaptive_k, "aggregation": aggregation, "ties": ties}
        self._custom_aggregation = aggregation if callable(aggregation) else None
        super().__init__(  # type: ignore[call-arg]
            k=top_k, aggregation="mean" if callable(aggregation) else aggregation,
            empty_target_action=inner_action, validate_args=validate_args, _identity={"compat": name, **identity},
            **({} if ties is None else {"ties": ties}), **self._kernel_options(arguments), **kwargs,
        )
        self.empty_target_action = empty_target_action
        self.ignore_index = ignore_index
        self.adaptive_k = adaptive_k
        if callable(aggregation):
            self.aggregation = aggregation
        if "top_k" in dict(self._arguments):  # RPrecision has none, as in torchmetrics
            self.top_k = top_k
        self._check_labels = validate_args

    def _kernel_options(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Options of the torchrank measure that give torchmetrics' definition (AP's denominator, ...)."""
        return {}

    def update(self, preds: Tensor, target: Tensor, indexes: Tensor) -> None:
        """Add a batch of items: ``preds``, ``target`` and the query ``indexes`` of equal shape (flattened)."""
        preds, target, indexes = flat_input(preds, target, indexes, self.ignore_index)
        if self._binary and self._check_labels:
            check_binary(type(self).__name__, target)
        self._in_update = True
        try:
            if self._zero_nonpositive:  # the ranked labels filtered; the query's own (R, the empty rule) are not
                kept = torch.where(preds > 0, target, torch.zeros_like(target))
                super().update(preds, kept, indexes=indexes, ideal_target=target)  # type: ignore[misc]
            else:
                super().update(preds, target, indexes=indexes)  # type: ignore[misc]
        finally:
            self._in_update = False

    def _relabel(self, target: Tensor) -> Tensor:
        """The labels the torchrank measure reads (fall-out inverts them)."""
        return target

    def _fill_undefined(self, values: Tensor, preds: Tensor, target: Tensor, inputs: dict[str, Any]) -> Tensor:
        """Values for the queries the measure leaves undefined (NaN) that torchmetrics does not call empty."""
        return values

    def _values(self, preds: Tensor, target: Tensor, **inputs: Tensor | None) -> Tensor:
        values = super()._values(preds, self._relabel(target), **inputs)  # type: ignore[misc]
        if self._in_update:  # the batch is valid; its values are not used
            return values
        self._scored = True
        values = self._fill_undefined(values, preds, target, inputs)
        if self.empty_target_action == "error" and bool(torch.isnan(values).any()):
            raise ValueError(self._empty_message)
        if self.empty_target_action in ("neg", "pos"):
            values = torch.where(torch.isnan(values), _FILL[self.empty_target_action], values)
        self._per_query = values
        return values

    def compute(self) -> Tensor:
        """The aggregation over every query seen; 0 when every query was skipped, as in torchmetrics."""
        self._scored = False
        value = super().compute()  # type: ignore[misc]
        if not self._scored:  # torchmetrics raises too
            raise ValueError(f"{type(self).__name__}.compute() was called before any update: no query to score.")
        if self._custom_aggregation is not None:  # over the values of the queries not skipped, as torchmetrics
            values = self._per_query.reshape(-1)
            values = values[~torch.isnan(values)].to(value.dtype)
            value = self._custom_aggregation(values, dim=None) if values.numel() else value.new_zeros(())
        return torch.where(torch.isnan(value), torch.zeros_like(value), value)


def _torchrank_class(cls: type) -> type:
    """The :mod:`torchrank.metrics` class a compat class computes with."""
    return next(base for base in cls.__mro__ if base.__module__.startswith("torchrank.metrics."))


def _takes_ties(cls: type) -> bool:
    """Whether the measure of a compat class takes ``ties`` (AUROC is exact under ties: it takes none)."""
    return "ties" in inspect.signature(cls._function).parameters


def _constructor(arguments: tuple[tuple[str, object], ...], ties: bool) -> Callable[..., None]:
    """An ``__init__`` with torchmetrics' signature ``(self, <arguments>, *, ties, validate_args, **kwargs)`` (what
    ``inspect.signature`` and ``help`` show) that hands the bound arguments to :meth:`_RetrievalCompat._setup`."""
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d) for n, d in arguments]
    if ties:
        parameters.append(inspect.Parameter("ties", inspect.Parameter.KEYWORD_ONLY, default="average"))
    parameters += [
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
        self._setup(given, given.pop("ties", None), given.pop("validate_args"), given.pop("kwargs"))

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    return __init__


def _arguments_section(cls: type[_RetrievalCompat]) -> str:
    """The ``Args:`` section of a compat class's docstring, in its constructor's order."""
    docs = {**_ARGUMENT_DOCS, **cls._argument_docs}
    names = [*(name for name, _ in cls._arguments), *["ties"] * _takes_ties(cls), "validate_args", "kwargs"]
    return "    Args:\n" + "".join(f"        {name}: {docs[name]}\n" for name in names)


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

    Same values as torchmetrics for distinct scores, ``top_k`` included: AP@k is the sum of P@i over the relevant
    ranks i <= k divided by the relevant items **found in the top k** (the measure's ``denominator="found"``; 0
    where none is). Items scored ``<= 0`` count as not relevant, as in torchmetrics; a query whose relevant items
    are all scored ``<= 0`` scores 0, not ``empty_target_action``'s value. trec_eval's ``map_cut_k`` (divided by
    all R relevant items) is :class:`torchrank.metrics.MAP` ``(k=k)``. Tied scores: the exact expectation over
    their orders (``ties="average"``), a tie group across the cut-off included.

    {arguments}

    Example:
        >>> import torch
        >>> preds, target = torch.tensor([0.6, 0.5, 0.4, 0.3, 0.2, 0.1]), torch.tensor([1, 0, 0, 1, 0, 1])
        >>> metric = RetrievalMAP(top_k=3)
        >>> metric.update(preds, target, indexes=torch.zeros(6, dtype=torch.long))
        >>> metric.compute()  # (1/1) / 1 found in the top 3; trec_eval's map_cut_3: (1/1) / 3 relevant
        tensor(1.)
    """

    _zero_nonpositive = True

    def _kernel_options(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"denominator": "found"}


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

    def _kernel_options(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"adaptive_k": True} if arguments["adaptive_k"] else {}


class RetrievalRecall(_RetrievalCompat, Recall):
    """``torchmetrics.retrieval.RetrievalRecall`` computed by :class:`torchrank.metrics.Recall`.

    Same values as torchmetrics for distinct scores: the relevant items scored ``> 0`` in the top k, divided
    by all relevant items of the query (those scored ``<= 0`` included: the query's labels are its
    ``ideal_target``), as torchmetrics does.

    {arguments}

    Example:
        >>> import torch
        >>> metric = RetrievalRecall(top_k=2)
        >>> metric.update(torch.tensor([0.9, 0.8, 0.7, -0.5]), torch.tensor([1, 0, 1, 1]), torch.tensor([0, 0, 0, 0]))
        >>> metric.compute()  # 1 of 3 relevant in the top 2
        tensor(0.3333)
    """

    _zero_nonpositive = True


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


class RetrievalAUROC(_RetrievalCompat, AUROC, arguments=_AUROC_ARGUMENTS):
    """``torchmetrics.retrieval.RetrievalAUROC`` computed by :class:`torchrank.metrics.AUROC`.

    Per query, the AUROC of its top ``top_k`` items (all without it), or with ``max_fpr`` the standardised partial
    AUC up to that false positive rate (:func:`torchrank.functional.auroc`'s ``k`` and ``max_fpr``); a query with
    relevant items whose top k lack relevant or non-relevant ones scores 0, as in torchmetrics, and a query with
    no relevant item is scored by ``empty_target_action``. Tied scores are exact within the items scored, as in
    torchmetrics (Mann-Whitney, tie groups as straight ROC segments); where a tie group spans the ``top_k``-th
    position, the items first in input order are kept (torchmetrics keeps whichever ``torch.topk`` returns).
    No score filter, as in torchmetrics.

    {arguments}

    Example:
        >>> import torch
        >>> metric = RetrievalAUROC(top_k=3)
        >>> preds, target = torch.tensor([0.9, 0.8, 0.7, 0.1, 0.4, 0.2]), torch.tensor([1, 0, 1, 0, 1, 0])
        >>> metric.update(preds, target, indexes=torch.tensor([0, 0, 0, 0, 1, 1]))
        >>> metric.compute()  # query 0: 1 of 2 pairs in its top 3; query 1: 1
        tensor(0.7500)
    """

    _fills_undefined = True
    _argument_docs: ClassVar[dict[str, str]] = {
        "top_k": "Only each query's top k items (None: all).",
        "max_fpr": "Standardised partial AUC over false positive rates ``[0, max_fpr]``, ``0 < max_fpr <= 1``.",
    }

    def _kernel_options(self, arguments: dict[str, Any]) -> dict[str, Any]:
        max_fpr = arguments["max_fpr"]
        if max_fpr is not None and (not isinstance(max_fpr, float) or not 0 < max_fpr <= 1):
            raise ValueError(f"Arguments `max_fpr` should be a float in range (0, 1], but got: {max_fpr}")
        self.max_fpr = max_fpr
        return {} if max_fpr is None else {"max_fpr": max_fpr}

    def _fill_undefined(self, values: Tensor, preds: Tensor, target: Tensor, inputs: dict[str, Any]) -> Tensor:
        # NaN: no relevant or no non-relevant item in the top k; only a query without relevant item is empty
        has_relevant = F.hit_rate(preds, target, indexes=inputs["indexes"], reduction="none", validate_args=False)
        return torch.where(torch.isnan(values) & (has_relevant.reshape(values.shape) > 0), 0.0, values)
