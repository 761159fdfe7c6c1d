"""trec_eval-compatible evaluation of TREC files: measure names, per-query scores and trec_eval's output.

``-m`` takes trec_eval's names and parameter syntax (``map``, ``P.5,10``, ``ndcg_cut.10``, ``recip_rank``,
``Rprec``, ``recall.100``, ``success.1``, ``bpref``, ``iprec_at_recall..1,.5``, ``set_F.0.5``, the groups
``official`` and ``all_trec``) and torchrank's grammar (``ndcg@10``, ``map@100``, ``rbp.95``, ``err@20``,
``P_5``; see :mod:`torchrank.functional.measures`). trec_eval's measures print under trec_eval's names, in
trec_eval's order; grammar names follow, as written. The semantics are trec_eval 10.0's; ``trec_eval="9"``
follows 9.x (and pytrec_eval) where they differ.

The helpers :func:`score_run` and :func:`score_runs` read a qrels file and runs into per-query values
(``[Q]`` tensors aligned with ``qids``); :func:`format_trec_eval` prints them as trec_eval does. Runs are
ranked as trec_eval 10.0 ranks them, by their scores as doubles (:func:`torchrank.io.read_trec`).

Example:
    >>> from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN
    >>> scores = score_run(SAMPLE_QRELS, SAMPLE_RUN, ["map", "P.5,10", "ndcg@10"])
    >>> scores.qids, list(scores.values)
    (['301', '302', '303'], ['map', 'P_5', 'P_10', 'ndcg@10'])
    >>> print(format_trec_eval(scores, per_query=False))
    map                   	all	0.1785
    P_5                   	all	0.2667
    P_10                  	all	0.3000
    ndcg@10               	all	0.3016
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from torchrank.functional.measures import RankedLists, parse_measure
from torchrank.functional.registry import MEASURES, Declaration, TrecName, trec_names

from .trec import ProgressCallback, TrecBatch, TrecFile, load_qrels, read_trec

__all__ = [
    "ALL_TREC",
    "OFFICIAL",
    "UNSUPPORTED",
    "RunScores",
    "evaluate_batch",
    "format_trec_eval",
    "parse_measures",
    "score_run",
    "score_runs",
]

MIN_GEO_MEAN = 0.00001  # trec_eval's floor for geometric means


@dataclass(frozen=True)
class _TrecMeasure:
    """One trec_eval measure: how its parameters read, how it is computed, printed and averaged."""

    name: str
    params: str  # "none", "cuts" (ints), "levels" (floats), "floats" (printed as given), "gains"
    default: tuple = ()
    kind: str = "float"  # "float", "long" (summed), "gm" (geometric mean, summary only), "meta"
    trec: TrecName | None = None  # its declaration in the measure registry (None: runid, num_q)
    family: Declaration | None = None


# trec_eval's order of its measures (its measures.c); runid and num_q describe the run, the others are declared in
# the measure registry with their trec_eval names and parameter syntax (torchrank.functional.registry)
_TREC_ORDER = (
    "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
    "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg", "binG",
    "G", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success", "set_P", "set_relative_P",
    "set_recall", "set_map", "set_F",
    "num_nonrel_judged_ret", "rbp", "rbp_resid", "unj",
)
_META = {
    "runid": _TrecMeasure("runid", "none", kind="meta"),
    "num_q": _TrecMeasure("num_q", "none", kind="meta"),
    # each query's relevance values in rank order as characters (printed with -q only): io's own, not a measure
    "relstring": _TrecMeasure("relstring", "relstring", (10,), kind="relstring"),
}
_DECLARED = {
    trec.name: _TrecMeasure(trec.name, trec.syntax, trec.default, trec.kind, trec, family)
    for trec, family in trec_names()
}


def _trec_position(name: str) -> int:
    return _TREC_ORDER.index(name) if name in _TREC_ORDER else len(_TREC_ORDER)


# the measures torchrank computes under trec_eval's names, in trec_eval's order (declared names it lacks come last)
TABLE: list[_TrecMeasure] = sorted([*_META.values(), *_DECLARED.values()], key=lambda m: _trec_position(m.name))
_BY_NAME = {m.name: m for m in TABLE}
_ORDER = {m.name: i for i, m in enumerate(TABLE)}

#: trec_eval's default measures (``-m official``, or no ``-m``).
OFFICIAL = (
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
)
#: The measures of trec_eval's ``-m all_trec`` that torchrank computes, in trec_eval's order.
ALL_TREC = tuple(m.name for m in TABLE)
#: trec_eval measures of ``all_trec`` (and others) that torchrank does not compute.
UNSUPPORTED = (
    "Rprec_mult_avgjg",
    "P_avgjg",
    "map_avgjg",
    "yaap",
    "ndcg_p",
    "prefs_*",
    "qrels_jg measures",
)


@dataclass(frozen=True)
class _Item:
    """One printed measure: its name, how to compute it and how it prints and averages."""

    name: str
    kind: str  # "float", "long", "gm", "meta", "relstring"
    compute: Callable[[_Context], Tensor] | None = None  # -> [Q] float64 (relstring: a list of str)
    levels: tuple[float, ...] = ()  # recall levels of iprec_at_recall and 11pt_avg (see _empty_lists)


class _Context:
    """One ranking of a batch and the measures computed on it, cached per (kernel, ks, params)."""

    def __init__(self, batch: TrecBatch, ties: str, relevance_threshold: float) -> None:
        self.batch = batch
        self.lists = RankedLists(
            batch.preds,
            batch.target,
            mask=batch.mask,
            ideal_target=batch.ideal_target,
            judged=batch.judged,
            ties=ties,
            empty_target_action="neg",
            relevance_threshold=relevance_threshold,
            validate_args=False,
        )
        # trec_eval -c: the queries missing from the run score 0 (not those whose documents -J dropped: trec_eval
        # evaluates their empty lists)
        self.missing = ~batch.in_run if batch.in_run is not None else ~batch.mask.any(1)
        self.cache: dict[tuple, Tensor] = {}

    def run(self, measure: Callable, ks: tuple, **params: object) -> Tensor:
        """``[Q, len(ks)]`` values of a kernel (cached: measures sharing a kernel and cut-offs run once)."""
        key = (measure, ks, tuple(sorted((k, _hashable(v)) for k, v in params.items())))
        if key not in self.cache:
            self.cache[key] = self.lists.per_query(measure, ks, **params).to(torch.float64)
        return self.cache[key]


def _hashable(v: object) -> object:
    return id(v) if isinstance(v, Tensor) or callable(v) else v


def _column(
    measure: Callable, ks: tuple, j: int, from_batch: tuple[str, ...] = (), **params: object
) -> Callable[[_Context], Tensor]:
    """Column ``j`` of a kernel's values at ``ks``; ``from_batch`` names parameters read from the batch."""

    def compute(ctx: _Context) -> Tensor:
        batch_params = {name: getattr(ctx.batch, name).to(ctx.batch.preds.device) for name in from_batch}
        return ctx.run(measure, ks, **params, **batch_params)[:, j]

    return compute


def _expand(measure: _TrecMeasure, params: tuple, trec_eval: str = "10") -> list[_Item]:
    """The printed items of one trec_eval measure with its (parsed) parameters, from its declaration."""
    name, kind, trec, family = measure.name, measure.kind, measure.trec, measure.family
    if measure.kind == "relstring":
        length, text = params
        return [_Item(name if text is None else f"{name}_{text}", "relstring", _relstrings(length))]
    if trec is None or family is None:  # runid, num_q
        return [_Item(name, "meta")]
    kernel, fixed, batch = family.kernel, {**family.params, **trec.params}, trec.from_batch
    if trec_eval == "9" and name in ("iprec_at_recall", "11pt_avg"):
        fixed["round_up"] = 0.9  # 9.x counts a recall level's relevant documents as (long)(level * R + 0.9)
    if measure.params == "cuts":
        ks = tuple(params)
        return [_Item(f"{name}_{k}", kind, _column(kernel, ks, j, batch, **fixed)) for j, k in enumerate(ks)]
    if measure.params == "levels":
        fixed |= trec.parsed(params)
        ks = (None,) * len(params)
        nan_at = name == "iprec_at_recall"  # its levels may print -nan (_empty_lists); Rprec_mult's do not
        return [
            _Item(f"{name}_{x:3.2f}", kind, _column(kernel, ks, j, batch, **fixed), levels=(x,) * nan_at)
            for j, x in enumerate(params)
        ]
    if measure.params in ("floats", "gains"):
        values, text = params
        if values:  # ndcg without gains keeps the family's own
            fixed |= trec.parsed(values)
        levels = tuple(values) if name == "11pt_avg" else ()
        compute = _column(kernel, (None,), 0, batch, **fixed)
        return [_Item(name if text is None else f"{name}_{text}", kind, compute, levels=levels)]
    return [_Item(name, kind, _column(kernel, (None,), 0, batch, **fixed))]


def _parse_params(measure: _TrecMeasure, text: str | None, option: str) -> tuple:
    """trec_eval's parameter syntax: ``P.5,10``, ``iprec_at_recall..1,.5``, ``utility.2,-1,0,0``, ..."""
    if measure.params == "none":
        if text is not None:
            raise ValueError(f"Measure {option!r}: {measure.name} takes no parameters.")
        return ()
    if measure.params == "relstring":
        if text is None:
            return (measure.default[0], None)
        try:
            return (max(int(float(text)), 0), text)  # trec_eval: a double, cast to long
        except ValueError:
            raise ValueError(f"Measure {option!r}: expected relstring.LENGTH") from None
    if measure.params == "gains":
        if text is None:
            return ((), None)
        try:
            pairs = tuple(tuple(float(x) for x in pair.split("=")) for pair in text.split(","))
        except ValueError:
            pairs = ()
        if not pairs or any(len(p) != 2 for p in pairs):
            raise ValueError(f"Measure {option!r}: expected ndcg.level=gain,level=gain,...") from None
        return (pairs, text)
    if text is None:
        return measure.default if measure.params != "floats" else (measure.default, None)
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"Measure {option!r}: expected comma-separated numbers after '{measure.name}.'") from None
    if measure.params == "floats":
        return (tuple(values), text)
    if measure.params == "cuts":
        cuts = sorted({int(v) for v in values})  # trec_eval truncates (ndcg_cut.23.4 is ndcg_cut_23)
        if cuts[0] < 1:
            raise ValueError(f"Measure {option!r}: cut-offs must be positive.")
        return tuple(cuts)
    return tuple(sorted(set(values)))


#: The trec_eval versions whose semantics ``evaluate_batch`` (and ``torchrank evaluate --trec-eval``) follows.
TREC_EVAL_VERSIONS = ("10", "9")
_NEW_IN_10 = ("rbp", "rbp_resid", "unj")


def _check_version(trec_eval: str) -> None:
    if trec_eval not in TREC_EVAL_VERSIONS:
        raise ValueError(f"trec_eval must be one of {TREC_EVAL_VERSIONS} (the version whose semantics to follow), "
                         f"got {trec_eval!r}")


def _all_trec(trec_eval: str) -> tuple[str, ...]:
    return ALL_TREC if trec_eval == "10" else tuple(n for n in ALL_TREC if n not in _NEW_IN_10)


def _relstrings(length: int) -> Callable[[_Context], list[str]]:
    """trec_eval's ``relstring``: each query's first ``length`` relevance values as characters (``0``-``9``, ``>``
    above 9, ``-`` not in the qrels, ``.`` in the qrels with a negative label: pooled, unjudged)."""

    def compute(ctx: _Context) -> list[str]:
        b = ctx.batch
        target, judged, mask = b.target.cpu(), b.judged.cpu(), b.mask.cpu()
        pooled = b.pooled_unjudged.cpu() if b.pooled_unjudged is not None else torch.zeros_like(mask)
        digits = torch.where(target > 9, ord(">"), ord("0") + target.clamp(max=9))
        codes = torch.where(judged, digits, torch.where(pooled, ord("."), ord("-")))
        shown = min(length, codes.shape[1])
        rows = codes[:, :shown].to(torch.uint8).numpy().tobytes()
        lengths = mask.sum(1).clamp(max=shown).tolist()
        return [rows[i * shown : i * shown + n].decode("ascii") for i, n in enumerate(lengths)]

    return compute


def parse_measures(options: Sequence[str] | None, trec_eval: str = "10") -> list[_Item]:
    """Measures to print for ``-m`` options (each a trec_eval name or group, or torchrank grammar names,
    comma-separated for the grammar). trec_eval measures come first, in trec_eval's order.

    Example:
        >>> [i.name for i in parse_measures(["P.10,5", "map", "ndcg@10"])]
        ['map', 'P_5', 'P_10', 'ndcg@10']

    ``trec_eval="9"``: ``all_trec`` as trec_eval 9.x has it (without ``rbp``, ``rbp_resid`` and ``unj``).
    """
    _check_version(trec_eval)
    trec: dict[str, tuple] = {}
    grammar: list[str] = []
    for option in options or ["official"]:
        option = option.strip()
        if option in ("official", "all_trec"):
            for name in OFFICIAL if option == "official" else _all_trec(trec_eval):
                trec.setdefault(name, _parse_params(_BY_NAME[name], None, name))
            continue
        base, dot, text = option.partition(".")
        if base in _BY_NAME and not (dot and _takes_suffix(_BY_NAME[base])):
            params = _parse_params(_BY_NAME[base], text if dot else None, option)
            if base in trec and _BY_NAME[base].params == "cuts":
                params = tuple(sorted(set(trec[base]) | set(params)))
            trec[base] = params
            continue
        if base in UNSUPPORTED or base.startswith("prefs_"):
            raise ValueError(f"Measure {option!r}: trec_eval's {base} is not supported by torchrank.")
        for name in (n.strip() for n in option.split(",")):
            if name and name not in grammar:
                parse_measure(name)  # raises a clear ValueError for an unknown name
                grammar.append(name)
    items: list[_Item] = []
    for name in sorted(trec, key=_ORDER.__getitem__):
        items += _expand(_BY_NAME[name], trec[name], trec_eval)
    for name in grammar:
        items.append(_grammar_item(name))
    return items


def _takes_suffix(measure: _TrecMeasure) -> bool:
    """A trec_eval name without parameters whose family reads a suffix (``rbp.95``): the grammar's."""
    return measure.params == "none" and measure.family is not None and measure.family.suffix_param is not None


def _grammar_item(name: str) -> _Item:
    parsed = parse_measure(name)
    family = MEASURES[parsed.family]
    batch = next((t.from_batch for t in family.trec if t.from_batch), ())  # as its trec_eval name reads them
    params = family.kernel_params(**dict(parsed.params))
    return _Item(name, "float", _column(family.kernel, (parsed.k,), 0, batch, **params))


@dataclass
class RunScores:
    """Per-query values of one run: ``values[name]`` is a ``[Q]`` float64 tensor aligned with ``qids``.

    Attributes:
        path: The run file (None for a batch evaluated in memory).
        runid: The run's tag (trec_eval's ``runid``: the last line's).
        qids: Evaluated queries, sorted as trec_eval sorts them.
        values: Per-query values of every measure, keyed by printed name (``P_10``, ``ndcg@10``, ...).
        kinds: ``"float"``, ``"long"`` (counts; summed over queries), ``"gm"`` (geometric mean) or ``"relstring"``
            per name, in printing order.
        meta: ``runid`` and ``num_q`` when asked for.
        texts: ``relstring``'s per-query strings (printed with ``per_query`` only).
        totals: ``all`` values trec_eval computes otherwise than from the per-query values (``num_rel`` with
            ``-c``: every qrels label above 0, whatever the relevance level).
        unprinted: Queries averaged but not printed per query (trec_eval 9.x with ``-c``: those missing from the
            run).
    """

    path: str | None
    runid: str | None
    qids: list[str]
    values: dict[str, Tensor]
    kinds: dict[str, str]
    meta: list[str] = field(default_factory=list)
    texts: dict[str, list[str]] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)
    unprinted: frozenset[str] = frozenset()

    def summary(self) -> dict[str, float]:
        """The ``all`` value of each measure as trec_eval computes it (mean, sum or geometric mean)."""
        out: dict[str, float] = {}
        for name, v in self.values.items():
            kind = self.kinds[name]
            if name in self.totals:
                out[name] = self.totals[name]
            elif kind == "long":
                out[name] = float(v.sum())
            elif kind == "gm":
                logs = [math.log(max(x, MIN_GEO_MEAN)) for x in v.tolist()]
                out[name] = math.exp(_c_sum(logs) / len(logs)) if logs else 0.0
            else:
                out[name] = _c_sum(v.tolist()) / v.numel() if v.numel() else 0.0
        return out


def _c_sum(values: list[float]) -> float:
    """The sum of ``values`` added one by one in order, as trec_eval accumulates over queries: a mean that lies
    on a printed rounding boundary (x.xxxx5) then rounds as trec_eval's does (a pairwise sum may differ in its
    last bit, and print one unit off in the 4th decimal)."""
    total = 0.0
    for x in values:
        total += x
    return total


def evaluate_batch(
    batch: TrecBatch,
    measures: Sequence[str] | None = None,
    *,
    relevance_threshold: float = 1,
    ties: str = "first",
    path: str | None = None,
    trec_eval: str = "10",
) -> RunScores:
    """Per-query values of ``measures`` (``-m`` options, see :func:`parse_measures`) on a :class:`TrecBatch`.

    The values are trec_eval 10.0's when the batch is ranked as it ranks, by the parsed doubles
    (:func:`torchrank.io.read_trec`'s default). ``trec_eval="9"`` follows trec_eval 9.x (and pytrec_eval) where
    they differ, on a batch ranked by scores rounded to float32 (``read_trec(..., score_dtype=torch.float32)``):
    ``iprec_at_recall`` and ``11pt_avg`` turn recall levels into counts by adding 0.9 and truncating, ``-c``
    prints no per-query lines for the queries missing from the run, and ``all_trec`` has no ``rbp``,
    ``rbp_resid`` nor ``unj``.

    Args:
        batch: The run against the qrels, as read by :func:`torchrank.io.read_trec`. Read with ``all_queries``
            (trec_eval ``-c``), ``num_rel``'s ``all`` line counts every qrels label above 0, as trec_eval does,
            whatever ``relevance_threshold`` is; read with ``judged_only`` (``-J``), trec_eval 10.0 evaluates a
            query missing from the run as a list of one unjudged document, which ``-J`` empties, so its
            ``iprec_at_recall`` prints ``-nan`` as for any empty list.
        measures: ``-m`` options; None: trec_eval's official measures.
        relevance_threshold: trec_eval ``-l``.
        ties: ``"first"`` keeps the batch's order (trec_eval's).
        path: The run file, for the record.
        trec_eval: ``"10"`` (default) or ``"9"``: the version whose semantics to follow.

    Example:
        >>> from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN, read_trec
        >>> scores = evaluate_batch(read_trec(SAMPLE_QRELS, SAMPLE_RUN), ["bpref", "num_rel_ret"])
        >>> {name: round(value, 4) for name, value in scores.summary().items()}
        {'num_rel_ret': 131.0, 'bpref': 0.1981}
    """
    _check_version(trec_eval)
    items = parse_measures(measures, trec_eval)
    ctx = _Context(batch, ties, relevance_threshold)
    values: dict[str, Tensor] = {}
    kinds: dict[str, str] = {}
    texts: dict[str, list[str]] = {}
    meta: list[str] = []
    empty = _empty_lists(ctx, relevance_threshold, trec_eval, batch.judged_only)
    for item in items:
        if item.kind == "meta":
            meta.append(item.name)
            continue
        kinds[item.name] = item.kind
        if item.kind == "relstring":
            texts[item.name] = item.compute(ctx)
            continue
        v = item.compute(ctx)
        if item.name == "rbp_resid":  # trec_eval sets it only for lists holding an unjudged document, else 0
            v = torch.where((batch.mask & ~batch.judged).any(1), v, 0)
        if item.name not in ("num_rel",):
            v = v.masked_fill(ctx.missing, 0)  # trec_eval -c: a query missing from the run scores 0
        if item.levels:
            v = torch.where(empty(item.levels), math.nan, v)
        values[item.name] = v.cpu()
    totals = {}
    if batch.all_queries and "num_rel" in values:
        totals["num_rel"] = float((batch.ideal_target > 0).sum())
    unprinted = frozenset()
    if trec_eval == "9":  # 9.x's -c evaluates the missing queries only in the means
        unprinted = frozenset(q for q, gone in zip(batch.qids, ctx.missing.tolist(), strict=True) if gone)
    return RunScores(path, batch.runid, list(batch.qids), values, kinds, meta, texts, totals, unprinted)


def _empty_lists(
    ctx: _Context, relevance_threshold: float, trec_eval: str, judged_only: bool
) -> Callable[[tuple], Tensor]:
    """Where trec_eval's interpolated precision is 0/0 (printed ``-nan``): an empty list (every document dropped
    by ``-J``) at a recall level whose count of relevant documents is 0 (``lround(level * R)``; 9.x:
    ``(long)(level * R + 0.9)``). ``[Q]`` bool for the levels of one printed value (11pt_avg: any of them)."""
    batch = ctx.batch
    # 10.0 ranks a query missing from the run as one unjudged document, which -J drops; 9.x leaves it out
    empty = ~batch.mask.any(1) if judged_only and trec_eval == "10" else ~batch.mask.any(1) & ~ctx.missing
    num_rel = (batch.ideal_target >= relevance_threshold).sum(1).to(torch.float64)
    offset = 0.5 if trec_eval == "10" else 0.9

    def where(levels: tuple) -> Tensor:
        level = torch.tensor(levels, dtype=torch.float64, device=num_rel.device)
        zero = torch.floor(level * num_rel.unsqueeze(1) + offset) == 0
        return empty & zero.any(1)

    return where


def score_run(
    qrels: str | os.PathLike[str] | TrecFile,
    run: str | os.PathLike[str] | TrecFile,
    measures: Sequence[str] | None = None,
    *,
    all_queries: bool = False,
    depth: int | None = None,
    relevance_threshold: float = 1,
    ties: str = "first",
    device: str | torch.device = "cpu",
    progress: ProgressCallback | None = None,
    judged_only: bool = False,
    trec_eval: str = "10",
) -> RunScores:
    """Read a qrels file and a run and compute per-query values, as ``trec_eval`` would.

    The run is ranked as trec_eval 10.0 ranks it (:func:`torchrank.io.read_trec`): by its scores as doubles, ties
    by docno descending; with ``trec_eval="9"`` as 9.x and pytrec_eval rank it, by each score rounded to float32
    (their C ``float``), and evaluated with 9.x's semantics where they differ (:func:`evaluate_batch`).

    Args:
        qrels: Path, or a file read once by :func:`torchrank.io.load_qrels`.
        run: Path, or a file read by :func:`torchrank.io.load_run`.
        measures: ``-m`` options (trec_eval names/groups or grammar names); None: trec_eval's defaults.
        all_queries: trec_eval ``-c``: every qrels query, those missing from the run scoring 0.
        depth: trec_eval ``-M``: only the first ``depth`` documents of each query.
        relevance_threshold: trec_eval ``-l``: lowest label that counts as relevant.
        ties: ``"first"`` (default) keeps trec_eval's order (score, then docno, descending).
        device: Where to compute (``"cuda"`` for a GPU).
        progress: Called with byte counts while the files are read.
        judged_only: trec_eval ``-J``: only the judged documents of each query's top ``depth``.
        trec_eval: ``"10"`` (default) or ``"9"``: the trec_eval version whose semantics to follow.
    """
    _check_version(trec_eval)
    score_dtype = torch.float64 if trec_eval == "10" else torch.float32
    batch = read_trec(qrels, run, depth=depth, all_queries=all_queries, progress=progress, judged_only=judged_only,
                      score_dtype=score_dtype)
    path = run.path if isinstance(run, TrecFile) else os.fspath(run)
    return evaluate_batch(batch.to(device), measures, relevance_threshold=relevance_threshold, ties=ties, path=path,
                          trec_eval=trec_eval)


def score_runs(
    qrels: str | os.PathLike[str] | TrecFile,
    runs: Sequence[str | os.PathLike[str] | TrecFile],
    measures: Sequence[str] | None = None,
    **kwargs: object,
) -> list[RunScores]:
    """:func:`score_run` for several runs against one qrels file (read once). With ``all_queries=True``
    every run is scored on the same queries, aligned row for row (what paired tests need).

    Example:
        >>> from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN
        >>> a, b = score_runs(SAMPLE_QRELS, [SAMPLE_RUN, SAMPLE_RUN], ["map"], all_queries=True)
        >>> a.qids == b.qids, bool((a.values["map"] == b.values["map"]).all())
        (True, True)
    """
    qrels_file = qrels if isinstance(qrels, TrecFile) else load_qrels(qrels, progress=kwargs.get("progress"))
    return [score_run(qrels_file, run, measures, **kwargs) for run in runs]


def _line(name: str, qid: str, value: str) -> str:
    return f"{name:<22}\t{qid}\t{value}"


def _format(value: float, kind: str) -> str:
    if kind == "long":
        return str(round(value))
    return "  -nan" if math.isnan(value) else f"{value:6.4f}"  # glibc prints 0/0 (its sign bit set) as -nan


def format_trec_eval(scores: RunScores, *, per_query: bool = False) -> str:
    """trec_eval's text output: ``measure<TAB>qid<TAB>value`` lines (measure padded to 22 characters),
    per-query lines first (``-q``), then the ``all`` lines (``runid`` and ``num_q`` first when asked for)."""
    lines: list[str] = []
    if per_query:
        names = [name for name, kind in scores.kinds.items() if kind != "gm"]
        table = {name: scores.values[name].tolist() for name in names if name in scores.values}
        for i, qid in enumerate(scores.qids):
            if qid in scores.unprinted:
                continue
            for name in names:
                if name in scores.texts:
                    lines.append(_line(name, qid, f"'{scores.texts[name][i]}'"))
                else:
                    lines.append(_line(name, qid, _format(table[name][i], scores.kinds[name])))
    if "runid" in scores.meta:
        lines.append(_line("runid", "all", scores.runid or ""))
    if "num_q" in scores.meta:
        lines.append(_line("num_q", "all", str(len(scores.qids))))
    lines += [_line(name, "all", _format(v, scores.kinds[name])) for name, v in scores.summary().items()]
    return "\n".join(lines)
