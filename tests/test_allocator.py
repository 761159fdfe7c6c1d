"""The allocator warm-up: large CPU batches stop re-faulting their temporaries on every call (glibc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from torchrank.functional import _allocator

# a fresh process evaluates 8 measures on a 200 x 1,000 batch (its temporaries ~1 MB each) and reports the page
# faults of a typical call (the median of five, after three)
_PROBE = """
import json, resource, torch
import torchrank.functional as F
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
    env = {**os.environ, "TORCHRANK_ALLOCATOR_WARMUP": warmup}
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"):
        env.pop(name, None)  # glibc's own settings would stop its thresholds adapting, the thing under test
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _allocator._is_glibc(), reason="glibc only")
def test_warmup_stops_the_page_faults_of_repeated_large_calls():
    """Without the warm-up each call pages its temporaries in afresh (hundreds of faults); with it, none."""
    cold, warm = _faults_per_call("0"), _faults_per_call("1")
    assert warm < 50, f"{warm} page faults per call after the warm-up"
    assert cold > 10 * max(warm, 10), f"{cold} page faults per call without it: the probe no longer shows the churn"


def test_warmup_happens_once_and_only_for_large_cpu_batches(monkeypatch):
    calls = []
    monkeypatch.setattr(_allocator, "warm_cpu_allocator", lambda: calls.append(1))
    _allocator.warm_cpu_allocator_for(torch.zeros(_allocator.WARM_FROM_ITEMS - 1))
    assert calls == []
    _allocator.warm_cpu_allocator_for(torch.zeros(4, _allocator.WARM_FROM_ITEMS // 4))
    assert calls == [1]


def test_warmup_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("TORCHRANK_ALLOCATOR_WARMUP", "0")
    _allocator.warm_cpu_allocator.cache_clear()
    try:
        assert _allocator.warm_cpu_allocator() is False
    finally:
        _allocator.warm_cpu_allocator.cache_clear()
