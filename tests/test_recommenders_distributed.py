"""Beyond-accuracy metrics and id-list input across 2 real gloo processes: synced values equal one process
on both ranks' lists, with uneven updates and with a rank that saw no data (the pool of
``test_metrics_distributed.py``)."""

from __future__ import annotations

import _dist_recommenders as R
import pytest
from test_metrics_distributed import DistPool, run_on_both


@pytest.fixture(scope="module")
def pool():
    workers = DistPool()
    workers.start()
    yield workers
    workers.close()


@pytest.mark.parametrize("plan", [R.PLANS, {0: [4, 6], 1: []}], ids=["uneven", "rank-without-data"])
def test_synced_equals_one_process(pool, plan):
    values = run_on_both(pool, R.task_synced_equals_one_process, 11, plan)
    assert values[0] == values[1]


@pytest.mark.parametrize("plan", [R.PLANS, {0: [], 1: [3, 5]}], ids=["uneven", "rank-without-data"])
def test_auroc_and_gauc_synced(pool, plan):
    values = run_on_both(pool, R.task_auc_synced, 3, plan)
    assert values[0] == values[1]


def test_docs_retrieval_page_logs_the_same_values_over_ddp(tmp_path, monkeypatch):
    """docs/retrieval.md's Lightning module on 2 spawned processes (gloo) logs exactly what one process logs:
    the page's module is its first python block, saved as a module the spawned processes can import."""
    pytest.importorskip("lightning", reason="the Lightning test needs `lightning`")
    import importlib
    import re
    from pathlib import Path

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    page = (Path(__file__).resolve().parents[1] / "docs" / "retrieval.md").read_text(encoding="utf-8")
    (tmp_path / "retrieval_page.py").write_text(re.findall(r"```python\n(.*?)```", page, re.S)[0])
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned processes inherit sys.path
    module = importlib.import_module("retrieval_page")
    try:
        users, relevant, popularity = module.interactions()
        assert module.NUM_USERS % 2 == 0, "an even number of users: the sampler repeats none"
        torch.manual_seed(0)
        model = module.TwoTower(popularity)
        loader = DataLoader(TensorDataset(users, relevant), batch_size=100)  # 256 users a rank: uneven batches
        (one,) = module.trainer().validate(model, loader, verbose=False)
        (two,) = module.trainer(devices=2).validate(model, loader, verbose=False)
    finally:
        import sys

        sys.modules.pop("retrieval_page", None)
    assert two == pytest.approx(one, abs=1e-6, rel=0)
    # not one rank's value: rank 0 sees users 0, 2, 4, ... (DistributedSampler without shuffling)
    with torch.no_grad():
        _, top100 = module.F.top_k_ids(model.users(users[0::2]) @ model.items.weight.T, 100)
    rank0 = module.Coverage(k=100, num_items=module.NUM_ITEMS)
    rank0.update(top100)
    assert abs(rank0.compute().item() - one["val/coverage@100"]) > 1e-3


@pytest.mark.parametrize("plan", [{0: [7, 3, 12], 1: [9]}, {0: [], 1: [6, 11]}, {0: [8, 5], 1: []}],
                         ids=["uneven", "rank-0-dense-only", "rank-1-without-data"])
def test_gauc_flat_queries_across_ranks(pool, plan):
    values = run_on_both(pool, R.task_gauc_flat_synced, 5, plan)
    assert values[0] == values[1]
