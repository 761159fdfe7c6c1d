"""Module-level (picklable) code for the multi-process tests: the worker loop of the 2-process gloo pool, the
per-rank tasks of ``test_metrics_distributed.py``, and the LightningModule of ``test_metrics_lightning.py``.

Spawned children import this file as ``_dist_workers`` (``tests`` is on pytest's ``pythonpath`` and spawn
copies ``sys.path`` to the children). The pool workers never import Lightning: the Lightning classes are
built on first access (module ``__getattr__``), so only the Lightning test pays for that import.

Every task runs on both ranks of the pool, makes the same collective calls on both, and asserts inside
the worker against a single-process reference built from both ranks' data (each rank regenerates the
other's data from the seed); a task may return a small picklable value for the test to report.
"""

from __future__ import annotations

import datetime
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torchmetrics.utilities.data import dim_zero_cat
from torchmetrics.utilities.distributed import gather_all_tensors

import torchrank.metrics  # noqa: F401 (imported before joining the group, not in a worker's first task)

WORLD_SIZE = 2
TOL = {"atol": 1e-6, "rtol": 0.0}


# ---------------------------------------------------------------------------------------------- the pool


def serve(rank: int, world_size: int, port: int, tasks: Any, results: Any) -> None:
    """A pool worker: join the gloo group, then run ``(task_id, fn, args)`` items until ``None``."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=r".*compute.*was called before the ``update``.*")
    warnings.filterwarnings("ignore", message=r".*compute\(\) was called before any update\(\).*")  # torchrank's
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=30),
        )
    except BaseException:
        results.put(("init", rank, False, traceback.format_exc()))
        return
    results.put(("init", rank, True, None))
    while (item := tasks.get()) is not None:
        task_id, fn, args = item
        try:
            results.put((task_id, rank, True, fn(*args)))
        except BaseException:
            results.put((task_id, rank, False, traceback.format_exc()))
    dist.destroy_process_group()
    results.put(("shutdown", rank, True, None))


# ---------------------------------------------------------------------------------------------- data


def _generator(seed: int, rank: int) -> torch.Generator:
    return torch.Generator().manual_seed(1009 * seed + rank)  # rank-specific, deterministic from the seed


def dense_batches(seed: int, rank: int, plan: list[tuple[int, int]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One rank's dense updates: ``plan`` lists ``(queries, items)`` per update; graded labels 0..3."""
    g = _generator(seed, rank)
    batches = []
    for rows, items in plan:
        preds = torch.randn(rows, items, generator=g)
        target = torch.randint(0, 4, (rows, items), generator=g)
        if rows > 1:
            target[0] = 0  # a query without relevant items
        batches.append((preds, target))
    return batches


def all_dense(seed: int, plans: dict[int, list[tuple[int, int]]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [batch for rank in range(WORLD_SIZE) for batch in dense_batches(seed, rank, plans[rank])]


def flat_split(seed: int, queries: int = 8) -> dict[int, list[tuple[torch.Tensor, ...]]]:
    """Flat items of ``queries`` queries dealt to the ranks so that most queries are split across them.

    Query 0 stays on rank 0 and query 1 on rank 1; every other item goes to a random rank. Rank 0 sends its
    items in two updates, rank 1 in one; each rank's items are shuffled. Query 2 has no relevant item.
    """
    g = _generator(seed, 99)
    sizes = torch.randint(4, 15, (queries,), generator=g)
    indexes = torch.repeat_interleave(torch.arange(queries) * 3 + 5, sizes)  # ids need not be 0..Q-1
    preds = torch.randn(indexes.numel(), generator=g)
    target = torch.randint(0, 3, (indexes.numel(),), generator=g)
    target[indexes == 2 * 3 + 5] = 0
    owner = torch.randint(0, WORLD_SIZE, (indexes.numel(),), generator=g)
    owner[indexes == 5] = 0
    owner[indexes == 8] = 1
    split: dict[int, list[tuple[torch.Tensor, ...]]] = {}
    for rank in range(WORLD_SIZE):
        mine = (owner == rank).nonzero().squeeze(1)
        mine = mine[torch.randperm(mine.numel(), generator=g)]
        chunks = mine.tensor_split(2) if rank == 0 else (mine,)
        split[rank] = [(preds[c], target[c], indexes[c]) for c in chunks]
    return split


def pad_cat(batches: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows of several dense batches as one ``[Q, max N]`` batch, padded, with the ``mask`` of real items."""
    width = max(preds.shape[1] for preds, _ in batches)
    preds = torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=-1e9) for p, _ in batches])
    target = torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1])) for _, t in batches])
    mask = torch.cat([torch.arange(width).expand(p.shape[0], -1) < p.shape[1] for p, _ in batches])
    return preds, target, mask


def _cat_flat(split: dict[int, list[tuple[torch.Tensor, ...]]]) -> tuple[torch.Tensor, ...]:
    parts = [batch for rank in range(WORLD_SIZE) for batch in split[rank]]
    return tuple(torch.cat([batch[j] for batch in parts]) for j in range(3))


def _feed(metric: Any, batches: list[tuple[torch.Tensor, ...]], flat: bool) -> Any:
    for batch in batches:
        if flat:
            metric.update(batch[0], batch[1], indexes=batch[2])
        else:
            metric.update(batch[0], batch[1])
    return metric


def _close(actual: Any, expected: Any, what: str) -> None:
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{what}: keys {list(actual)} != {list(expected)}"
        for name in expected:
            _close(actual[name], expected[name], f"{what}[{name!r}]")
        return
    # not torch.testing.assert_close: its first call costs seconds of imports in each worker
    assert isinstance(actual, torch.Tensor) and actual.shape == expected.shape, f"{what}: {actual} vs {expected}"
    assert torch.allclose(actual.double(), expected.double(), **TOL, equal_nan=True), (
        f"rank {dist.get_rank()}, {what}: {actual.tolist()} != {expected.tolist()}"
    )


# ---------------------------------------------------------------------------------------------- tasks


def task_dense_synced(seed: int, factory: Callable[..., Any], plans: dict[int, list[tuple[int, int]]],
                      functional: Callable[..., Any] | None = None) -> float:
    """Dense updates per ``plans`` (a rank may have none): the synced compute equals the reference.

    ``factory(**metric_kwargs)`` builds the metric; ``functional(preds, target, mask=mask)`` (optional) is a
    second reference, on the rows of every update concatenated (padded to the longest, ``mask`` False there).
    """
    rank = dist.get_rank()
    metric = _feed(factory(), dense_batches(seed, rank, plans[rank]), flat=False)
    value = metric.compute()
    everything = all_dense(seed, plans)
    _close(value, _feed(factory(sync_on_compute=False), everything, flat=False).compute(), "vs one-process metric")
    if functional is not None:
        preds, target, mask = pad_cat(everything)
        _close(value, functional(preds, target, mask=mask), "vs functional on the concatenated rows")
    return _first(value)


def task_dist_sync_on_step(seed: int, factory: Callable[..., Any], plans: dict[int, list[tuple[int, int]]]) -> float:
    """``dist_sync_on_step=True``: each ``forward`` returns the batch value over both ranks' batches of that
    step, and the accumulated compute equals the one-process reference on everything."""
    rank = dist.get_rank()
    mine = dense_batches(seed, rank, plans[rank])
    theirs = dense_batches(seed, 1 - rank, plans[1 - rank])
    metric = factory(dist_sync_on_step=True)
    for step, (preds, target) in enumerate(mine):
        batch_value = metric(preds, target)
        step_rows = [mine[step], theirs[step]] if rank == 0 else [theirs[step], mine[step]]
        _close(batch_value, _feed(factory(sync_on_compute=False), step_rows, flat=False).compute(), f"step {step}")
    everything = all_dense(seed, plans)
    _close(metric.compute(), _feed(factory(sync_on_compute=False), everything, flat=False).compute(), "epoch")
    return _first(metric.compute())


def task_flat_synced(seed: int, factory: Callable[..., Any], functional: Callable[..., Any] | None = None) -> float:
    """Flat items with queries split across ranks and updates: the synced compute equals the reference."""
    rank = dist.get_rank()
    split = flat_split(seed)
    preds, target, indexes = _cat_flat(split)
    on_rank = [torch.cat([b[2] for b in split[r]]).unique() for r in range(WORLD_SIZE)]
    assert len(set(on_rank[0].tolist()) & set(on_rank[1].tolist())) >= 3, "the data should split queries"
    metric = _feed(factory(), split[rank], flat=True)
    value = metric.compute()
    reference = factory(sync_on_compute=False)
    reference.update(preds, target, indexes=indexes)
    _close(value, reference.compute(), "vs one-process metric")
    if functional is not None:
        _close(value, functional(preds, target, indexes=indexes), "vs functional on the concatenated items")
    return _first(value)


def checked_gather(tensor: torch.Tensor, group: Any = None) -> list[torch.Tensor]:
    """torchmetrics' ``gather_all_tensors``, after checking that every rank sends the same dtype and number of
    dimensions: a mismatch raises on every rank (where gloo would abort the process on a size mismatch)."""
    sent = [None] * dist.get_world_size(group)
    dist.all_gather_object(sent, (str(tensor.dtype), tensor.ndim, tuple(tensor.shape)), group=group)
    if len({(dtype, ndim) for dtype, ndim, _ in sent}) > 1:
        raise RuntimeError(f"sync mismatch: the ranks send tensors (dtype, ndim, shape) {sent}")
    return gather_all_tensors(tensor, group)


def task_flat_rank_without_data(seed: int, factory: Callable[..., Any]) -> float:
    """Flat items all on rank 0, rank 1 never updates: the synced compute equals the reference."""
    rank = dist.get_rank()
    split = flat_split(seed)
    batches = split[0] + split[1]
    metric = _feed(factory(), batches if rank == 0 else [], flat=True)
    value = metric.compute()
    preds, target, indexes = _cat_flat({0: batches, 1: []})
    reference = factory(sync_on_compute=False)
    reference.update(preds, target, indexes=indexes)
    _close(value, reference.compute(), "vs one-process metric")
    return _first(value)


def task_local_only(seed: int, factory: Callable[..., Any], plans: dict[int, list[tuple[int, int]]]) -> float:
    """``sync_on_compute=False``: each rank's compute is its own data's value, and no collective runs."""
    rank = dist.get_rank()
    metric = factory(sync_on_compute=False)
    with count_collectives() as calls:
        _feed(metric, dense_batches(seed, rank, plans[rank]), flat=False)
        value = metric.compute()
    assert sum(calls.values()) == 0, f"rank {rank}: collectives ran: {calls}"
    _close(value, _feed(factory(sync_on_compute=False), dense_batches(seed, rank, plans[rank]), False).compute(),
           "vs this rank's data alone")
    synced = _feed(factory(sync_on_compute=False), all_dense(seed, plans), flat=False).compute()
    assert not torch.allclose(value, synced), f"rank {rank}: the local value equals the global one, a weak test"
    return _first(value)


class count_collectives:  # lower case: used like a function, `with count_collectives() as calls:`
    """Counts calls to ``torch.distributed`` collectives (patched on the module, as torchmetrics calls them)."""

    NAMES = ("all_gather", "all_reduce", "barrier", "broadcast", "all_gather_object", "all_gather_into_tensor")

    def __enter__(self) -> dict[str, int]:
        self.calls = dict.fromkeys(self.NAMES, 0)
        self.saved = {name: getattr(dist, name) for name in self.NAMES}
        for name, original in self.saved.items():
            setattr(dist, name, self._counting(name, original))
        return self.calls

    def _counting(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return original(*args, **kwargs)

        return counted

    def __exit__(self, *exc: object) -> None:
        for name, original in self.saved.items():
            setattr(dist, name, original)


def _list_states(metric: Any) -> list[str]:
    """The names of the metric's list states (``dist_reduce_fx="cat"``, kept items), whatever they are."""
    return [name for name, default in metric._defaults.items() if isinstance(default, list)]


def _as_tensor(state: Any) -> torch.Tensor | None:
    if isinstance(state, list):
        return dim_zero_cat(state) if state else None
    return state if state.numel() else None


def task_dense_sync_states(seed: int, factory: Callable[..., Any], plans: dict[int, list[tuple[int, int]]]) -> dict:
    """``sync()`` (what ``compute`` runs first) of a dense metric: the summed ``total`` and ``count`` are
    exact, the list states stay empty, and ``unsync()`` restores the local states. Returns the counts of
    states, gathers (torchmetrics' ``gather_all_tensors`` calls) and ``torch.distributed`` collectives."""
    rank = dist.get_rank()
    metric = _feed(factory(), dense_batches(seed, rank, plans[rank]), flat=False)
    local = {name: value.clone() for name, value in metric.metric_state.items() if isinstance(value, torch.Tensor)}
    reference = _feed(factory(sync_on_compute=False), all_dense(seed, plans), flat=False)
    gathers = []

    def counting_gather(tensor: torch.Tensor, group: Any = None) -> list[torch.Tensor]:
        gathers.append(tuple(tensor.shape))
        return gather_all_tensors(tensor, group)

    with count_collectives() as calls:
        metric.sync(dist_sync_fn=counting_gather)
    for name in ("total", "count"):
        _close(getattr(metric, name), getattr(reference, name), f"synced {name}")
    for name in _list_states(metric):
        assert _as_tensor(getattr(metric, name)) is None, f"{name} should be empty: {getattr(metric, name)}"
    metric.unsync()
    for name, tensor in local.items():
        assert torch.equal(getattr(metric, name), tensor), f"state {name} not restored by unsync()"
    return {"states": len(metric._reductions), "gathers": len(gathers),
            "scalar_states": sum(1 for shape in gathers if shape == ()), **calls}


def task_flat_sync_states(seed: int, factory: Callable[..., Any]) -> list[str]:
    """``sync()`` of a flat metric: each list state is the ranks' local states concatenated in rank order."""
    rank = dist.get_rank()
    split = flat_split(seed)
    per_rank = [_feed(factory(sync_on_compute=False), split[r], flat=True) for r in range(WORLD_SIZE)]
    metric = _feed(factory(), split[rank], flat=True)
    metric.sync()
    names = _list_states(metric)
    for name in names:
        parts = [part for r in range(WORLD_SIZE) if (part := _as_tensor(getattr(per_rank[r], name))) is not None]
        state = _as_tensor(getattr(metric, name))
        if not parts:
            assert state is None, f"rank {rank}: synced {name} should be empty, got {state}"
            continue
        expected = torch.cat(parts)
        same = state is not None and state.dtype == expected.dtype and state.shape == expected.shape
        assert same and bool(torch.isclose(state, expected, rtol=0, atol=0, equal_nan=True).all()), (
            f"rank {rank}: synced {name} {state} != {expected}"
        )
    metric.unsync()
    return names


def nanmedian_of(function: Callable[..., torch.Tensor], preds: torch.Tensor, target: torch.Tensor,
                 **kwargs: Any) -> torch.Tensor:
    """The median over queries of a functional's per-query values (skipped queries ignored)."""
    return function(preds, target, reduction="none", **kwargs).nanmedian(0).values


def _first(value: Any) -> float:
    if isinstance(value, dict):
        value = next(iter(value.values()))
    return float(value.reshape(-1)[0])


# ---------------------------------------------------------------------------------------------- Lightning

VAL_QUERIES, VAL_ITEMS, VAL_FEATURES = 64, 20, 4
VAL_MEASURES = ("ndcg@10", "map", "P@5", "mrr")
VAL_WEIGHTS = (1.0, 0.5, 0.25, 0.125)  # with integer features, scores are exact in float32 at any batch size


def validation_data() -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed features ``[Q, N, F]`` (small integers) and graded labels ``[Q, N]`` in 0..3, loosely following
    the scores; query 7 has no relevant item."""
    g = torch.Generator().manual_seed(20240607)
    features = torch.randint(0, 50, (VAL_QUERIES, VAL_ITEMS, VAL_FEATURES), generator=g).float()
    noise = torch.randint(0, 120, (VAL_QUERIES, VAL_ITEMS), generator=g)
    labels = torch.bucketize(validation_scores(features) + noise, torch.tensor([110.0, 140.0, 160.0]))
    labels[7] = 0
    return features, labels


def validation_scores(features: torch.Tensor) -> torch.Tensor:
    """What the module's scorer computes, for the reference in the test process."""
    return features @ torch.tensor(VAL_WEIGHTS)


def __getattr__(name: str) -> Any:
    if name == "RankingValModule":
        _define_lightning_module()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _define_lightning_module() -> None:
    import lightning as L

    from torchrank.metrics import NDCG, RankingMetrics

    class RankingValModule(L.LightningModule):
        """A fixed linear scorer. ``NDCG(k=5)`` is logged as a metric object (Lightning computes, syncs and
        resets it); ``RankingMetrics`` is computed at the epoch end and logged as a dict of tensors, because
        Lightning takes neither a Metric whose ``compute`` returns a dict in ``self.log`` ("must be a tensor")
        nor a Metric that is not a ``MetricCollection`` in ``self.log_dict`` (it calls ``.items()``)."""

        __qualname__ = "RankingValModule"  # built in a function, pickled by reference as _dist_workers.<this>

        def __init__(self) -> None:
            super().__init__()
            self.scorer = torch.nn.Linear(VAL_FEATURES, 1, bias=False)
            with torch.no_grad():
                self.scorer.weight.copy_(torch.tensor([VAL_WEIGHTS]))
            self.ndcg = NDCG(k=5)
            self.metrics = RankingMetrics(list(VAL_MEASURES))

        def forward(self, features: torch.Tensor) -> torch.Tensor:
            return self.scorer(features).squeeze(-1)

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            features, labels = batch
            scores = self(features)
            self.ndcg.update(scores, labels)
            self.metrics.update(scores, labels)
            self.log("val_ndcg", self.ndcg, on_step=False, on_epoch=True)
            # how many queries the ranks saw together: each exactly once
            self.log("val_queries", float(labels.shape[0]), on_step=False, on_epoch=True, reduce_fx="sum",
                     sync_dist=True)

        def on_validation_epoch_end(self) -> None:
            # compute() syncs the states across ranks itself: the values are global already, so no
            # sync_dist on top (Lightning's "use sync_dist=True" hint does not apply)
            self.log_dict({f"val_{name}": value for name, value in self.metrics.compute().items()})
            self.metrics.reset()  # not a logged metric object: Lightning does not reset it

    globals()["RankingValModule"] = RankingValModule
