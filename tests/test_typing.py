"""What type checkers see: the functions' shared options (``Unpack`` of the TypedDicts in
``torchrank.functional._options``), the generated stub of the metric classes, and mypy reading both."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import pytest

import torchrank
import torchrank.functional as F
from torchrank.functional import _options
from torchrank.functional._inputs import EMPTY_TARGET_ACTIONS, REDUCTIONS, TIES
from torchrank.functional.registry import public_functions
from torchrank.metrics import _stubs

SNIPPET = """
import torch
import torchrank.functional as F
from torchrank.metrics import NDCG, Precision, RankingMetrics, RPrecision

p, t = torch.rand(2, 3), torch.rand(2, 3)
F.ndcg(p, t, k=3, gain="exponential", ties="first", reduction="none")
F.precision(p, t, k=[1, 3], adaptive_k=True, mask=None)
F.bpref(p, t, ties="first", num_judged=None)
NDCG(k=3, gain="exponential", sync_on_compute=False)
RankingMetrics(["ndcg@3"], ties="first", judged_only=True)
F.ndcg(p, t, kk=3)  # line 12
NDCG(top_k=3)
F.precision(p, t, ties="avg")
F.r_precision(p, t, k=3)
RPrecision(k=3)
Precision(k=3, validate_args="yes")
"""
EXPECTED = {
    12: 'Unexpected keyword argument "kk" for "ndcg"',
    13: 'Unexpected keyword argument "top_k" for "NDCG"',
    14: 'Argument "ties" to "precision" has incompatible type "Literal[\'avg\']"',
    15: 'Unexpected keyword argument "k" for "r_precision"',
    16: 'Unexpected keyword argument "k" for "RPrecision"',
    17: 'Argument "validate_args" to "Precision" has incompatible type "str"; expected "bool"',
}
# torch, torchmetrics and numpy unread (their types are Any): the check takes a second, not a minute
MYPY_CONFIG = """
[mypy]
follow_imports = silent
[mypy-torch.*,torchmetrics.*,numpy.*,lightning.*]
follow_imports = skip
follow_imports_for_stubs = True
"""


def test_the_class_stub_is_current():
    """``torchrank/metrics/classes.pyi`` is what ``python -m torchrank.metrics._stubs`` writes from the registry."""
    assert _stubs.STUB.read_text() == _stubs.render(), "run `python -m torchrank.metrics._stubs`"


def test_mypy_reads_the_functions_and_classes(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api", reason="mypy is in the `test` extra")
    (tmp_path / "snippet.py").write_text(SNIPPET)
    root = Path(torchrank.__file__).resolve().parents[1]  # the torchrank under test, not an installed one
    config = MYPY_CONFIG.replace("[mypy]\n", f"[mypy]\nmypy_path = {root}\n") if (root / "pyproject.toml").exists() \
        else MYPY_CONFIG
    (tmp_path / "mypy.ini").write_text(config)
    monkeypatch.chdir(tmp_path)
    out, err, _ = api.run(["--config-file", "mypy.ini", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary",
                           "--hide-error-context", "snippet.py"])
    errors = {}
    for line in out.splitlines():
        if ": error: " in line:
            errors[int(line.split(":")[1])] = line.split(": error: ", 1)[1]
    assert sorted(errors) == sorted(EXPECTED), out + err
    for number, message in EXPECTED.items():
        assert message in errors[number]


def test_the_literal_types_are_the_accepted_choices():
    assert typing.get_args(_options.Ties) == TIES
    assert typing.get_args(_options.EmptyTargetAction) == EMPTY_TARGET_ACTIONS
    assert typing.get_args(_options.Reduction) == REDUCTIONS


def test_shared_options_have_one_default():
    """Every public function (those that list the shared options themselves too) takes them with the defaults of
    :data:`~torchrank.functional._options.DEFAULTS`, bpref's and infAP's ``ties="first"`` apart."""
    own_ties = {F.bpref, F.inferred_average_precision}
    for name, function in {**public_functions(), "evaluate": F.evaluate, "auroc": F.auroc, "gauc": F.gauc}.items():
        for param in inspect.signature(function).parameters.values():
            if param.name in _options.DEFAULTS and not (param.name == "ties" and function in own_ties):
                assert param.default == _options.DEFAULTS[param.name], (name, param.name)


def test_expanded_signature_and_docs():
    """The functions that take ``**options`` show them as keywords (what the registry, the classes and ``help``
    read), call with the defaults, and document each shared argument they take once."""
    params = inspect.signature(F.precision).parameters
    assert list(params) == ["preds", "target", "k", "adaptive_k", *list(_options.DEFAULTS)[1:]]
    assert all(p.kind is p.KEYWORD_ONLY for p in list(params.values())[2:])
    assert "k" not in inspect.signature(F.r_precision).parameters
    assert inspect.signature(F.bpref).parameters["ties"].default == "first"
    for name in ("precision", "r_precision", "ndcg", "bpref", "judged_fraction", "kendall_tau"):
        doc, params = getattr(F, name).__doc__, inspect.signature(getattr(F, name)).parameters
        for arg in _options.COMMON_ARGS:
            assert doc.count(f"\n        {arg}: ") == (arg in params), (name, arg)
