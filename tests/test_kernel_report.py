"""The fused triton kernel builds for real GPUs, checked on a machine without one.

``benchmarks.kernel_report`` compiles a representative set of the variants the dispatcher launches for sm_80 and
sm_90 (ptxas and cuobjdump ship with triton's wheel): a kernel that stops compiling for either fails here, where on
a GPU the dispatcher would only warn and fall back to torch. Its static targets (no spills up to 1,024 items; NDCG@10
at 1,024 items within 2,000 SASS instructions on sm_90) are asserted too. The compiles run in a subprocess (the
suite defines the kernels under Triton's interpreter, which cannot compile them) and land in triton's cache
(``TRITON_CACHE_DIR``, default ``~/.triton/cache``): a run after an unchanged kernel reads them back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchrank.functional import backends


def _missing_toolchain() -> str | None:
    """Why the kernels cannot be compiled for NVIDIA GPUs here (None: they can): no triton, or a triton wheel without
    the NVIDIA backend's ptxas and cuobjdump (another platform's build)."""
    if not backends.triton_available():
        return "triton does not import here"
    import triton

    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    missing = [tool for tool in ("ptxas", "cuobjdump") if not (tools / tool).is_file()]
    return f"triton's wheel has no {' or '.join(missing)} ({tools})" if missing else None


MISSING = _missing_toolchain()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))

ROOT = Path(__file__).resolve().parents[1]
EIGHT = "ndcg@5,ndcg@10,ndcg@20,map@100,mrr@10,P@10,recall@100,err@20"
# NDCG@10 as the selection compiles it, the set of 8 as the sort does (its deepest cut-off is 100), a padded, judged
# variant of four families, R-precision's threshold beside NDCG@10 (selection, padded, judged, "first": a running
# count in the tie group), whole-list RR and R-precision by counts, and a list of one item at a cut-off of 1 as
# triton's launcher specializes it (its integer arguments equal to 1 become constants), with
# empty_target_action="error"'s flags and no value checks
REPRESENTATIVE = [
    {"measures": ["ndcg@10"], "ties": "average", "block": 1024, "mask": False, "ideal": False},
    {"measures": EIGHT.split(","), "ties": "average", "block": 1024, "mask": False, "ideal": False},
    {"measures": ["ndcg@10", "mrr@10", "map@10", "err@10"], "ties": "first", "block": 1024, "mask": True,
     "ideal": True},
    {"measures": ["rprec", "ndcg@10"], "ties": "first", "block": 1024, "mask": True, "ideal": True},
    {"measures": ["mrr", "success", "rprec"], "ties": "average", "block": 1024, "mask": False, "ideal": False},
    {"measures": ["ndcg@1", "P@1", "mrr@1"], "ties": "first", "block": 1, "mask": False, "ideal": False, "errors": True,
     "check_values": False, "ones": ["n", "m", "preds_stride", "target_stride", "deepest"]},
]
# the set of 8 at 1,024 items takes ptxas about 40 s for sm_80 (10 s for sm_90): sm_80 compiles it at 512 items


def _variants() -> list[dict]:
    variants = [{**variant, "arch": arch} for arch in (80, 90) for variant in REPRESENTATIVE]
    return [{**v, "block": 512} if v["arch"] == 80 and len(v["measures"]) == 8 else v for v in variants]
COMPILE = """
import json, sys
from benchmarks.kernel_report import compile_variant
for variant in json.loads(sys.argv[1]):
    print(json.dumps(compile_variant(variant)), flush=True)
"""


@pytest.fixture(scope="module")
def report() -> list[dict]:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    done = subprocess.run([sys.executable, "-c", COMPILE, json.dumps(_variants())], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_every_representative_variant_compiles_for_sm80_and_sm90(report):
    assert {row["arch"] for row in report} == {80, 90}
    assert len(report) == 2 * len(REPRESENTATIVE)
    failed = [(row["arch"], row["measures"], row.get("error")) for row in report if not row["compiled"]]
    assert not failed


def test_no_spills_up_to_1024_items(report):
    assert all(row["spills"] == 0 for row in report if row["block"] <= 1024), report


def test_ndcg_at_10_on_1024_items_within_2000_sass_instructions_on_sm90(report):
    (row,) = [r for r in report if r["arch"] == 90 and r["measures"] == ["ndcg@10"] and r["block"] == 1024]
    assert row["kernel"] == "select"
    assert row["sass_instructions"] <= 2000, row
