"""Shared fixtures: devices (CUDA cases skip without a GPU) and the measures under test."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch

import torchrank.functional as F

DATA = Path(__file__).parent / "data"

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]

# every measure with a cut-off, as (name, function, higher_is_better); partials fix their own parameters
CUTOFF_MEASURES = [
    ("precision", F.precision, True),
    ("recall", F.recall, True),
    ("f1", F.f1, True),
    ("hit_rate", F.hit_rate, True),
    ("average_precision", F.average_precision, True),
    ("average_recall", F.average_recall, True),
    ("dcg", F.dcg, True),
    ("ndcg", F.ndcg, True),
    ("ndcg_exp", functools.partial(F.ndcg, gain="exponential"), True),
    ("reciprocal_rank", F.reciprocal_rank, True),
    ("err", functools.partial(F.err, max_label=3), True),
    ("rbp", functools.partial(F.rbp, p=0.7, max_label=3), True),
    ("mean_rank", F.mean_rank, False),
    ("first_relevant_position", F.first_relevant_position, False),
]
WHOLE_LIST_MEASURES = [
    ("r_precision", F.r_precision, True),
    ("kendall_tau", F.kendall_tau, True),
    ("kendall_distance", functools.partial(F.kendall_tau, distance=True), False),
]
ALL_MEASURES = CUTOFF_MEASURES + WHOLE_LIST_MEASURES


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param
