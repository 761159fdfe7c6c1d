"""Per-rank tasks (module level, so spawned pool workers can unpickle them) of
``test_recommenders_distributed.py``: beyond-accuracy metrics and id-list input synced over 2 gloo processes
equal one process fed both ranks' lists."""

from __future__ import annotations

import torch
import torch.distributed as dist

import torchrank.functional as F
from torchrank import metrics

NUM_ITEMS = 40
PLANS = {0: [5, 1, 7], 1: [9]}  # uneven: 3 updates of 13 lists against one of 9


def lists(seed: int, rank: int, plan: dict[int, list[int]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One rank's updates: ranked ids ``[B, 6]`` (some padding, some repeats) and relevant ids ``[B, 4]``."""
    g = torch.Generator().manual_seed(1009 * seed + rank)
    out = []
    for rows in plan[rank]:
        ranked = torch.randint(0, NUM_ITEMS, (rows, 6), generator=g)
        ranked[torch.rand(rows, 6, generator=g) < 0.1] = -1
        relevant = torch.randint(0, NUM_ITEMS, (rows, 4), generator=g)
        out.append((ranked, relevant))
    return out


def builders() -> dict[str, object]:
    g = torch.Generator().manual_seed(5)
    popularity = torch.rand(NUM_ITEMS, generator=g) * 0.9 + 0.05
    embeddings = torch.randn(NUM_ITEMS, 8, generator=g)
    return {
        "coverage": lambda **kw: metrics.Coverage(k=4, num_items=NUM_ITEMS, **kw),
        "gini": lambda **kw: metrics.GiniIndex(k=4, num_items=NUM_ITEMS, **kw),
        "entropy": lambda **kw: metrics.ExposureEntropy(k=4, num_items=NUM_ITEMS, **kw),
        "novelty": lambda **kw: metrics.Novelty(k=4, item_popularity=popularity, **kw),
        "popularity": lambda **kw: metrics.AveragePopularity(k=4, item_popularity=popularity, **kw),
        "tail": lambda **kw: metrics.LongTailShare(k=4, item_popularity=popularity, **kw),
        "ild": lambda **kw: metrics.IntraListDiversity(k=4, item_embeddings=embeddings, **kw),
        "personalization": lambda **kw: metrics.Personalization(k=4, num_items=NUM_ITEMS, **kw),
        "ndcg": lambda **kw: metrics.NDCG(k=5, **kw),
    }


def _feed(metric, batches, by_ids: bool) -> None:
    for ranked, relevant in batches:
        if by_ids:
            metric.update(**F.ids_to_dense(ranked, relevant))
        else:
            metric.update(ranked)


def task_synced_equals_one_process(seed: int, plan: dict[int, list[int]]) -> dict[str, float]:
    """Every metric synced over the ranks equals the same metric fed every rank's lists in one process."""
    rank = dist.get_rank()
    mine = lists(seed, rank, plan)
    everything = [batch for r in sorted(plan) for batch in lists(seed, r, plan)]
    values = {}
    for name, build in builders().items():
        synced, reference = build(), build(sync_on_compute=False)
        _feed(synced, mine, name == "ndcg")
        _feed(reference, everything, name == "ndcg")
        got, want = synced.compute(), reference.compute()
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9, msg=lambda m, n=name: f"{n}: {m}")
        values[name] = float(got)
    return values


def task_auc_synced(seed: int, plan: dict[int, list[int]]) -> list[float]:
    """AUROC (per-query mean) and GAUC (weighted sums) synced over the ranks equal one process on all rows."""
    def rows(rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        g = torch.Generator().manual_seed(7919 * seed + rank)
        return [(torch.randint(0, 4, (n, 9), generator=g).float(), torch.randint(0, 2, (n, 9), generator=g))
                for n in plan[rank]]

    mine = rows(dist.get_rank())
    everything = [batch for r in sorted(plan) for batch in rows(r)]
    values = []
    for build in (metrics.AUROC, metrics.GAUC):
        synced, reference = build(), build(sync_on_compute=False)
        for preds, target in mine:
            synced.update(preds, target)
        for preds, target in everything:
            reference.update(preds, target)
        torch.testing.assert_close(synced.compute(), reference.compute(), atol=1e-7, rtol=0)
        values.append(float(synced.compute()))
    return values


def task_gauc_flat_synced(seed: int, plan: dict[int, list[int]]) -> float:
    """GAUC of flat items whose queries span updates and ranks (and one dense update on rank 0), synced, equals
    one process fed every rank's updates."""
    def updates(rank: int) -> list[dict[str, torch.Tensor]]:
        g = torch.Generator().manual_seed(104729 * seed + rank)
        out = [{"preds": torch.randint(0, 4, (n,), generator=g).float(),
                "target": torch.randint(0, 2, (n,), generator=g),
                "indexes": torch.randint(0, 6, (n,), generator=g)} for n in plan[rank]]
        if rank == 0:
            out.append({"preds": torch.rand(3, 5, generator=g), "target": torch.randint(0, 2, (3, 5), generator=g)})
        return out

    synced, reference = metrics.GAUC(), metrics.GAUC(sync_on_compute=False)
    for batch in updates(dist.get_rank()):
        synced.update(**batch)
    for batch in [b for r in sorted(plan) for b in updates(r)]:
        reference.update(**batch)
    torch.testing.assert_close(synced.compute(), reference.compute(), atol=1e-7, rtol=0)
    return float(synced.compute())
