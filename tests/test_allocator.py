"""The opt-in allocator warm-up: large CPU batches stop re-faulting their temporaries on every call (glibc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from torchrank import allocator

# a fresh process evaluates 8 measures on a 200 x 1,000 batch (its temporaries ~1 MB each) and reports the page
# faults of a typical call (the median of five, after three)
_PROBE = """
import json, resource, sys, torch
import torchrank.functional as F
if sys.argv[1] == "1":
    from torchrank.allocator import warm_cpu_allocator
    warm_cpu_allocator()
g = torch.Generator().manual_seed(0)
preds, target = torch.rand(200, 1000, generator=g), torch.randint(0, 5, (200, 1000), generator=g)
measures = ["ndcg@5", "ndcg@10", "ndcg@20", "map", "mrr", "P@10", "recall@100", "success@10"]
for _ in range(3):
    F.evaluate(preds, target, measures)
faults = []
for _ in range(5):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    F.evaluate(preds, target, measures)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(sorted(faults)[2]))
"""


def _faults_per_call(warmup: str) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"):
        env.pop(name, None)  # glibc's own settings would stop its thresholds adapting, the thing under test
    out = subprocess.run([sys.executable, "-c", _PROBE, warmup], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not allocator._is_glibc(), reason="glibc only")
def test_warmup_stops_the_page_faults_of_repeated_large_calls():
    """Without the warm-up each call pages its temporaries in afresh (hundreds of faults); with it, none. glibc's
    adaptive mmap threshold sometimes settles high enough without the warm-up too (about one fresh process in six
    here): the cold probe counts the most of three processes, the warm one every time."""
    cold = max(_faults_per_call("0") for _ in range(3))
    warm = max(_faults_per_call("1") for _ in range(2))
    assert warm < 50, f"{warm} page faults per call after the warm-up"
    assert cold > 10 * max(warm, 10), f"{cold} page faults per call without it: the probe no longer shows the churn"


def test_torchrank_never_warms_the_allocator_by_itself(monkeypatch):
    """A process-wide side effect is the caller's choice: evaluating a large batch does not call the warm-up."""
    calls = []
    monkeypatch.setattr(allocator, "warm_cpu_allocator", lambda: calls.append(1))
    import torchrank.functional as F

    F.evaluate(torch.rand(100, 1000), torch.randint(0, 3, (100, 1000)), ["ndcg@10", "map"])
    assert calls == []
