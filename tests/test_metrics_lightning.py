"""Lightning end to end on 2 CPU processes (``ddp_spawn``, gloo): the logged ranking metrics equal the
metrics of the whole validation set computed in one process.

The module and the data live in ``_dist_workers`` (picklable by reference for the spawned processes). The
64 queries split evenly over the 2 ranks, so Lightning's ``DistributedSampler`` repeats no query.
"""

from __future__ import annotations

import pytest

pytest.importorskip("lightning", reason="the Lightning test needs `lightning`")

import _dist_workers as W
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

import torchrank.functional as F


def test_ddp_spawn_validate_logs_global_metrics():
    features, labels = W.validation_data()
    assert W.VAL_QUERIES % 2 == 0, "an even number of queries: the sampler repeats none"
    loader = DataLoader(TensorDataset(features, labels), batch_size=5)  # 32 queries a rank: 6 batches of 5, one of 2
    trainer = L.Trainer(
        accelerator="cpu", devices=2, strategy="ddp_spawn", max_epochs=1, enable_checkpointing=False, logger=False,
        enable_progress_bar=False, enable_model_summary=False,
    )
    module = W.RankingValModule()
    (logged,) = trainer.validate(module, dataloaders=loader, verbose=False)

    scores = W.validation_scores(features)
    expected = {"val_ndcg": F.ndcg(scores, labels, k=5).item(), "val_queries": float(W.VAL_QUERIES)}
    expected |= {f"val_{name}": value.item() for name, value in F.evaluate(scores, labels, W.VAL_MEASURES).items()}
    assert logged == pytest.approx(expected, abs=1e-6, rel=0)
    assert {name: value.item() for name, value in trainer.callback_metrics.items()} == pytest.approx(
        expected, abs=1e-6, rel=0
    )
    # not one rank's value: rank 0 sees queries 0, 2, 4, ... (DistributedSampler without shuffling)
    rank0 = F.ndcg(scores[0::2], labels[0::2], k=5).item()
    assert abs(rank0 - expected["val_ndcg"]) > 1e-3


def test_module_scores_match_the_reference_scorer():
    features, _ = W.validation_data()
    module = W.RankingValModule()
    with torch.no_grad():
        assert torch.equal(module(features), W.validation_scores(features))
        assert torch.equal(torch.cat([module(part) for part in features.split(5)]), W.validation_scores(features))
