"""Errors for keyword arguments a function or class does not take, that say what to write instead: mostly habits
from torchmetrics' retrieval signatures (1.9), e.g. ``top_k`` for ``k`` (:mod:`torchrank.compat` takes them all)."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Collection, Iterable
from typing import TypeVar

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
