"""Bad input gets an error that names the argument and what was expected."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import torchrank.functional as F

P = torch.tensor([[0.3, 0.2, 0.1]])
T = torch.tensor([[1, 0, 1]])
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"target": torch.tensor([[1, 0]])}, ValueError, r"`preds` and `target` must have the same shape"),
        ({"target": T.to("meta")}, ValueError, r"`target` must be on the device of `preds`"),
        ({"preds": P.tolist()}, TypeError, r"`preds` must be a torch.Tensor"),
        ({"preds": P > 0}, TypeError, r"`preds` must hold real scores"),
        ({"k": 0}, ValueError, r"`k` must hold positive ints"),
        ({"k": -3}, ValueError, r"`k` must hold positive ints"),
        ({"k": 2.0}, TypeError, r"`k` must be a positive int"),
        ({"k": True}, TypeError, r"`k` must be a positive int"),
        ({"k": []}, ValueError, r"`k` must be a positive int or a non-empty sequence"),
        ({"k": [5, 0]}, ValueError, r"`k` must hold positive ints"),
        ({"k": "10"}, TypeError, r"`k`"),
        ({"preds": torch.tensor([[0.3, float("nan"), 0.1]])}, ValueError, r"`preds` contains NaN"),
        ({"target": torch.tensor([[1, -1, 0]])}, ValueError, r"`target` must hold labels >= 0"),
        ({"target": torch.tensor([[1.0, float("nan"), 0]])}, ValueError, r"`target` contains NaN"),
        ({"target": torch.tensor([[float("inf"), 0, 1.0]])}, ValueError, r"`target` contains NaN or infinite"),
        ({"target": torch.tensor([[-float("inf"), 0, 1.0]])}, ValueError, r"`target` contains NaN or infinite"),
        ({"preds": torch.empty(1, 0), "target": torch.empty(1, 0)}, ValueError, r"`preds` must not be empty"),
        ({"preds": torch.empty(0, 3), "target": torch.empty(0, 3)}, ValueError, r"`preds` must not be empty"),
        ({"mask": torch.ones(1, 3)}, TypeError, r"`mask` must be a bool tensor"),
        ({"mask": torch.ones(1, 2, dtype=torch.bool)}, ValueError, r"`mask` must have the shape of `preds`"),
        ({"ideal_target": torch.ones(2, 3)}, ValueError, r"`ideal_target` must have shape"),
        ({"ideal_target": torch.tensor([[1, -2]])}, ValueError, r"`ideal_target` must hold finite labels >= 0"),
        ({"ideal_target": torch.tensor([[float("nan"), 1.0]])}, ValueError, r"`ideal_target` must hold finite"),
        ({"ideal_target": torch.tensor([[float("inf"), 1.0]])}, ValueError, r"`ideal_target` must hold finite"),
        ({"ties": "random"}, ValueError, r"`ties` must be one of"),
        ({"reduction": "avg"}, ValueError, r"`reduction` must be one of"),
        ({"empty_target_action": "ignore"}, ValueError, r"`empty_target_action` must be one of"),
        ({"relevance_threshold": 0}, ValueError, r"`relevance_threshold` must be > 0"),
        ({"relevance_threshold": "1"}, TypeError, r"`relevance_threshold` must be a number"),
        ({"gain": "quadratic"}, ValueError, r"`gain` must be one of"),
        ({"discount": "sqrt"}, ValueError, r"`discount` must be one of"),
        ({"log_base": 1.0}, ValueError, r"`log_base` must be a finite number > 1"),
        ({"log_base": float("inf")}, ValueError, r"`log_base` must be a finite number > 1"),  # was NDCG NaN
    ],
)
def test_bad_arguments(kwargs, error, match):
    call = {"preds": P, "target": T} | kwargs
    with pytest.raises(error, match=match):
        F.ndcg(call.pop("preds"), call.pop("target"), **call)


@pytest.mark.parametrize(
    ("indexes", "error", "match"),
    [
        (torch.tensor([0.0, 0.0, 1.0]), TypeError, r"`indexes` must be an integer tensor"),
        (torch.tensor([0, 1]), ValueError, r"`preds`, `target` and `indexes` must be 1-D of equal length"),
        ([0, 0, 1], TypeError, r"`indexes` must be a torch.Tensor"),
    ],
)
def test_bad_indexes(indexes, error, match):
    with pytest.raises(error, match=match):
        F.precision(P[0], T[0], indexes=indexes)


@pytest.mark.parametrize("fn", [F.ndcg, F.dcg, F.err, F.rbp, F.precision])
@pytest.mark.parametrize("layout", ["dense", "flat"])
def test_infinite_labels_are_refused_not_valued(fn, layout):
    """An infinite label has no finite gain: NDCG, ERR and RBP were NaN and DCG inf, with no error, and an infinite or
    NaN ideal label made NDCG 0 (flat input's NaN was a silent "not given"). validate_args refuses them all."""
    preds, target, ideal = P[0], torch.tensor([float("inf"), 0, 1.0]), torch.tensor([1.0, 0, 1])
    extra = {"indexes": torch.tensor([0, 0, 1])} if layout == "flat" else {}
    if layout == "dense":
        preds, target, ideal = preds[None], target[None], ideal[None]
    with pytest.raises(ValueError, match=r"`target` contains NaN or infinite labels"):
        fn(preds, target, **extra)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"`ideal_target` must hold finite labels >= 0"):
            fn(preds, ideal, ideal_target=torch.where(ideal > 0, bad, ideal), **extra)
    finite = fn(preds, ideal, ideal_target=ideal, **extra)  # the finite labels as before
    assert torch.isfinite(finite).all()


def test_a_single_score_is_not_a_list():
    with pytest.raises(ValueError, match=r"`preds` must hold a list of scores .* got a 0-d tensor"):
        F.ndcg(torch.tensor(0.5), torch.tensor(1))
    with pytest.raises(ValueError, match=r"0-d tensor"):
        F.evaluate(torch.tensor(0.5), torch.tensor(1), ["map"])


def test_flat_input_rejects_a_misshapen_ideal_target_and_an_all_false_mask():
    with pytest.raises(ValueError, match="`ideal_target` must hold one label per item, shaped as `preds`"):
        F.recall(P[0], T[0], indexes=torch.tensor([0, 0, 1]), ideal_target=T[0][:2])
    with pytest.raises(ValueError, match="`mask` leaves no item"):
        F.recall(P[0], T[0], indexes=torch.tensor([0, 0, 1]), mask=torch.zeros(3, dtype=torch.bool))


def test_measure_specific_arguments():
    with pytest.raises(ValueError, match=r"`p` must lie in \(0, 1\)"):
        F.rbp(P, T, p=1.0)
    with pytest.raises(ValueError, match=r"`max_label` must be a finite number > 0"):
        F.err(P, T, max_label=0)
    for fn in (F.err, F.rbp):  # an infinite top of the scale gave 0 for every query
        with pytest.raises(ValueError, match=r"`max_label` must be a finite number > 0, got inf"):
            fn(P, T, max_label=float("inf"))
    with pytest.raises(ValueError, match=r"label above `max_label=1`"):
        F.err(P, torch.tensor([[2, 0, 1]]), max_label=1)
    with pytest.raises(ValueError, match="`transform` must be one of"):
        F.err(P, T, transform="linear")
    with pytest.raises(ValueError, match="`ties` must be one of"):
        F.kendall_tau(P, T, ties="dense")


def test_unknown_measure_names_suggest_the_closest_or_list_the_grammar():
    with pytest.raises(ValueError, match=r"^Unknown measure 'ndgc@10'; did you mean 'ndcg@10'\?$"):
        F.evaluate(P, T, ["ndcg@10", "ndgc@10"])
    with pytest.raises(ValueError, match=r"'Precison_5'; did you mean 'precision_5' or "):
        F.evaluate(P, T, ["Precison_5"])
    with pytest.raises(ValueError, match=r"'ndcg@ten': a cut-off is '@k' with k a positive integer"):
        F.evaluate(P, T, ["ndcg@ten"])
    with pytest.raises(ValueError, match=r"Unknown measure 'qwerty': expected .*Families: .*'ndcg'"):
        F.evaluate(P, T, ["qwerty"])
    with pytest.raises(ValueError, match="rprec takes no cut-off"):
        F.evaluate(P, T, ["rprec@5"])
    with pytest.raises(ValueError, match="at least one measure"):
        F.evaluate(P, T, [])
    with pytest.raises(TypeError, match="must be a string"):
        F.parse_measure(10)


@pytest.mark.parametrize(
    ("name", "family", "k", "params"),
    [
        ("ndcg@10", "ndcg", 10, ()), ("NDCG_CUT_10", "ndcg", 10, ()), ("ndcg_cut.10", "ndcg", 10, ()),
        ("P_5", "precision", 5, ()), ("P.5", "precision", 5, ()), ("p@5", "precision", 5, ()),
        ("map", "map", None, ()), ("map_cut_100", "map", 100, ()), ("recip_rank", "mrr", None, ()),
        ("Rprec", "rprec", None, ()), ("success_1", "success", 1, ()), ("rbp.95", "rbp", None, (("p", 0.95),)),
        ("rbp_resid", "rbp_resid", None, ()), ("ndcg_burges@5", "ndcg_exp", 5, ()), ("err@20", "err", 20, ()),
    ],
)
def test_measure_grammar(name, family, k, params):
    parsed = F.parse_measure(name)
    assert (parsed.name, parsed.family, parsed.k, parsed.params) == (name, family, k, params)


@pytest.mark.parametrize(("name", "whole"), [("ndcg_cut", "ndcg"), ("MAP_CUT", "map"), ("recall_cut", "recall")])
def test_a_cut_family_without_a_cut_off_is_refused(name, whole):
    """trec_eval's ``-m ndcg_cut`` means nine cut-offs: ``evaluate`` gives no whole-list value under that name."""
    with pytest.raises(ValueError, match=f"needs a cut-off .* the whole list is '{whole}'"):
        F.parse_measure(name)


def test_bpref_refuses_tie_averaging_on_tied_scores():
    """bpref has no tie-averaged form: tied input with ties='average' is an error, not an arbitrary order."""
    tied, untied = torch.tensor([[1.0, 1.0, 0.5, 0.2]]), torch.tensor([[4.0, 3.0, 0.5, 0.2]])
    target = torch.tensor([[0, 1, 1, 0]])
    with pytest.raises(ValueError, match="bpref has no tie-averaged form"):
        F.evaluate(tied, target, ["bpref"])
    assert F.evaluate(tied, target, ["bpref"], ties="first")["bpref"] == 0.5
    untied_value = F.evaluate(untied, target, ["bpref"])["bpref"]
    assert untied_value == F.evaluate(untied, target, ["bpref"], ties="first")["bpref"]


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.float32, torch.float64, torch.float16,
              torch.bfloat16],
)
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_negative_labels_are_refused_in_every_dtype(dtype, strided):
    """The label check reads CPU labels by numpy where it can (bfloat16 by torch): a negative label of any dtype,
    in a contiguous or a strided tensor, is refused, and labels >= 0 pass."""
    target = torch.tensor([[2, 0, 1, 0], [1, 1, -1, 0]], dtype=dtype)
    preds = torch.rand(2, 4)
    if strided:
        target, preds = target.t().contiguous().t(), preds.t().contiguous().t()
    with pytest.raises(ValueError, match=r"`target` must hold labels >= 0"):
        F.ndcg(preds, target)
    F.ndcg(preds, target.clamp_min(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["contiguous", "broadcast", "large"])
def test_nan_scores_are_refused_in_every_layout(dtype, layout):
    """The value checks read the smallest and largest score (numpy in cache, torch's one pass past it, one row of a
    broadcast): a NaN anywhere is refused, however the scores are laid out, and infinities pass."""
    if layout == "broadcast":  # one row repeated over every query (stride 0), as ids_to_dense's list positions
        preds = torch.tensor([3.0, float("nan"), 1.0]).to(dtype).expand(4, 3)
    else:
        n = 3 if layout == "contiguous" else 2**20 + 1  # past LARGE_BATCH_ITEMS
        preds = torch.linspace(1, 0, n).to(dtype).repeat(2, 1)
        preds[1, n // 2] = float("nan")
    target = torch.ones(preds.shape, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"`preds` contains NaN"):
        F.ndcg(preds, target, k=2)
    F.ndcg(torch.nan_to_num(preds.clone(), nan=float("inf")), target, k=2)


def test_bpref_num_judged_is_one_integer_count_per_query():
    """A 0-d count for one query works; a count for another number of queries, a float or a negative count is
    refused (one count was silently broadcast to every query, and -5 or 2.5 gave a value). A negative count is
    below R, which the value checks refuse (test_judged_inputs.py: test_a_judged_count_below_r_is_refused)."""
    preds, target = torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0])
    assert F.bpref(preds, target, num_judged=torch.tensor(4)).item() == F.bpref(preds, target).item() == 0.75
    two = {"preds": torch.stack([preds, preds]), "target": torch.stack([target, target])}
    for counts in (torch.tensor([4]), torch.tensor([4, 4, 4])):
        with pytest.raises(ValueError, match=r"`num_judged` must hold one count per query \(2\)"):
            F.bpref(**two, num_judged=counts)
    with pytest.raises(ValueError, match="`num_judged` must be an integer tensor of counts"):
        F.bpref(preds, target, num_judged=torch.tensor(2.5))
    with pytest.raises(ValueError, match="`num_judged` must count every judged item of its query: its R relevant"):
        F.bpref(preds, target, num_judged=torch.tensor(-5))


def test_a_zero_dimensional_tensor_cut_off():
    """``k=torch.tensor(2)`` is the cut-off 2 (it gave 'iteration over a 0-d tensor'); a float or bool one is
    refused by name."""
    preds, target = torch.rand(3, 6, generator=torch.Generator().manual_seed(0)), torch.tensor([[1, 0, 2, 0, 1, 0]] * 3)
    torch.testing.assert_close(F.ndcg(preds, target, k=torch.tensor(2)), F.ndcg(preds, target, k=2))
    for k in (torch.tensor(2.0), torch.tensor(True)):
        with pytest.raises(TypeError, match="`k` must be a positive int"):
            F.ndcg(preds, target, k=k)


# ------------------------------------------------------------------------------ torchmetrics' names
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: F.ndcg(P, T, top_k=10), r"ndcg got an unexpected keyword argument `top_k`: .* use `k=`"),
        (lambda: F.average_precision(P, T, aggregation="mean"), r"`aggregation`: .* use `reduction=`"),
        (lambda: F.precision(P, T, ignore_index=-1), r"use `mask=target != ignore_index`"),
        (lambda: F.evaluate(P, T, ["ndcg@2"], top_k=2), r"the cut-off in each measure's name"),
        (lambda: F.precision_recall_curve(P, T, top_k=2), r"use `max_k=`"),
        (lambda: F.auroc(P, T, top_k=2), r"use `k=`"),
        (lambda: F.recall(P, T, adaptive_k=True), r"`adaptive_k` has no counterpart in recall; torchrank\.compat"),
        (lambda: F.ndcg(P, T, gian="linear"), r"`gian`: did you mean `gain`\?"),
        (lambda: F.ndcg(P, T, colour=1), r"ndcg got an unexpected keyword argument `colour`\.$"),
        (lambda: F.r_precision(P, T, k=2), r"r_precision got an unexpected keyword argument `k`"),
    ],
)
def test_a_keyword_the_function_does_not_take_says_what_to_write(call, match):
    with pytest.raises(TypeError, match=match):
        call()


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda M: M.NDCG(top_k=10), r"NDCG got an unexpected keyword argument `top_k`: .* use `k=`"),
        (lambda M: M.MAP(k=5, ignore_index=-1), r"use `mask=target != ignore_index` where the labels are given"),
        (lambda M: M.RankingMetrics(["map"], top_k=10), r"the cut-off in each measure's name"),
        (lambda M: M.Recall(k=5, adaptive_k=True), r"`adaptive_k` has no counterpart in Recall; torchrank\.compat"),
    ],
)
def test_a_torchmetrics_argument_of_a_class_says_what_to_write(build, match):
    import torchrank.metrics as M

    with pytest.raises(TypeError, match=match):
        build(M)


def test_functions_keep_their_signature_and_doctests():
    """The keyword hints wrap the functions: signatures (the metric classes read them) and docs stay theirs."""
    import inspect

    assert "k" in inspect.signature(F.ndcg).parameters and F.ndcg.__module__ == "torchrank.functional.dcg"
    assert F.ndcg.__doc__ is not None and ">>> ndcg(" in F.ndcg.__doc__
    assert torch.equal(F.precision(P, T, k=2), torch.tensor(0.5))


# ------------------------------------------------------------------------------ missing optional packages
def _without(monkeypatch, *packages: str) -> None:
    """Imports of ``packages`` fail from here to the end of the test, as where they are not installed."""
    for name in packages:
        monkeypatch.setitem(sys.modules, name, None)


def test_every_optional_package_names_its_extra_as_pyproject_does():
    import tomllib

    from torchrank._extras import EXTRAS

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for package, (dist, extra) in EXTRAS.items():
        assert any(req.startswith(dist) for req in extras[extra]), (package, extra)


@pytest.mark.parametrize("where", ["run", "output"])
def test_evaluate_parquet_without_pyarrow_is_one_line_naming_the_extra(where, tmp_path, monkeypatch, capsys):
    from torchrank.cli import main
    from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN

    run = tmp_path / "run.parquet"
    run.write_bytes(b"PAR1")  # never read: pyarrow is asked for first
    argv = [str(SAMPLE_QRELS), str(run)] if where == "run" else [str(SAMPLE_QRELS), str(SAMPLE_RUN), "-o",
                                                                 str(tmp_path / "out.parquet")]  # fmt: skip
    _without(monkeypatch, "pyarrow", "pyarrow.parquet", "pyarrow.csv")
    assert main(["evaluate", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # refused before evaluating: -o's pyarrow is asked for before the runs are read
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("torchrank evaluate: error: ") and "pip install 'torchrank[parquet]'" in err


def test_compare_plot_without_matplotlib_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    from torchrank.cli import main
    from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN

    _without(monkeypatch, "matplotlib", "matplotlib.figure")
    argv = ["compare", str(SAMPLE_QRELS), str(SAMPLE_RUN), str(SAMPLE_RUN), "-m", "map", "--permutations", "0",
            "--bootstrap", "0", "--plot", str(tmp_path / "plot.png")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'torchrank[plot]'" in err


def test_metric_plot_without_matplotlib_names_the_extra(monkeypatch):
    from torchrank._extras import MissingExtra
    from torchrank.metrics import NDCG

    metric = NDCG(k=2)
    metric.update(P, T)
    _without(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtra, match=r"^NDCG\.plot\(\) needs matplotlib: pip install 'torchrank\[plot\]'"):
        metric.plot()


def test_to_dataframe_without_pandas_names_the_extra(monkeypatch):
    from torchrank._extras import MissingExtra
    from torchrank.io import SAMPLE_RUN, load_run, to_dataframe

    run = load_run(SAMPLE_RUN)
    _without(monkeypatch, "pandas")
    with pytest.raises(MissingExtra, match=r"^to_dataframe needs pandas: pip install 'torchrank\[pandas\]'"):
        to_dataframe(run)


def test_training_without_lightning_is_one_line_naming_the_extra(monkeypatch):
    """`python -m torchrank.training fit` exits with one line; the Python API raises the same words."""
    import runpy

    import torchrank.training
    from torchrank._extras import MissingExtra

    _without(monkeypatch, "lightning")
    monkeypatch.setattr(sys, "argv", ["torchrank.training", "fit"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("torchrank.training", run_name="__main__")
    message = str(exited.value.code)
    assert "\n" not in message and message.startswith("python -m torchrank.training: error: ")
    assert message.endswith("needs lightning: pip install 'torchrank[train]' (or lightning).")
    monkeypatch.delitem(vars(torchrank.training), "MLPRanker", raising=False)  # as in a process that never used it
    with pytest.raises(MissingExtra, match=r"torchrank\.training\.MLPRanker needs lightning: .*'torchrank\[train\]'"):
        torchrank.training.MLPRanker  # noqa: B018
