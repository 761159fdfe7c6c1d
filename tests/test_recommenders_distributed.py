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
