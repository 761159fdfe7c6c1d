"""The stateful metrics across 2 real processes (gloo): synced results equal one process on all the data.

A module-scoped pool of 2 spawned workers (one ``Process`` and one task queue per rank, so each task reaches
both ranks) joins one gloo group for the whole file. Every test sends a module-level task of
``_dist_workers`` to both ranks; the task asserts inside the worker, against a reference built from both
ranks' data with ``sync_on_compute=False``, and the test asserts that both ranks succeeded.
"""

from __future__ import annotations

import functools
import queue
import socket
import time
from typing import Any

import _dist_retrieval as R
import _dist_workers as W
import pytest
import torch.multiprocessing as mp

import torchrank.functional as F
from torchrank.metrics import MAP, NDCG, RankingMetrics

STARTUP_TIMEOUT_S = 120.0  # two cold imports of torch + torchmetrics on a loaded 2-core machine
TASK_TIMEOUT_S = 45.0  # longer than the workers' gloo timeout (30 s), so a stuck collective surfaces there first


class WorkerCrashed(RuntimeError):
    """A pool worker died (or stopped answering) during a task."""

    def __init__(self, message: str, exitcodes: list[int | None]) -> None:
        super().__init__(f"{message}; exit codes {exitcodes}")
        self.exitcodes = exitcodes


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


class DistPool:
    """Two spawned processes, rank 0 and rank 1 of one gloo group, each serving its own task queue.

    A task is put on both queues and answered once per rank on the shared result queue, so it always runs
    on both ranks. A worker that dies or stops answering breaks the pool: it is killed and the next task
    starts a fresh one (on a new port).
    """

    def __init__(self) -> None:
        self.procs: list[Any] = []
        self.task_id = 0

    @property
    def alive(self) -> bool:
        return len(self.procs) == W.WORLD_SIZE and all(p.is_alive() for p in self.procs)

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        port = _free_port()
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(W.WORLD_SIZE)]
        self.procs = [
            ctx.Process(target=W.serve, args=(rank, W.WORLD_SIZE, port, self.tasks[rank], self.results),
                        name=f"torchrank-dist-rank{rank}", daemon=True)
            for rank in range(W.WORLD_SIZE)
        ]
        for proc in self.procs:
            proc.start()
        failures = [payload for ok, payload in self._collect("init", STARTUP_TIMEOUT_S) if not ok]
        if failures:
            self.kill()
            raise RuntimeError("a worker could not join the process group:\n" + "\n".join(failures))

    def run(self, fn: Any, *args: Any) -> list[tuple[bool, Any]]:
        """``fn(*args)`` on both ranks: ``[(succeeded, return value or traceback)]`` by rank."""
        if not self.alive:
            self.kill()
            self.start()
        self.task_id += 1
        for tasks in self.tasks:
            tasks.put((self.task_id, fn, args))
        return self._collect(self.task_id, TASK_TIMEOUT_S)

    def _collect(self, task_id: Any, timeout: float) -> list[tuple[bool, Any]]:
        deadline = time.monotonic() + timeout
        answers: dict[int, tuple[bool, Any]] = {}
        while len(answers) < W.WORLD_SIZE:
            try:
                got, rank, ok, payload = self.results.get(timeout=0.1)
            except queue.Empty:
                dead = not all(p.is_alive() for p in self.procs)
                if dead or time.monotonic() > deadline:
                    exitcodes = [p.exitcode for p in self.procs]
                    self.kill()
                    raise WorkerCrashed("a worker died" if dead else f"no answer in {timeout} s", exitcodes) from None
                continue
            if got == task_id:
                answers[rank] = (ok, payload)
        return [answers[rank] for rank in range(W.WORLD_SIZE)]

    def kill(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(5)
        self.procs = []

    def close(self) -> None:
        """Let the workers leave the group (``destroy_process_group``) and exit; kill what does not."""
        if self.alive:
            for tasks in self.tasks:
                tasks.put(None)
            try:
                self._collect("shutdown", 20.0)
            except WorkerCrashed:
                pass
            for proc in self.procs:
                proc.join(10)
        self.kill()


@pytest.fixture(scope="module")
def pool():
    workers = DistPool()
    workers.start()
    yield workers
    workers.close()


def run_on_both(pool: DistPool, fn: Any, *args: Any) -> list[Any]:
    """Run a task on both ranks; the ranks' return values, or a failure with both ranks' messages."""
    results = pool.run(fn, *args)
    failures = [f"--- rank {rank}:\n{payload}" for rank, (ok, payload) in enumerate(results) if not ok]
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
    return [payload for _, payload in results]


SEED = 1234
UNEVEN = {0: [(4, 12), (1, 12), (6, 7)], 1: [(9, 10)]}  # 3 updates of 11 queries vs 1 update of 9
ONE_RANK = {0: [(5, 10), (3, 10)], 1: []}  # rank 1 never calls update


def test_dense_uneven_updates(pool):
    values = run_on_both(pool, W.task_dense_synced, SEED, functools.partial(NDCG, k=[5, 10]), UNEVEN,
                         functools.partial(F.ndcg, k=[5, 10]))
    assert values[0] == values[1]


def test_dense_rank_without_data(pool):
    values = run_on_both(pool, W.task_dense_synced, SEED, functools.partial(NDCG, k=[5, 10]), ONE_RANK,
                         functools.partial(F.ndcg, k=[5, 10]))
    assert values[0] == values[1]


def test_dist_sync_on_step_forward_returns_the_synced_batch_value(pool):
    plans = {0: [(4, 8), (2, 8)], 1: [(3, 8), (5, 8)]}  # the same number of steps on both ranks
    values = run_on_both(pool, W.task_dist_sync_on_step, SEED, functools.partial(NDCG, k=5), plans)
    assert values[0] == values[1]


@pytest.mark.parametrize("empty_target_action", ["neg", "skip"])
def test_flat_query_split_across_ranks(pool, empty_target_action):
    kwargs = {"k": 10, "empty_target_action": empty_target_action}
    run_on_both(pool, W.task_flat_synced, SEED, functools.partial(MAP, **kwargs),
                functools.partial(F.average_precision, **kwargs))


@pytest.mark.parametrize("layout", ["dense", "flat"])
def test_keep_per_query_median(pool, layout):
    factory = functools.partial(NDCG, k=10, keep_per_query=True, aggregation="median")
    functional = functools.partial(W.nanmedian_of, F.ndcg, k=10)
    if layout == "dense":
        run_on_both(pool, W.task_dense_synced, SEED, factory, UNEVEN, functional)
    else:
        run_on_both(pool, W.task_flat_synced, SEED, factory, functional)


MEASURES = ["ndcg@10", "map", "P@5", "mrr"]


@pytest.mark.parametrize("layout", ["dense", "flat"])
def test_ranking_metrics_dict(pool, layout):
    factory = functools.partial(RankingMetrics, MEASURES)
    functional = functools.partial(F.evaluate, measures=MEASURES)
    if layout == "dense":
        run_on_both(pool, W.task_dense_synced, SEED, factory, UNEVEN, functional)
    else:
        run_on_both(pool, W.task_flat_synced, SEED, factory, functional)


def test_sync_on_compute_false_is_local(pool):
    values = run_on_both(pool, W.task_local_only, SEED, functools.partial(NDCG, k=[5, 10]), UNEVEN)
    assert values[0] != values[1]


def test_dense_sync_collectives(pool):
    counts = run_on_both(pool, W.task_dense_sync_states, SEED, functools.partial(NDCG, k=[5, 10]), UNEVEN)
    assert counts[0] == counts[1]
    count = counts[0]
    # sync() (the first step of compute) gathers each state once with torchmetrics' gather_all_tensors: a
    # barrier, an all_gather of the shapes (not for a 0-d tensor) and an all_gather of the data. A dense
    # NDCG gathers 3 states (`sums`: value sums, counts and problem flags in one float64 tensor; the flat
    # `flat_items` and `flat_indexes`, empty), so a synced compute costs 3 barriers + 6 all_gathers = 9
    # collectives; one state more for `keep_per_query`. Its fourth state, named by the configuration, is an empty
    # list without reduction: nothing to gather.
    assert count["states"] == 4
    count["states"] -= 1
    assert count["gathers"] == count["states"] == 3
    assert count["barrier"] == count["states"]
    assert count["all_gather"] == 2 * count["states"] - count["scalar_states"] == 6
    assert count["all_reduce"] == count["broadcast"] == count["all_gather_object"] == 0


def test_flat_sync_concatenates_items(pool):
    names = run_on_both(pool, W.task_flat_sync_states, SEED, functools.partial(MAP, k=10))
    assert names[0], "a flat metric keeps its items in list states"


# A rank without items in a list state: torchmetrics would sync its own placeholder (float32, 1-D) against
# the other rank's tensors, and gloo aborts both processes on the size mismatch (torchrank gives empty list
# states a placeholder of their dtype and shape). The metric gathers with `checked_gather` (the same gather,
# after comparing dtypes and dimensions across ranks), so a regression fails here as an error on both
# ranks instead of killing the pool.


def test_flat_rank_without_data(pool):
    run_on_both(pool, W.task_flat_rank_without_data, SEED, functools.partial(MAP, k=10, dist_sync_fn=W.checked_gather))


def test_keep_per_query_rank_without_data(pool):
    factory = functools.partial(NDCG, k=10, keep_per_query=True, dist_sync_fn=W.checked_gather)
    run_on_both(pool, W.task_dense_synced, SEED, factory, ONE_RANK, functools.partial(F.ndcg, k=10))


# CorpusRetrieval: the queries are gathered, each rank searches its own corpus shard, the shards' top k are merged
CORPUS_PLANS = {
    "uneven-shards": {"corpus": {0: [(0, 15), (15, 16), (16, 60)], 1: [(60, 160)]},
                      "queries": {0: [(0, 4), (4, 11)], 1: [(11, 30)]}},
    "rank-without-corpus": {"corpus": {0: [(0, 100), (100, 160)], 1: []},
                            "queries": {0: [(0, 12)], 1: [(12, 30)]}},
    "rank-without-queries": {"corpus": {0: [(0, 70)], 1: [(70, 160)]},
                             "queries": {0: [], 1: [(0, 10), (10, 30)]}},
}


@pytest.mark.parametrize("plan", CORPUS_PLANS.values(), ids=CORPUS_PLANS)
def test_corpus_retrieval_synced_equals_one_process(pool, plan):
    values = run_on_both(pool, R.task_synced_equals_one_process, SEED, plan)
    assert values[0] == values[1]


def test_corpus_retrieval_device_path_and_errors_raise_on_both_ranks(pool):
    run_on_both(pool, R.task_synced_equals_one_process, SEED, CORPUS_PLANS["uneven-shards"], "torch")
    run_on_both(pool, R.task_problem_on_one_rank_raises_on_both, SEED)
    messages = run_on_both(pool, R.task_mismatched_dims_raise_on_both, SEED)
    assert messages[0] == messages[1]
    run_on_both(pool, R.task_search_failing_on_one_rank_raises_on_both, SEED)
