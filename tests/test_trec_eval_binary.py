"""``torchrank evaluate`` against a trec_eval C binary itself, byte for byte, on the fuzz generator's files.

Runs only where a trec_eval binary is at hand (``$TREC_EVAL``, ``benchmarks/tools/trec_eval`` or ``trec_eval`` on the
PATH; build one from usnistgov/trec_eval's source, tags v10.0 and v9.0.8); CI has none and skips, and compares the
outputs recorded from both versions instead (``test_trec_eval_outputs.py``). A 9.x binary is compared with
``--trec-eval 9``. More seeds: ``python -m benchmarks.trec_eval_fuzz --binary PATH --seeds N``, which also shrinks
each disagreement to a minimal repro.
"""

from __future__ import annotations

import pytest

from benchmarks.get_trec_eval import find, version
from benchmarks.trec_eval_fuzz import FLAG_SETS, first_difference, generate, run_binary, run_torchrank

BINARY = find()
pytestmark = pytest.mark.skipif(BINARY is None, reason="no trec_eval binary (see benchmarks/trec_eval_fuzz.py)")
VERSION = "9" if BINARY is not None and "version 9." in version(BINARY) else "10"


@pytest.mark.parametrize("seed", [2000, 2001, 2002])
@pytest.mark.parametrize("flags", FLAG_SETS, ids=[" ".join(f) or "official" for f in FLAG_SETS])
def test_output_equals_the_binary_byte_for_byte(flags, seed):
    qrels, run = generate(seed)
    theirs, _ = run_binary(BINARY, flags, qrels, run)
    ours = run_torchrank(flags, qrels, run, VERSION)
    assert first_difference(ours, theirs) is None
    assert theirs.rc != 0 or theirs.out.count("\n") > 20  # measures printed, not an empty output
