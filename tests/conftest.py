"""Shared fixtures: devices (CUDA cases skip without a GPU) and the measures under test.

The measure lists come from the registry (``torchrank.functional.MEASURES``): every declared family with a
public function enters the tie oracle (tests/test_ties.py), the invariance and chunking tests by being
declared.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # the triton backend's tests run its kernels in Triton's CPU interpreter, which
    os.environ.setdefault("TRITON_INTERPRET", "1")  # triton.jit reads when the kernels are defined: set it first

import torchrank.functional as F

DATA = Path(__file__).parent / "data"

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]

# options the tests fix for a family, over its defaults: a fixed top of the label scale, a persistence whose powers
# the short test lists still feel
TEST_OPTIONS = {"err": {"max_label": 3}, "rbp": {"p": 0.7, "max_label": 3}, "rbp_resid": {"p": 0.7}}


def _under_test(spec):
    """``(name, function, higher_is_better)`` of a declared family, or None where the shared tests do not apply:
    no public function; no tie-averaged form (``"refused"``: the tests run ``ties="average"``); or values defined
    without relevant items (``empty_target_action`` does not apply: RBP's residual, the counts)."""
    if spec.function is None or spec.ties == "refused" or not spec.empty_target_action:
        return None
    options = {**spec.function_params, **TEST_OPTIONS.get(spec.name, {})}
    fn = functools.partial(spec.function, **options) if options else spec.function
    return spec.name, fn, spec.higher_is_better is not False


_TESTED = [(spec, _under_test(spec)) for spec in F.MEASURES.values()]
# every measure with a cut-off, as (name, function, higher_is_better); partials fix their own parameters
CUTOFF_MEASURES = [m for spec, m in _TESTED if m is not None and spec.takes_k]
WHOLE_LIST_MEASURES = [m for spec, m in _TESTED if m is not None and not spec.takes_k]
ALL_MEASURES = CUTOFF_MEASURES + WHOLE_LIST_MEASURES
# declared with a public function but left out of the lists above, and why (tests/test_registry.py checks each)
NOT_IN_SHARED_TESTS = [spec.name for spec, m in _TESTED if m is None and spec.function is not None]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


def patch_engine(monkeypatch: pytest.MonkeyPatch, name: str, value: object) -> None:
    """Set a ranking-engine name (a tuning constant or a function to spy on) in every engine module that binds it:
    the numpy backend's modules import each other's names, so one module's binding alone may not be the one read."""
    from torchrank.functional import _descending, _ranked
    from torchrank.functional.backends import _torch as _torch_order
    from torchrank.functional.backends._numpy import compact_keys as _compact_keys
    from torchrank.functional.backends._numpy import keys as _numpy_keys
    from torchrank.functional.backends._numpy import order as _numpy_order
    from torchrank.functional.backends._numpy import tied_rows as _tied_rows

    engine = (_numpy_order, _numpy_keys, _compact_keys, _tied_rows, _torch_order, _ranked, _descending)
    modules = [m for m in engine if hasattr(m, name)]
    assert modules, f"no engine module binds {name}"
    for module in modules:
        monkeypatch.setattr(module, name, value)
