"""Measure names and :func:`evaluate`: many measures over one input, ranked once.

The grammar (case-insensitive; configs and the command line share it): a family name or alias from the registry,
optionally followed by a cut-off ``@k`` (or trec_eval's ``_k``, ``.k``, ``_cut_k``; the cut aliases ``ndcg_cut``,
``map_cut``, ``recall_cut`` need one); ``rbp.95`` sets RBP's persistence (``rbp_95`` is RBP at k = 95).

{table}
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

from torch import Tensor

from torchrank.functional._chunking import reduce_queries
from torchrank.functional._inputs import REDUCTIONS, check_choice
from torchrank.functional._measure import Kernel
from torchrank.functional._options import ListOptions, Unpack, with_common_args
from torchrank.functional._pipeline import measure_ranking, per_query_values, prepare
from torchrank.functional._ranked import Ks
from torchrank.functional.registry import DECLARATIONS, Declaration, grammar_names
from torchrank.functional.trec_extra import judged_counts, judged_only_mask, pooled_in_score_order


def _grammar_table() -> str:
    """The declared grammar as an rst table: each family's names, whether they take ``@k``, its doc line."""
    rows = [("names", "@k", "measure")] + [
        (", ".join(f"``{n}``" for n in (spec.name, *spec.aliases)), "yes" if spec.takes_k else "no", spec.doc)
        for spec in DECLARATIONS if spec.grammar
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    rule = "  ".join("=" * w for w in widths)
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([rule, lines[0], rule, *lines[1:], rule])


if __doc__:  # None under python -OO
    __doc__ = __doc__.format(table=_grammar_table())

#: Grammar families by name (derived from the registry; read-only).
FAMILIES = MappingProxyType({spec.name: spec for spec in DECLARATIONS if spec.grammar})
_NAME = re.compile(r"^(?P<base>[a-z][a-z0-9_]*?)(?:(?P<sep>@|_cut_|_cut\.|_|\.)(?P<arg>\d+))?$")
# a name split into what names the family and its cut-off or parameter (both possibly misspelt)
_PARTS = re.compile(r"^(?P<base>.*?)(?P<cut>(?:@|_cut_|_cut\.|_|\.)\d+)?$")
GRAMMAR = (
    "a family name or alias, optionally followed by '@k' (or trec_eval's '_k', '.k', '_cut_k'); 'rbp.95' sets "
    f"RBP's persistence. Families: {sorted(FAMILIES)} (their aliases: torchrank.functional.MEASURES, docs/measures.md)"
)


@dataclass(frozen=True)
class ParsedMeasure:
    name: str
    family: str
    k: int | None
    params: tuple[tuple[str, object], ...]


@functools.lru_cache(maxsize=1024)
def parse_measure(name: str) -> ParsedMeasure:
    """Parse one measure name.

    Example:
        >>> parse_measure("ndcg_cut_10")
        ParsedMeasure(name='ndcg_cut_10', family='ndcg', k=10, params=())
        >>> parse_measure("rbp.95").params
        (('p', 0.95),)
    """
    if not isinstance(name, str):
        raise TypeError(f"A measure name must be a string, got {name!r}.")
    match = _NAME.match(name.strip().lower())
    spec = match and grammar_names().get(match["base"])
    if match is None or spec is None:
        raise _unknown_measure(name)
    arg = match["arg"]
    if arg is None and match["base"].endswith("_cut"):
        # trec_eval's -m ndcg_cut lists nine cut-offs; a whole-list value under that name would be misread
        raise ValueError(f"Measure {name!r} needs a cut-off ({match['base']}_10, or {spec.name}@10); the whole list "
                         f"is {spec.name!r}.")
    if arg is None:
        return ParsedMeasure(name, spec.name, None, ())
    if spec.suffix_param is not None and match["sep"] == ".":  # rbp.95: p = 0.95
        return ParsedMeasure(name, spec.name, None, ((spec.suffix_param, float("0." + arg)),))
    if not spec.takes_k:
        raise ValueError(f"Measure {name!r}: {spec.name} takes no cut-off.")
    if int(arg) <= 0:
        raise ValueError(f"Measure {name!r}: the cut-off must be a positive int.")
    return ParsedMeasure(name, spec.name, int(arg), ())


def _unknown_measure(name: str) -> ValueError:
    """The error for a name the grammar does not know: the close known names with the same cut-off (``ndgc@10``:
    did you mean ``ndcg@10``), a malformed cut-off (``ndcg@ten``), else the grammar and the families."""
    parts = _PARTS.match(name.strip().lower())
    base, cut = (parts["base"], parts["cut"] or "") if parts else (name, "")
    names = grammar_names()
    head = re.split(r"[@.]", base, maxsplit=1)[0]
    if head != base and head in names:
        return ValueError(f"Unknown measure {name!r}: a cut-off is '@k' with k a positive integer, as in '{head}@10'.")
    close = difflib.get_close_matches(base, list(names), n=3, cutoff=0.6)
    if close:
        return ValueError(f"Unknown measure {name!r}; did you mean {' or '.join(repr(c + cut) for c in close)}?")
    return ValueError(f"Unknown measure {name!r}: expected {GRAMMAR}.")


@with_common_args
def evaluate(
    preds: Tensor, target: Tensor, measures: Sequence[str], *, judged: Tensor | None = None, judged_only: bool = False,
    num_judged: Tensor | None = None, pooled_unjudged: Tensor | None = None, **options: Unpack[ListOptions],
) -> dict[str, Tensor]:
    """Compute several measures over the same input with one sort; a dict keyed by the names as given.

    Arguments are those of the single-measure functions. ``judged_only=True`` drops the items that ``judged`` marks
    unjudged before ranking (trec_eval ``-J``). ``num_judged`` and ``pooled_unjudged`` go to the measures that read
    them (:func:`~torchrank.functional.bpref`, :func:`~torchrank.functional.inferred_average_precision`).

    Example:
        >>> import torch
        >>> preds = torch.tensor([[0.9, 0.8, 0.7, 0.6]])
        >>> target = torch.tensor([[1, 0, 2, 0]])
        >>> out = evaluate(preds, target, ["ndcg@3", "P@2", "map", "mrr"])
        >>> {name: round(value.item(), 4) for name, value in out.items()}
        {'ndcg@3': 0.7602, 'P@2': 0.5, 'map': 0.8333, 'mrr': 1.0}
    """
    if isinstance(measures, str):
        raise TypeError("Argument `measures` must be a sequence of names, got a single string.")
    mask = judged_only_mask(options.pop("mask"), judged, judged_only)  # an input filter: unjudged items are padding
    groups = _plan(tuple(measures))
    extra = {"num_judged": judged_counts(num_judged, None)}
    if pooled_unjudged is not None and any(_reads(family.kernel, "pooled_unjudged") for family, _, _ in groups):
        preds, target, mask, judged, extra["pooled_unjudged"] = pooled_in_score_order(
            preds, target, mask, judged, pooled_unjudged, options["indexes"])
    requests = [
        (family.kernel, [m.k for m in members], _with_inputs(family, params, extra, options["ideal_target"]))
        for family, params, members in groups
    ]
    reduction = options.pop("reduction")
    check_choice("reduction", reduction, REDUCTIONS)
    columns = per_query_values(requests, preds, target, mask=mask, judged=judged, **options).unbind(-1)
    if reduction != "none":  # each column alone, as the chunked path reduces it: the same sums, bit for bit
        columns = tuple(reduce_queries(c.reshape(-1).contiguous(), reduction, c.shape) for c in columns)
    results = dict(zip([m.name for _, _, members in groups for m in members], columns, strict=True))
    return {name: results[name] for name in measures}


class RankedLists:
    """Dense ``[Q, N]`` lists ranked once, over which a caller outside the grammar (:mod:`torchrank.io.trec_eval`)
    runs declared kernels with its own parameters, as :func:`evaluate` would; the arguments are :func:`evaluate`'s.

    Example:
        >>> import torch
        >>> from torchrank.functional import MEASURES
        >>> lists = RankedLists(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 1, 1]]))
        >>> lists.per_query(MEASURES["precision"].kernel, (1, 3))
        tensor([[0.0000, 0.6667]])
    """

    def __init__(
        self, preds: Tensor, target: Tensor, *, mask: Tensor | None = None, ideal_target: Tensor | None = None,
        judged: Tensor | None = None, ties: str = "average", empty_target_action: str = "neg",
        relevance_threshold: float = 1, validate_args: bool = True,
    ) -> None:
        self.empty_target_action = empty_target_action
        self._validate_args = validate_args
        self._inputs, self._ranking = prepare(
            preds, target, indexes=None, mask=mask, ideal_target=ideal_target, judged=judged, ties=ties,
            empty_target_action=empty_target_action, reduction="none", relevance_threshold=relevance_threshold,
            validate_args=validate_args, depth=None)

    def per_query(self, kernel: Kernel, ks: Ks, **params: object) -> Tensor:
        """``kernel``'s values at the cut-offs ``ks`` (None: the whole list) ``[Q, len(ks)]``, empty queries filled."""
        requests = [(kernel, list(ks), params)]
        return measure_ranking(requests, self._inputs, self._ranking, self.empty_target_action, self._validate_args)


def _with_inputs(family: Declaration, params: dict, extra: dict[str, Tensor | None], ideal_target: Tensor | None
                 ) -> dict[str, object]:
    """``params`` with the inputs of ``extra`` the family's kernel reads (bpref's judged counts, checked against
    ``ideal_target``; infAP's pool)."""
    given = {name: value for name, value in extra.items() if _reads(family.kernel, name)}
    if "num_judged" in given:
        given["num_judged"] = judged_counts(given["num_judged"], ideal_target, family.name)
    return {**params, **given} if given else params


@functools.cache
def _reads(kernel: Kernel, name: str) -> bool:
    """Whether ``kernel`` takes the parameter ``name`` (read once per kernel and name)."""
    return name in inspect.signature(kernel).parameters


@functools.lru_cache(maxsize=256)
def _plan(measures: tuple[str, ...]) -> list[tuple[Declaration, dict, list[ParsedMeasure]]]:
    """Parse and group measure names once per list of names: ``[(family, params, members)]``."""
    parsed = [parse_measure(m) for m in measures]
    if not parsed:
        raise ValueError("Argument `measures` must name at least one measure.")
    groups: dict[tuple, list[ParsedMeasure]] = {}
    for m in parsed:
        groups.setdefault((m.family, m.params), []).append(m)
    return [
        (FAMILIES[family], FAMILIES[family].kernel_params(**dict(params)), members)
        for (family, params), members in groups.items()
    ]
