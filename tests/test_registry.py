"""The measure registry: read-only, and every place derived from it agrees with the declarations."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import pickle
import re
from pathlib import Path

import pytest
import torch
from conftest import ALL_MEASURES, NOT_IN_SHARED_TESTS

import torchrank.functional as F
import torchrank.metrics.classes as classes
from torchrank import compare
from torchrank.functional._fused_columns import CODES
from torchrank.functional._measure import measure
from torchrank.functional.registry import DECLARATIONS, Declaration, TrecName, _check_names
from torchrank.io import trec_eval

GRAMMAR = [spec for spec in F.MEASURES.values() if spec.grammar]
DOCS = (Path(__file__).parent.parent / "docs" / "measures.md").read_text()


def _data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    preds = torch.round(torch.randn(25, 10, generator=g, dtype=torch.float64) * 2) / 2  # ties
    target = torch.randint(0, 4, (25, 10), generator=g).to(torch.float64)
    target[0] = 0
    return preds, target


def test_measures_are_read_only():
    with pytest.raises(TypeError):
        F.MEASURES["mine"] = F.MEASURES["map"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        F.MEASURES["map"].higher_is_better = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        F.MEASURES["ndcg"].params["gain"] = "exponential"  # type: ignore[index]


def test_declarations_are_checked():
    with pytest.raises(ValueError, match="ties"):
        Declaration("x", "doc", "mostly", F.MEASURES["map"].kernel)
    with pytest.raises(ValueError, match="needs a kernel"):
        Declaration("x", "doc", "linear")
    with pytest.raises(ValueError, match="syntax"):
        TrecName("x", "commas")
    with pytest.raises(ValueError, match="derives `params`"):
        Declaration("x", "doc", "linear", F.MEASURES["rbp"].kernel, options=F.MEASURES["rbp"].options)
    twin = dataclasses.replace(F.MEASURES["precision"], name="precision2", metric=None, trec=())
    with pytest.raises(ValueError, match="grammar name 'p' is declared by 'precision' and 'precision2'"):
        _check_names((*DECLARATIONS, twin))


def test_each_code_of_the_fused_kernel_is_declared_once_and_no_other():
    """The families the fused kernel computes, as declared, take every code it has (tests/test_backends.py compares
    each with the numpy backend, so a code its branches lack fails there) and no other: a claim of a code outside
    :data:`CODES` is refused."""
    declared = [spec.fused_code() for spec in DECLARATIONS]
    assert sorted(code for code in declared if code is not None) == sorted(CODES)
    recall = F.MEASURES["recall"].kernel.kernel
    with pytest.raises(ValueError, match="no column code 99"):
        measure(fused=99)(recall)
    claims = measure(fused=lambda params: len(CODES))(recall)
    with pytest.raises(ValueError, match=f"no column code {len(CODES)}"):
        Declaration("x", "doc", "linear", claims).fused_code()


def test_the_fused_kernel_takes_the_options_it_computes_only():
    """Each declared rule: the options the fused kernel computes give its column, the others none (the torch backend
    computes them)."""
    ndcg, rbp = F.MEASURES["ndcg"], F.MEASURES["rbp"]
    assert ndcg.fused_code() != F.MEASURES["ndcg_exp"].fused_code() == ndcg.fused_code(gain="exponential")
    assert rbp.fused_code(p=0.5, max_label=4) == rbp.fused_code() and F.MEASURES["rbp_resid"].fused_code() is None
    refused = [
        ndcg.fused_code(discount="power"), ndcg.fused_code(log_base=10), ndcg.fused_code(gain=lambda x: x),
        F.MEASURES["dcg"].fused_code(discount="linear"), F.MEASURES["precision"].fused_code(adaptive_k=True),
        F.MEASURES["map"].fused_code(denominator="found"), F.MEASURES["err"].fused_code(max_label=4),
        F.MEASURES["err"].fused_code(transform="sigmoid"),
    ]
    assert refused == [None] * len(refused)


def test_a_declared_kernel_is_its_function_to_callers():
    kernel = F.MEASURES["precision"].kernel
    assert kernel.__name__ == "_precision" and "adaptive_k" in inspect.signature(kernel).parameters
    assert pickle.loads(pickle.dumps(kernel)) is kernel


@pytest.mark.parametrize("spec", GRAMMAR, ids=[s.name for s in GRAMMAR])
def test_every_grammar_name_gives_the_public_function(spec):
    """Each name and alias, with and without a cut-off, is its family's function (``function_params`` applied); a
    trec_eval cut alias (``ndcg_cut``) takes a cut-off only."""
    preds, target = _data()
    ties = "first" if spec.ties == "refused" else "average"
    fn = spec.public_function
    names = [spec.name, *spec.aliases]
    whole = [n for n in names if not n.endswith("_cut")]
    asked = whole + ([f"{n}@3" for n in names] if spec.takes_k else [])
    out = F.evaluate(preds, target, asked, ties=ties, reduction="none")
    for name in names:
        assert F.parse_measure(f"{name.upper()}@3" if name not in whole else name.upper()).family == spec.name
        if name in whole:
            torch.testing.assert_close(out[name], fn(preds, target, ties=ties, reduction="none"))
        else:
            with pytest.raises(ValueError, match="needs a cut-off"):
                F.parse_measure(name)
        if spec.takes_k:
            torch.testing.assert_close(out[f"{name}@3"], fn(preds, target, k=3, ties=ties, reduction="none"))
        else:
            with pytest.raises(ValueError, match="takes no cut-off"):
                F.parse_measure(f"{name}@3")


def test_suffix_parameters():
    preds, target = _data()
    out = F.evaluate(preds, target, ["rbp.95", "rbp_resid.8", "rbp_95"], reduction="none")
    torch.testing.assert_close(out["rbp.95"], F.rbp(preds, target, p=0.95, reduction="none"))
    torch.testing.assert_close(out["rbp_resid.8"], F.rbp(preds, target, p=0.8, residual=True, reduction="none"))
    torch.testing.assert_close(out["rbp_95"], F.rbp(preds, target, k=95, reduction="none"))
    with pytest.raises(ValueError, match=r"`p` must lie in \(0, 1\), got 0.0"):  # checked as the function checks it
        F.evaluate(preds, target, ["rbp.0"])


def _comparable(params: dict) -> dict:
    """Partials (DCG's discount weights) compare by what they call and with what."""
    return {k: (v.func, v.args, v.keywords) if isinstance(v, functools.partial) else v for k, v in params.items()}


def test_grammar_parameters_are_the_functions_defaults():
    """A family with ``options`` takes its name's kernel parameters from its function's signature."""
    import inspect

    for spec in F.MEASURES.values():
        if spec.options is None:
            continue
        signature = inspect.signature(spec.function).parameters
        taken = inspect.signature(spec.options).parameters
        defaults = {name: signature[name].default for name in taken}
        derived = spec.options(**{**defaults, **spec.function_params})
        assert _comparable(dict(spec.params)) == _comparable(derived)
    assert F.MEASURES["ndcg_exp"].params["gain"] == "exponential" and F.MEASURES["ndcg"].params["gain"] == "linear"


def test_functions_and_classes_are_derived():
    for spec in F.MEASURES.values():
        if spec.function is not None:
            assert getattr(F, spec.function.__name__) is spec.function
            assert spec.function.__name__ in F.__all__
        if spec.metric is not None:
            cls = getattr(classes, spec.metric)
            assert cls.higher_is_better is spec.higher_is_better
            assert (cls.plot_lower_bound, cls.plot_upper_bound) == spec.plot_bounds
    # besides the declared measures: the utilities, id-list input, corpus search, and per-query AUROC/GAUC (not
    # rank measures of the registry's Ranking: they count pairs, and GAUC weights queries)
    utilities = {"MEASURES", "evaluate", "memory_budget", "current_memory_budget", "parse_measure", "ids_to_dense",
                 "top_k_ids", "catalogue_to_dense", "auroc", "gauc", "precision_recall_curve",
                 "recall_at_fixed_precision", "search", "merge_top_k"}
    assert not set(F.__all__) - utilities - {
        s.function.__name__ for s in F.MEASURES.values() if s.function is not None
    }


@pytest.mark.parametrize("spec", [s for s in F.MEASURES.values() if s.metric], ids=lambda s: s.metric)
def test_each_class_equals_its_function(spec):
    preds, target = _data(1)
    metric = getattr(classes, spec.metric)()
    metric.update(preds[:11], target[:11])
    metric.update(preds[11:], target[11:])
    expected = spec.public_function(preds, target)
    torch.testing.assert_close(metric.compute(), expected, check_dtype=False, rtol=1e-5, atol=1e-6)


def test_a_fixed_argument_names_the_class_that_has_it():
    with pytest.raises(ValueError, match="use `KendallTauDistance`"):
        classes.KendallTau(distance=True)
    with pytest.raises(ValueError, match="use `KendallTau`"):
        classes.KendallTauDistance(distance=False)
    classes.KendallTauDistance(distance=True)  # the value it has anyway


def test_compare_reads_the_declared_direction():
    for spec in GRAMMAR:
        assert compare._lower_is_better(spec.name) is (spec.higher_is_better is False)
    assert compare._lower_is_better("frp@10") and compare._lower_is_better("mean_rank")
    assert not compare._lower_is_better("gap@5")


def test_the_trec_eval_table_is_declared_in_trec_evals_order():
    declared = [t.name for spec in F.MEASURES.values() for t in spec.trec]
    assert set(trec_eval.ALL_TREC) == {"runid", "num_q", "relstring", *declared}  # relstring: text, io's own
    # trec_eval's measures.c order, which its -m all_trec prints in
    assert trec_eval.ALL_TREC == (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
        "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg", "binG",
        "G", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success", "set_P", "set_relative_P",
        "set_recall", "set_map", "set_F",
        "num_nonrel_judged_ret", "rbp", "rbp_resid", "unj",
    )


def test_set_measures_are_the_whole_list_values():
    """set_P, set_recall, set_relative_P are one kernel with P@k, recall@k, relative_P@k: at the whole list."""
    from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN

    scores = trec_eval.score_run(SAMPLE_QRELS, SAMPLE_RUN, ["set_P", "set_recall", "P.1000", "recall.1000"])
    batch_len = 1000  # the sample run retrieves fewer than 1000 documents per query, so P_1000 = hits / 1000
    num_ret = trec_eval.score_run(SAMPLE_QRELS, SAMPLE_RUN, ["num_ret"]).values["num_ret"]
    assert bool((num_ret < batch_len).all())
    torch.testing.assert_close(scores.values["set_P"], scores.values["P_1000"] * batch_len / num_ret)
    torch.testing.assert_close(scores.values["set_recall"], scores.values["recall_1000"])


def test_refused_tie_forms_refuse_and_the_others_do_not():
    preds, target = _data(2)
    for spec in F.MEASURES.values():
        fn = spec.public_function
        if fn is None:
            continue
        if spec.ties == "refused":
            with pytest.raises(ValueError, match="no tie-averaged form"):
                fn(preds, target, ties="average")
        else:
            assert torch.isfinite(fn(preds, target, ties="average"))


def test_the_shared_test_lists_follow_the_declarations():
    listed = {name for name, _, _ in ALL_MEASURES}
    with_function = {s.name for s in F.MEASURES.values() if s.function is not None}
    assert listed | set(NOT_IN_SHARED_TESTS) == with_function
    assert "gap" in listed  # declared, hence in the tie oracle and the invariance tests
    for name in NOT_IN_SHARED_TESTS:  # each has its reason
        spec = F.MEASURES[name]
        assert spec.ties == "refused" or not spec.empty_target_action


def test_the_grammar_docstring_lists_every_name():
    from torchrank.functional import measures

    doc = measures.__doc__
    for spec in GRAMMAR:
        for name in (spec.name, *spec.aliases):
            assert f"``{name}``" in doc


@pytest.mark.parametrize("spec", GRAMMAR, ids=[s.name for s in GRAMMAR])
def test_docs_name_every_grammar_family(spec):
    """docs/measures.md, checked against the registry: each family's grammar name appears (as code)."""
    for name in (spec.name, *spec.aliases):
        assert re.search(rf"`{re.escape(name)}[`@_.]", DOCS, re.IGNORECASE), name
    if spec.function is not None:
        assert f"### {spec.function.__name__}" in DOCS or f"`{spec.function.__name__}`" in DOCS


def test_partial_public_function_keeps_its_name():
    spec = F.MEASURES["ndcg_exp"]
    assert isinstance(spec.public_function, functools.partial)
    assert spec.public_function.func is F.ndcg and spec.public_function.keywords == {"gain": "exponential"}


def test_trec_ndcg_gains_for_levels_that_are_not_relevant_are_refused():
    """trec_eval's ``ndcg.0=1`` gives judged non-relevant documents a gain; torchrank's label 0 is also padding and
    unjudged, which gain nothing: refused by name rather than computed differently. Positive levels map."""
    with pytest.raises(ValueError, match=r"ndcg gains for levels <= 0 \(0=1, -1=2\) are not supported"):
        trec_eval.parse_measures(["ndcg.0=1,-1=2,2=3"])
    assert [item.name for item in trec_eval.parse_measures(["ndcg.1=3,2=9,0=0"])] == ["ndcg_1=3,2=9,0=0"]
