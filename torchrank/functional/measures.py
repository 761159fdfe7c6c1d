"""Measure names and :func:`evaluate`: many measures over one input, ranked once.

The grammar (case-insensitive), shared by configs and the command line:

==========================  =============================================================
name                        measure
==========================  =============================================================
``ndcg``, ``ndcg@10``       NDCG (linear gain), whole list or at k; ``ndcg_cut_10``, ``ndcg_cut.10``
``ndcg_exp@10``             NDCG with exponential gain ``2^g - 1`` (also ``ndcg_burges@10``)
``dcg@10``, ``dcg_exp@10``  DCG
``map``, ``map@100``        average precision (``ap``; trec_eval ``map_cut_100``)
``P@5``                     precision (``precision@5``, trec_eval ``P_5``, ``P.5``)
``recall@100``              recall (``recall_100``)
``f1@10``                   F1
``success@1``               hit rate (``hit_rate@1``, ``hit@1``, ``success_1``)
``mrr``, ``mrr@10``         reciprocal rank (``rr``, ``recip_rank``)
``rprec``                   R-precision (``Rprec``, ``r_precision``)
``mar@100``                 average recall
``err@20``                  ERR, exponential utility, top of scale: each query's top label
``rbp``, ``rbp.95``         RBP with p = 0.9 or p = 0.95 (``rbp_resid.95``: its residual)
``mean_rank``, ``frp@10``   mean rank of the relevant items, first relevant position
``bpref``                   binary preference (judged items only; trec_eval ``bpref``)
``set_P``, ``set_recall``   precision, recall, F1 of the whole list (trec_eval; also ``set_F``)
==========================  =============================================================
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from torchrank.functional._chunking import evaluate_in_chunks, reduce_queries
from torchrank.functional._pipeline import Measure, check_options, deepest, finalize, prepare
from torchrank.functional._ranking import apply_measure
from torchrank.functional.average_precision import _average_precision, _average_recall
from torchrank.functional.dcg import _dcg, _ndcg, _weights
from torchrank.functional.err import _err
from torchrank.functional.first_relevant import _first_relevant_position, _hit_rate, _mean_rank, _reciprocal_rank
from torchrank.functional.precision import _f1, _precision, _r_precision, _recall
from torchrank.functional.rbp import _rbp
from torchrank.functional.trec_extra import _bpref

_LOG2 = _weights("log", 2.0, 1.0)


@dataclass(frozen=True)
class Family:
    """A measure family: its kernel, whether a name may carry a cut-off, and fixed parameters."""

    measure: Measure
    takes_k: bool = True
    params: dict = field(default_factory=dict)
    param_from_suffix: Callable[[str], dict] | None = None  # "rbp.95" -> {"p": 0.95}


def _persistence(digits: str) -> dict:
    return {"p": float("0." + digits)}


FAMILIES: dict[str, Family] = {
    "precision": Family(_precision),
    "recall": Family(_recall),
    "f1": Family(_f1),
    "success": Family(_hit_rate),
    "map": Family(_average_precision),
    "mar": Family(_average_recall),
    "rprec": Family(_r_precision, takes_k=False),
    "ndcg": Family(_ndcg, params={"gain": "linear", "weights": _LOG2}),
    "ndcg_exp": Family(_ndcg, params={"gain": "exponential", "weights": _LOG2}),
    "dcg": Family(_dcg, params={"gain": "linear", "weights": _LOG2}),
    "dcg_exp": Family(_dcg, params={"gain": "exponential", "weights": _LOG2}),
    "mrr": Family(_reciprocal_rank),
    "err": Family(_err, params={"transform": "exponential", "max_label": None}),
    "rbp": Family(_rbp, params={"p": 0.9, "max_label": None, "residual": False}, param_from_suffix=_persistence),
    "rbp_resid": Family(
        _rbp, params={"p": 0.9, "max_label": None, "residual": True}, param_from_suffix=_persistence
    ),
    "mean_rank": Family(_mean_rank),
    "frp": Family(_first_relevant_position),
    "bpref": Family(_bpref, takes_k=False),
}
ALIASES = {
    "p": "precision", "ap": "map", "map_cut": "map", "recall_cut": "recall", "hit_rate": "success",
    "hit": "success", "rr": "mrr", "recip_rank": "mrr", "reciprocal_rank": "mrr",
    "r_precision": "rprec", "ndcg_cut": "ndcg", "ndcg_burges": "ndcg_exp", "dcg_burges": "dcg_exp",
    "average_precision": "map", "average_recall": "mar", "first_relevant_position": "frp",
    "set_p": "precision", "set_recall": "recall", "set_f": "f1",
}
_NAME = re.compile(r"^(?P<base>[a-z][a-z0-9_]*?)(?:(?P<sep>@|_cut_|_cut\.|_|\.)(?P<arg>\d+))?$")
GRAMMAR = (
    "a family name, optionally followed by '@k' (or trec_eval's '_k', '.k', '_cut_k'); 'rbp.95' sets "
    f"RBP's persistence. Families: {sorted(FAMILIES)}; aliases: {sorted(ALIASES)}"
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
    base = match and ALIASES.get(match["base"], match["base"])
    if match is None or base not in FAMILIES:
        raise ValueError(f"Unknown measure {name!r}: expected {GRAMMAR}.")
    family, arg = FAMILIES[base], match["arg"]
    if arg is None:
        return ParsedMeasure(name, base, None, ())
    if family.param_from_suffix is not None and match["sep"] == ".":
        return ParsedMeasure(name, base, None, tuple(family.param_from_suffix(arg).items()))
    if not family.takes_k:
        raise ValueError(f"Measure {name!r}: {base} takes no cut-off.")
    if int(arg) <= 0:
        raise ValueError(f"Measure {name!r}: the cut-off must be a positive int.")
    return ParsedMeasure(name, base, int(arg), ())


def evaluate(
    preds: Tensor,
    target: Tensor,
    measures: Sequence[str],
    *,
    indexes: Tensor | None = None,
    mask: Tensor | None = None,
    ideal_target: Tensor | None = None,
    judged: Tensor | None = None,
    ties: str = "average",
    empty_target_action: str = "neg",
    reduction: str = "mean",
    relevance_threshold: float = 1,
    validate_args: bool = True,
) -> dict[str, Tensor]:
    """Compute several measures over the same input with one sort; a dict keyed by the names as given.

    Arguments are those of the single-measure functions (see :func:`torchrank.functional.ndcg`). Measures of
    one family share one pass over every cut-off asked for.

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
    groups, depth = _plan(tuple(measures))
    if indexes is None:  # dense input past the memory budget: chunks of queries, same result
        check_options(ties, empty_target_action, reduction, relevance_threshold)
        reduced = evaluate_in_chunks(
            lambda t: evaluate(
                t["preds"], t["target"], measures, mask=t["mask"], ideal_target=t["ideal_target"], judged=t["judged"],
                ties=ties, empty_target_action=empty_target_action, reduction="none",
                relevance_threshold=relevance_threshold, validate_args=validate_args,
            ),
            preds, {"target": target, "mask": mask, "ideal_target": ideal_target, "judged": judged}, reduction,
        )
        if reduced is not None:
            return reduced
    inputs, ranking = prepare(
        preds, target, indexes=indexes, mask=mask, ideal_target=ideal_target, judged=judged, ties=ties,
        empty_target_action=empty_target_action, reduction=reduction, relevance_threshold=relevance_threshold,
        validate_args=validate_args, depth=depth,
    )
    values, empty = [], []
    for family, params, members in groups:  # one pass per family, never per query
        family_values, no_relevant = apply_measure(family.measure, ranking, [m.k for m in members], **params)
        values.append(family_values)
        empty.append(no_relevant.unsqueeze(1).expand_as(family_values))
    # every family's columns filled at once: per-family calls cost more than the work on small batches
    per_query = finalize(torch.cat(values, 1), torch.cat(empty, 1), inputs, empty_target_action, "none", True)
    columns = per_query.unbind(-1)
    if reduction != "none":  # each column alone, as the chunked path reduces it: the same sums, bit for bit
        columns = tuple(reduce_queries(c.reshape(-1).contiguous(), reduction, c.shape) for c in columns)
    names = [m.name for _, _, members in groups for m in members]
    results = dict(zip(names, columns, strict=True))
    return {name: results[name] for name in measures}


@functools.lru_cache(maxsize=256)
def _plan(measures: tuple[str, ...]) -> tuple[list[tuple[Family, dict, list[ParsedMeasure]]], int | None]:
    """Parse and group measure names once per list of names: ``([(family, params, members)], depth)``."""
    parsed = [parse_measure(m) for m in measures]
    if not parsed:
        raise ValueError("Argument `measures` must name at least one measure.")
    groups: dict[tuple, list[ParsedMeasure]] = {}
    for m in parsed:
        groups.setdefault((m.family, m.params), []).append(m)
    plan = [
        (FAMILIES[family], {**FAMILIES[family].params, **dict(params)}, members)
        for (family, params), members in groups.items()
    ]
    return plan, deepest([m.k for m in parsed])
