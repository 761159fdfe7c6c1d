"""The keyword arguments the ranking functions share, declared once: a function takes them as ``**options:
Unpack[RankingOptions]`` (PEP 692, seen by type checkers) under :func:`with_common_args`, which gives it the same
at run time (signature, defaults, docs, errors; for a keyword it does not take, such as torchmetrics' ``top_k``,
what to write instead: docs/measures.md)."""

from __future__ import annotations

import difflib
import functools
import inspect
import sys
import typing
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Literal, TypedDict, TypeVar

from torch import Tensor

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # typing_extensions comes with torch
    from typing_extensions import Unpack

__all__ = [
    "COMMON_ARGS", "DEFAULTS", "Cutoffs", "EmptyTargetAction", "ListOptions", "MeasureOptions", "RankingOptions",
    "Reduction", "Ties", "Unpack", "with_common_args",
]

Cutoffs = int | Sequence[int] | None
Ties = Literal["average", "optimistic", "pessimistic", "first"]
EmptyTargetAction = Literal["neg", "pos", "skip", "error"]
Reduction = Literal["mean", "sum", "none"]
Fn = TypeVar("Fn", bound=Callable[..., object])

_CUTOFF_IN_NAMES = ("measures", "the cut-off in each measure's name, e.g. `['ndcg@10', 'P@5']`")
#: torchmetrics' retrieval arguments that torchrank spells differently: name -> (torchrank's name, what to write),
#: the first that the function takes.
TORCHMETRICS_RENAMED: dict[str, tuple[tuple[str, str], ...]] = {
    "top_k": (
        ("k", "`k=` (an int, a list of ints for several cut-offs, or None for the whole list)"),
        ("max_k", "`max_k=`"),
        _CUTOFF_IN_NAMES,
    ),
    "max_k": (("max_k", "`max_k=`"), ("k", "`k=` (a list of ints for several cut-offs)"), _CUTOFF_IN_NAMES),
    "ignore_index": (
        ("mask", "`mask=target != ignore_index` where the labels are given (True for the items to rank; the others "
         "never count)"),
    ),
    "aggregation": (("reduction", "`reduction=` ('mean', 'sum' or 'none'; the metric classes take `aggregation`)"),),
}
#: torchmetrics' retrieval arguments that only some torchrank functions take (where torchmetrics has them too).
TORCHMETRICS_OPTIONS = ("adaptive_k", "max_fpr", "min_precision")
#: Every torchmetrics retrieval argument that a torchrank function or class may not take under that name.
TORCHMETRICS_NAMES = frozenset(TORCHMETRICS_RENAMED) | frozenset(TORCHMETRICS_OPTIONS)


def keyword_error(owner: str, unknown: Iterable[str], accepted: Collection[str]) -> TypeError:
    """The ``TypeError`` for keywords ``unknown`` that ``owner`` (which takes ``accepted``) does not take: each with
    torchrank's name for it, or the closest names ``owner`` takes.

    Example:
        >>> print(keyword_error("ndcg", ["top_k"], ["preds", "target", "k", "mask"]))  # doctest: +ELLIPSIS
        ndcg got an unexpected keyword argument `top_k`: for torchmetrics' `top_k`, use `k=` (an int, a list of ints ...
        >>> print(keyword_error("ndcg", ["gian"], ["preds", "target", "k", "gain"]))
        ndcg got an unexpected keyword argument `gian`: did you mean `gain`?
    """
    return TypeError("; ".join(_hint(owner, name, accepted) for name in sorted(unknown)))


def _hint(owner: str, name: str, accepted: Collection[str]) -> str:
    said = f"{owner} got an unexpected keyword argument `{name}`"
    renamed = TORCHMETRICS_RENAMED.get(name, ())
    for ours, write in renamed:
        if ours in accepted:
            return f"{said}: for torchmetrics' `{name}`, use {write}."
    if name in TORCHMETRICS_NAMES:
        return (f"{said}: torchmetrics' `{name}` has no counterpart in {owner}; torchrank.compat's classes take "
                "torchmetrics' arguments and compute its definitions.")
    close = difflib.get_close_matches(name, list(accepted), n=3, cutoff=0.6)
    return f"{said}: did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else f"{said}."


def with_keyword_hints(fn: Fn) -> Fn:
    """``fn`` raising :func:`keyword_error`'s ``TypeError`` for a keyword it does not take (checked only once a call
    fails); a function that takes ``**kwargs`` as it is."""
    parameters = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return fn
    accepted = frozenset(parameters)

    @functools.wraps(fn)
    def call(*args: object, **kwargs: object) -> object:
        try:
            return fn(*args, **kwargs)
        except TypeError:
            unknown = kwargs.keys() - accepted
            if unknown:  # Python refused the call before running it
                raise keyword_error(fn.__name__, unknown, accepted) from None
            raise

    return call  # type: ignore[return-value]


class MeasureOptions(TypedDict, total=False):
    """The options of every measure but ``ties`` (bpref's and infAP's default differs) and the cut-off."""

    indexes: Tensor | None
    mask: Tensor | None
    ideal_target: Tensor | None
    empty_target_action: EmptyTargetAction
    reduction: Reduction
    relevance_threshold: float
    validate_args: bool


class ListOptions(MeasureOptions, total=False):
    """:class:`MeasureOptions` and ``ties``: a measure of whole lists (R-precision; no cut-off)."""

    ties: Ties


class RankingOptions(ListOptions, total=False):
    """:class:`ListOptions` and the cut-off ``k``: most measures."""

    k: Cutoffs


#: The shared arguments' defaults, in the order their docs list them.
DEFAULTS: dict[str, object] = {
    "k": None, "indexes": None, "mask": None, "ideal_target": None, "ties": "average", "empty_target_action": "neg",
    "reduction": "mean", "relevance_threshold": 1, "validate_args": True,
}

#: The docs of the shared arguments (and of DCG's and NDCG's gain and discount), in the order the docs list them.
COMMON_ARGS = {
    "preds": "Scores ``[..., N]`` (higher ranks first), or 1-D with ``indexes``. Never thresholded.",
    "target": "Labels of the same shape: bool, int or float, ``>= 0``; binary or graded.",
    "k": "Cut-off: an int, a sequence of ints (one sort; the output gains a last dimension of that\n"
    "    length) or ``None`` for the whole list.",
    "gain": "``\"linear\"`` (the label; trec_eval, scikit-learn, torchmetrics), ``\"exponential\"``\n"
    "    (``2^label - 1``; ranx ``ndcg_burges``, LightGBM) or a callable on the label tensor.",
    "discount": "``\"log\"`` (``log_b(i + 1)``), ``\"power\"`` (``i ** power``; Zipf for 1), ``\"linear\"``\n"
    "    (``i``) or a callable of the 1-based rank returning the divisor.",
    "log_base": "``b`` of the ``\"log\"`` discount.",
    "power": "Exponent of the ``\"power\"`` discount.",
    "indexes": "Flat input: the query id of each item (1-D, like ``preds``); queries come out in\n"
    "    ascending id order.",
    "mask": "Bool ``[..., N]``, True for a real item; padded items are never ranked and never count.",
    "ideal_target": "Labels ``[..., M]`` of every judged item of each query (0-padded) for the number of\n"
    "    relevant items and the ideal ranking, when the list does not hold them all; with ``indexes``, one\n"
    "    label per item, shaped as ``preds``. Default: ``target``.",
    "ties": "Order of equal scores: ``\"average\"`` (expected value over random orders), ``\"optimistic\"``,\n"
    "    ``\"pessimistic\"`` or ``\"first\"`` (input order).",
    "empty_target_action": "Score of a query with no relevant item: ``\"neg\"`` (0), ``\"pos\"`` (1),\n"
    "    ``\"skip\"`` (NaN, left out of the mean) or ``\"error\"``.",
    "reduction": "``\"mean\"`` over queries, ``\"sum\"``, or ``\"none\"`` (per-query values ``[...]``).",
    "relevance_threshold": "Binary relevance is ``label >= relevance_threshold`` (trec_eval's ``-l``).",
    "validate_args": "Run the checks that read tensor values (NaN scores, negative labels); each\n"
    "    synchronises a GPU stream once. The shape, dtype and device checks always run. Unchecked, such values\n"
    "    give undefined results: a NaN score ranks last on the numpy backend and first on the device ones.",
}


def with_common_args(fn: Fn) -> Fn:
    """``fn`` documented and checked as a ranking function: ``{common_args}`` in its docstring becomes the docs of the
    shared arguments it takes, a keyword it does not take raises :func:`keyword_error`,
    and ``**options: Unpack[...]`` is expanded into keywords with :data:`DEFAULTS`, all of them in ``options``.
    """
    signature = inspect.signature(fn)
    var_keyword = [p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD]
    if not var_keyword:
        _document(fn, signature)
        return with_keyword_hints(fn)
    (options,) = typing.get_args(typing.get_type_hints(fn)[var_keyword[0]])  # Unpack[X] -> (X,)
    defaults = {name: DEFAULTS[name] for name in options.__annotations__}
    signature = _expanded(signature, defaults)
    accepted = frozenset(signature.parameters)

    @functools.wraps(fn)
    def call(*args: object, **kwargs: object) -> object:
        if not accepted.issuperset(kwargs):  # checked first: `options` would take any keyword
            raise keyword_error(fn.__name__, kwargs.keys() - accepted, accepted)
        return fn(*args, **{**defaults, **kwargs})

    call.__signature__ = signature  # type: ignore[attr-defined]
    _document(call, signature)
    return call  # type: ignore[return-value]


def _expanded(signature: inspect.Signature, shared: Collection[str]) -> inspect.Signature:
    """``signature`` with ``**options`` replaced by the ``shared`` keywords: the cut-off, the function's own options,
    then the rest in :data:`DEFAULTS`' order."""
    written = {n: getattr(a, "__forward_arg__", a) for n, a in RankingOptions.__annotations__.items()}

    def keyword(name: str) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=DEFAULTS[name], annotation=written[name])

    params = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    positional = [p for p in params if p.kind is not p.KEYWORD_ONLY]
    own = [p for p in params if p.kind is p.KEYWORD_ONLY]
    cutoff = [keyword("k")] if "k" in shared else []
    rest = [keyword(name) for name in DEFAULTS if name in shared and name != "k"]
    return signature.replace(parameters=[*positional, *cutoff, *own, *rest])


def _document(fn: Callable, signature: inspect.Signature) -> None:
    """Replace ``{common_args}`` in ``fn``'s docstring with the docs of the shared arguments in ``signature``."""
    taken = [name for name in COMMON_ARGS if name in signature.parameters]
    lines = ["    Args:"] + [f"        {name}: {COMMON_ARGS[name]}".replace("\n", "\n        ") for name in taken]
    fn.__doc__ = (fn.__doc__ or "").replace("    {common_args}\n", "\n".join(lines) + "\n")
