"""The measure registry: one :class:`Declaration` per measure family, in :data:`DECLARATIONS`.

Every list of measures follows from :data:`MEASURES` (family name -> declaration, read-only): the grammar, the
metric classes, the trec_eval names (docs/architecture.md: what it drives, where a new measure goes).

Example:
    >>> from torchrank.functional import MEASURES
    >>> MEASURES["ndcg"].takes_k, MEASURES["ndcg"].ties, MEASURES["mean_rank"].higher_is_better
    (True, 'linear', False)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import torch
from torch import Tensor

from torchrank.functional import first_relevant, trec_extra
from torchrank.functional._measure import Kernel, fused_code
from torchrank.functional.average_precision import (
    _average_precision,
    _average_precision_options,
    _average_recall,
    _gap_options,
    _graded_average_precision,
    average_precision,
    average_recall,
    graded_average_precision,
)
from torchrank.functional.dcg import _dcg, _dcg_options, _ndcg, dcg, ndcg
from torchrank.functional.err import _err, _err_options, err
from torchrank.functional.kendall import kendall_tau
from torchrank.functional.precision import (
    _f1,
    _precision,
    _precision_options,
    _r_precision,
    _recall,
    f1,
    precision,
    r_precision,
    recall,
)
from torchrank.functional.rbp import _rbp, _rbp_options, rbp

__all__ = ["DECLARATIONS", "MEASURES", "TIE_FORMS", "Declaration", "TrecName", "grammar_names", "public_functions"]

#: How a family treats ``ties="average"``: ``"linear"`` (linear in per-position values: each tie group's mean
#: gives the exact expectation), ``"closed form"`` (an exact formula or recurrence per tie group) or
#: ``"refused"`` (no tie-averaged form: the family raises on tied scores under ``"average"``).
TIE_FORMS = ("linear", "closed form", "refused")
_TREC_SYNTAX = ("none", "cuts", "levels", "floats", "gains")
_TREC_KINDS = ("float", "long", "gm")
CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)  # trec_eval's default cut-offs


def _frozen(mapping: Mapping[str, object] | None = None) -> Mapping[str, object]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class TrecName:
    """A name trec_eval gives a family (``-m`` and its output), with trec_eval's parameter syntax.

    Attributes:
        name: trec_eval's name (``P``, ``ndcg_cut``, ``set_F``...).
        syntax: How ``name.params`` reads: ``"none"``, ``"cuts"`` (ints: one printed value per cut-off,
            ``P_5``), ``"levels"`` (floats: one value per level, ``iprec_at_recall_0.10``), ``"floats"`` (one
            value, printed ``name_params`` when given) or ``"gains"`` (``ndcg.level=gain,...``).
        default: The parameters without ``.params``.
        kind: ``"float"`` (mean over queries), ``"long"`` (a count: summed) or ``"gm"`` (geometric mean).
        params: Kernel parameters this name fixes, over the family's own.
        parsed: Maps the parsed parameters (levels, floats, gains) to kernel parameters.
        from_batch: Kernel parameters read from the evaluated :class:`~torchrank.io.TrecBatch` (``num_judged``).
    """

    name: str
    syntax: str = "none"
    default: tuple = ()
    kind: str = "float"
    params: Mapping[str, object] = field(default_factory=_frozen)
    parsed: Callable[[tuple], dict] | None = None
    from_batch: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.syntax not in _TREC_SYNTAX or self.kind not in _TREC_KINDS:
            raise ValueError(f"TrecName {self.name!r}: syntax in {_TREC_SYNTAX}, kind in {_TREC_KINDS}.")
        object.__setattr__(self, "params", _frozen(self.params))


@dataclass(frozen=True)
class Declaration:
    """One measure family.

    Attributes:
        name: The family's name in :func:`~torchrank.functional.evaluate`'s grammar (lower case).
        doc: One line: what it computes.
        ties: Its form under ``ties="average"``, one of :data:`TIE_FORMS`.
        kernel: ``(ranking, ks, **params) -> (values [Q, K], no_relevant [Q])`` (a ``_measure.Measure`` where it
            declares more); None for a family computed from the inputs, not a ranking (Kendall tau).
        aliases: Other grammar names (lower case; trec_eval's names of the same measure included).
        takes_k: Whether a name may carry a cut-off (``ndcg@10``).
        options: Maps the function's own options to kernel parameters, checked; ``params`` are its value at the
            function's defaults (and ``function_params``), so a grammar name and the function cannot drift apart.
        params: The kernel parameters of the family's name (``ndcg_exp``: exponential gain); from ``options`` if given.
        suffix_param: The parameter a ``.digits`` suffix sets (``rbp.95`` -> ``p = 0.95``), if any.
        higher_is_better: True, False (mean rank), or None (a count, a residual: no direction).
        empty_target_action: Whether it applies (False: defined without relevant items, as RBP's residual).
        grammar: Whether ``evaluate`` knows the name (False: trec_eval's own measures, reached by its names).
        function: The public function computing it, if any.
        function_params: Arguments of ``function`` that select this family (``ndcg_exp``: ``gain="exponential"``).
        metric: Name of the ``torchmetrics`` class :mod:`torchrank.metrics` derives, if any.
        plot_bounds: The class's ``plot_lower_bound`` and ``plot_upper_bound``.
        trec: trec_eval's names of the family.
    """

    name: str
    doc: str
    ties: str
    kernel: Kernel | None = None
    aliases: tuple[str, ...] = ()
    takes_k: bool = True
    options: Callable[..., dict[str, object]] | None = None
    params: Mapping[str, object] = field(default_factory=_frozen)
    suffix_param: str | None = None
    higher_is_better: bool | None = True
    empty_target_action: bool = True
    grammar: bool = True
    function: Callable[..., Tensor] | None = None
    function_params: Mapping[str, object] = field(default_factory=_frozen)
    metric: str | None = None
    plot_bounds: tuple[float | None, float | None] = (0.0, 1.0)
    trec: tuple[TrecName, ...] = ()

    def __post_init__(self) -> None:
        if self.ties not in TIE_FORMS:
            raise ValueError(f"Declaration {self.name!r}: `ties` must be one of {TIE_FORMS}, got {self.ties!r}.")
        if self.name != self.name.lower() or any(a != a.lower() for a in self.aliases):
            raise ValueError(f"Declaration {self.name!r}: grammar names are lower case.")
        if self.grammar and self.kernel is None:
            raise ValueError(f"Declaration {self.name!r}: a grammar name needs a kernel.")
        if self.options is not None and (self.params or self.function is None):
            raise ValueError(f"Declaration {self.name!r}: `options` derives `params` from `function`'s defaults.")
        object.__setattr__(self, "function_params", _frozen(self.function_params))
        object.__setattr__(self, "params", _frozen(self.kernel_params() if self.options else self.params))

    def kernel_params(self, **overrides: object) -> dict[str, object]:
        """The kernel parameters of the family with some options changed (``rbp.95``: ``p=0.95``), checked.

        Example:
            >>> MEASURES["rbp"].kernel_params(p=0.95)
            {'p': 0.95, 'max_label': None, 'residual': False}
        """
        if self.options is None:
            return {**self.params, **overrides}
        return self.options(**{**_option_defaults(self.function, self.options), **self.function_params, **overrides})

    def fused_code(self, **overrides: object) -> int | None:
        """The fused kernel's column (:mod:`~torchrank.functional._fused_columns` code, as the kernel declares it)
        computing the family with some options changed; None where it does not.

        Example:
            >>> MEASURES["rbp"].fused_code(p=0.95) == MEASURES["rbp"].fused_code(), MEASURES["rbp_resid"].fused_code()
            (True, None)
        """
        return None if self.kernel is None else fused_code(self.kernel, self.kernel_params(**overrides))

    @property
    def public_function(self) -> Callable[..., Tensor] | None:
        """``function`` with ``function_params`` applied (what the class and the test suite call)."""
        if self.function is None or not self.function_params:
            return self.function
        return functools.partial(self.function, **self.function_params)


@functools.cache
def _option_defaults(function: Callable[..., Tensor], options: Callable[..., dict]) -> dict[str, object]:
    """The defaults ``function``'s signature gives the options ``options`` takes (read once)."""
    taken = inspect.signature(options).parameters
    return {n: p.default for n, p in inspect.signature(function).parameters.items() if n in taken}


def _gain_map(gains: tuple[tuple[float, float], ...]) -> Callable[[Tensor], Tensor]:
    """trec_eval's ``ndcg.level=gain,...``: listed labels get the given gain, the others their own value. A gain for a
    level <= 0 is refused: torchrank's label 0 is also padding and unjudged, which gain nothing (``gain_values``)."""
    refused = [f"{level:g}={g:g}" for level, g in gains if level <= 0 and g != 0]
    if refused:
        raise ValueError(f"ndcg gains for levels <= 0 ({', '.join(refused)}) are not supported: items that are not "
                         "relevant gain 0 in torchrank.")

    def gain(labels: Tensor) -> Tensor:
        out = labels.to(torch.float64)
        for level, g in gains:
            out = torch.where(labels == level, torch.as_tensor(g, dtype=out.dtype, device=out.device), out)
        return out

    return gain


_LOWER = (1.0, None)  # plot bounds of a position: 1 at best, no upper bound

#: Every family, in the order ``evaluate``'s grammar lists them.
DECLARATIONS: tuple[Declaration, ...] = (
    Declaration("precision", "Relevant items in the top k / k (also when the list is shorter).", "linear", _precision,
        aliases=("p", "set_p"), function=precision, options=_precision_options, metric="Precision",
        trec=(TrecName("P", "cuts", CUTS), TrecName("set_P"))),
    Declaration("recall", "Relevant items in the top k / R.", "linear", _recall, aliases=("recall_cut", "set_recall"),
        function=recall, metric="Recall", trec=(TrecName("recall", "cuts", CUTS), TrecName("set_recall"))),
    Declaration("f1", "2PR / (P + R) at k.", "linear", _f1, aliases=("set_f",), function=f1, metric="F1"),
    Declaration("success", "1 if a relevant item is in the top k.", "closed form", first_relevant._hit_rate,
        aliases=("hit_rate", "hit"), function=first_relevant.hit_rate, metric="HitRate",
        trec=(TrecName("success", "cuts", (1, 5, 10)),)),
    Declaration("map", "Average precision: P@i summed over relevant ranks i <= k, / R.", "closed form",
        _average_precision, aliases=("ap", "map_cut", "average_precision"), function=average_precision,
        options=_average_precision_options, metric="MAP",
        trec=(TrecName("map"), TrecName("gm_map", kind="gm"), TrecName("map_cut", "cuts", CUTS))),
    Declaration("mar", "Average recall: R@i summed over relevant ranks i <= k, / R.", "closed form", _average_recall,
        aliases=("average_recall",), function=average_recall, metric="MAR"),
    Declaration("rprec", "Precision at R.", "linear", _r_precision, aliases=("r_precision",), takes_k=False,
        function=r_precision, metric="RPrecision", trec=(TrecName("Rprec"),)),
    Declaration("ndcg", "DCG@k / ideal DCG@k, linear gain, log2 discount.", "linear", _ndcg, aliases=("ndcg_cut",),
        function=ndcg, options=_dcg_options, metric="NDCG",
        trec=(TrecName("ndcg", "gains", parsed=lambda gains: {"gain": _gain_map(gains)}),
              TrecName("ndcg_cut", "cuts", CUTS))),
    Declaration("ndcg_exp", "NDCG with exponential gain 2^label - 1.", "linear", _ndcg, aliases=("ndcg_burges",),
        function=ndcg, options=_dcg_options, function_params={"gain": "exponential"}),
    Declaration("dcg", "sum of label / log2(i + 1) over the top k.", "linear", _dcg, function=dcg, options=_dcg_options,
        metric="DCG", plot_bounds=(0.0, None)),
    Declaration("dcg_exp", "DCG with exponential gain 2^label - 1.", "linear", _dcg, aliases=("dcg_burges",),
        function=dcg, options=_dcg_options, function_params={"gain": "exponential"}),
    Declaration("mrr", "1 / rank of the first relevant item (0 past k).", "closed form",
        first_relevant._reciprocal_rank, aliases=("rr", "recip_rank", "reciprocal_rank"),
        function=first_relevant.reciprocal_rank, metric="MRR", trec=(TrecName("recip_rank"),)),
    Declaration("err", "Expected reciprocal rank; exponential utility, top of scale: each query's top label.",
        "closed form", _err, function=err, options=_err_options, metric="ERR"),
    Declaration("rbp", "Rank-biased precision, p = 0.9 (rbp.95: p = 0.95).", "linear", _rbp, suffix_param="p",
        function=rbp, options=_rbp_options, metric="RBP", trec=(TrecName("rbp"),)),
    Declaration("rbp_resid", "RBP's residual: the most unjudged and unseen items could add.", "linear", _rbp,
        suffix_param="p", higher_is_better=None, empty_target_action=False, function=rbp, options=_rbp_options,
        function_params={"residual": True}, trec=(TrecName("rbp_resid"),)),
    Declaration("mean_rank", "Mean position of the relevant items (k + 1 past the cut-off).", "linear",
        first_relevant._mean_rank, higher_is_better=False, function=first_relevant.mean_rank, metric="MeanRank",
        plot_bounds=_LOWER),
    Declaration("frp", "Position of the first relevant item (k + 1 if none in the top k).", "closed form",
        first_relevant._first_relevant_position, aliases=("first_relevant_position",), higher_is_better=False,
        function=first_relevant.first_relevant_position, metric="FirstRelevantPosition", plot_bounds=_LOWER),
    Declaration("gap", "Graded average precision, uniform grade probabilities (Robertson et al. 2010).", "closed form",
        _graded_average_precision, aliases=("graded_average_precision",), function=graded_average_precision,
        options=_gap_options, metric="GAP"),
    Declaration("bpref", "Binary preference over judged items (trec_eval bpref).", "refused", trec_extra._bpref,
        takes_k=False, function=trec_extra.bpref,
        trec=(TrecName("bpref", from_batch=("num_judged",)),
              TrecName("gm_bpref", kind="gm", from_batch=("num_judged",)))),
    # computed from the inputs, not from a ranking: a function and classes, no grammar name
    Declaration("kendall", "Kendall's tau between the ranking and the label order.", "closed form", takes_k=False,
        grammar=False, function=kendall_tau, function_params={"distance": False}, metric="KendallTau",
        plot_bounds=(-1.0, 1.0)),
    Declaration("kendall_distance", "Share of label-ordered pairs ranked wrongly.", "closed form", takes_k=False,
        grammar=False, higher_is_better=False, function=kendall_tau, function_params={"distance": True},
        metric="KendallTauDistance"),
    # incomplete judgments
    Declaration("relative_p", "Relevant items in the top k / min(k, R): capped recall (BEIR's R_cap@k).", "linear",
        trec_extra._relative_precision, aliases=("recall_cap", "r_cap"), function=trec_extra.recall_cap,
        metric="RecallCap", trec=(TrecName("relative_P", "cuts", CUTS), TrecName("set_relative_P"))),
    Declaration("judged", "Share of the top k with a judgment (ir_measures' Judged@k; / min(k, retrieved)).", "linear",
        trec_extra._judged_fraction, higher_is_better=None, empty_target_action=False,
        function=trec_extra.judged_fraction, metric="JudgedFraction"),
    Declaration(
        "infap", "Inferred AP from a judged sample of the pool (trec_eval infAP; qrels label -1: pooled, unjudged).",
        "refused", trec_extra._inferred_ap, aliases=("inferred_average_precision", "inf_ap"), takes_k=False,
        function=trec_extra.inferred_average_precision, metric="InfAP",
        trec=(TrecName("infAP", from_batch=("pooled_unjudged",)),)),
    # trec_eval's own measures, reached through their trec_eval names
    Declaration("set", "Measures of the retrieved set: set_map, set_F.", "linear", trec_extra._set_measure,
        takes_k=False, grammar=False,
        trec=(TrecName("set_map", params={"which": "map"}),
              TrecName("set_F", "floats", (1.0,), params={"which": "F"}, parsed=lambda v: {"beta": v[0]}))),
    Declaration("iprec_at_recall", "Interpolated precision at recall levels.", "refused", trec_extra._iprec,
        takes_k=False, grammar=False,
        trec=(TrecName("iprec_at_recall", "levels", trec_extra.IPREC_LEVELS, parsed=lambda v: {"levels": v}),)),
    Declaration("11pt_avg", "Mean interpolated precision over recall levels.", "refused", trec_extra._eleven_point,
        takes_k=False, grammar=False,
        trec=(TrecName("11pt_avg", "floats", trec_extra.IPREC_LEVELS, parsed=lambda v: {"levels": v}),)),
    Declaration("rprec_mult", "Precision at multiples of R.", "linear", trec_extra._rprec_mult, takes_k=False,
        grammar=False,
        trec=(TrecName("Rprec_mult", "levels", trec_extra.RPREC_MULTIPLES, parsed=lambda v: {"multiples": v}),)),
    Declaration("utility", "a rel_ret + b nonrel_ret + c rel_not_ret + d nonrel_not_ret.", "linear",
        trec_extra._utility, takes_k=False, grammar=False, empty_target_action=False,
        trec=(TrecName("utility", "floats", (1.0, -1.0, 0.0, 0.0), parsed=lambda v: {"weights": v}),)),
    Declaration("unj", "Share of the top k without a judgment.", "linear", trec_extra._unjudged, grammar=False,
        higher_is_better=None, empty_target_action=False, trec=(TrecName("unj", "cuts", (5, 10, 20)),)),
    Declaration("bin_g", "Binary G: mean over relevant items of 1 / log2(2 + non-relevant items above).", "refused",
        trec_extra._bin_g, takes_k=False, grammar=False, trec=(TrecName("binG"),)),
    Declaration("g", "Normalized gain G (trec_eval's experimental measure, default gains).", "refused", trec_extra._g,
        takes_k=False, grammar=False, trec=(TrecName("G"),)),
    Declaration("ndcg_rel", "NDCG averaged over the items with a positive gain.", "refused", trec_extra._ndcg_rel,
        takes_k=False, grammar=False, trec=(TrecName("ndcg_rel"),)),
    Declaration("rndcg", "NDCG averaged at the R levels of the ideal gains.", "refused", trec_extra._rndcg,
        takes_k=False, grammar=False, trec=(TrecName("Rndcg"),)),
    Declaration("count", "Counts: retrieved, relevant, relevant retrieved, judged non-relevant retrieved.", "linear",
        trec_extra._count, takes_k=False, grammar=False, higher_is_better=None, empty_target_action=False,
        trec=tuple(TrecName(f"num_{what}", kind="long", params={"what": what})
                   for what in ("ret", "rel", "rel_ret", "nonrel_judged_ret"))),
)


def _check_names(declarations: tuple[Declaration, ...]) -> None:
    """Every family, grammar name, trec_eval name and class name is declared once."""
    seen: dict[tuple[str, str], str] = {}
    for spec in declarations:
        names = [("family", spec.name)]
        names += [("grammar", n) for n in ((spec.name, *spec.aliases) if spec.grammar else ())]
        names += [("trec_eval", t.name) for t in spec.trec] + [("class", spec.metric)] * (spec.metric is not None)
        for kind, name in names:
            if (kind, name) in seen:
                raise ValueError(f"The {kind} name {name!r} is declared by {seen[kind, name]!r} and {spec.name!r}.")
            seen[kind, name] = spec.name


_check_names(DECLARATIONS)

#: Read-only mapping of family name to :class:`Declaration`.
MEASURES: Mapping[str, Declaration] = MappingProxyType({spec.name: spec for spec in DECLARATIONS})


_GRAMMAR = MappingProxyType({n: spec for spec in DECLARATIONS if spec.grammar for n in (spec.name, *spec.aliases)})


def grammar_names() -> Mapping[str, Declaration]:
    """Every name ``evaluate`` accepts before its cut-off (families and aliases) -> its declaration."""
    return _GRAMMAR


def public_functions() -> dict[str, Callable[..., Tensor]]:
    """The declared public functions by name (what :mod:`torchrank.functional` exports)."""
    return {spec.function.__name__: spec.function for spec in DECLARATIONS if spec.function is not None}


def trec_names() -> Iterator[tuple[TrecName, Declaration]]:
    """Every trec_eval name with its family, in declaration order."""
    return ((trec, spec) for spec in DECLARATIONS for trec in spec.trec)
