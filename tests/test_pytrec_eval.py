"""Per-query agreement with pytrec_eval (trec_eval's C code) on random graded queries.

1,200 queries with graded labels 0-3, list lengths 1-60 padded to 60, unjudged retrieved items and judged
relevant items missing from the run (given through ``ideal_target``), tied scores ordered as trec_eval
orders them (score descending, then docno descending) with ``ties="first"``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchrank.functional as F

pytrec_eval = pytest.importorskip("pytrec_eval")

CUTS = (1, 5, 10, 30, 100)


def _random_trec(seed: int, num_queries: int = 1200, width: int = 60):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, width + 1, num_queries)
    mask = np.arange(width)[None, :] < lengths[:, None]
    # coarse scores so that ties happen; input order puts the larger docno first among ties
    preds = np.round(rng.normal(size=(num_queries, width)), 1)
    labels = rng.choice(4, size=(num_queries, width), p=[0.55, 0.25, 0.12, 0.08])
    judged = rng.random((num_queries, width)) < 0.8
    labels = np.where(judged & mask, labels, 0)
    missing = rng.choice(4, size=(num_queries, 8), p=[0.4, 0.3, 0.2, 0.1]) * (rng.random((num_queries, 8)) < 0.5)

    qrels, run, ideal_rows = {}, {}, []
    for q in range(num_queries):
        qid = f"q{q}"
        docs = {f"d{width - 1 - i:03d}": i for i in range(lengths[q])}
        run[qid] = {d: float(preds[q, i]) for d, i in docs.items()}
        qrels[qid] = {d: int(labels[q, i]) for d, i in docs.items() if judged[q, i]}
        qrels[qid].update({f"m{j}": int(v) for j, v in enumerate(missing[q]) if v > 0})
        qrels[qid].setdefault("never_retrieved", 0)  # every query needs a judgment
        ideal_rows.append(list(qrels[qid].values()))
    ideal = np.zeros((num_queries, max(map(len, ideal_rows))))
    for q, row in enumerate(ideal_rows):
        ideal[q, : len(row)] = row
    tensors = dict(
        preds=torch.tensor(preds), target=torch.tensor(labels, dtype=torch.float64),
        mask=torch.tensor(mask), ideal_target=torch.tensor(ideal),
    )
    return qrels, run, tensors


def _trec_measures():
    cut = ",".join(map(str, CUTS))
    return {f"map_cut.{cut}", f"P.{cut}", f"recall.{cut}", f"ndcg_cut.{cut}", f"success.{cut}",
            "map", "ndcg", "recip_rank", "Rprec"}


@pytest.fixture(scope="module", params=[1, 2], ids=["level1", "level2"])
def evaluated(request):
    level = request.param
    qrels, run, tensors = _random_trec(seed=level)
    result = pytrec_eval.RelevanceEvaluator(qrels, _trec_measures(), relevance_level=level).evaluate(run)
    qids = [f"q{q}" for q in range(len(run))]

    def reference(name: str) -> torch.Tensor:
        return torch.tensor([result[q][name] for q in qids], dtype=torch.float64)

    return level, tensors, reference


CUTOFF_PAIRS = [
    ("P", F.precision), ("recall", F.recall), ("map_cut", F.average_precision),
    ("ndcg_cut", F.ndcg), ("success", F.hit_rate),
]


@pytest.mark.parametrize(("trec_name", "fn"), CUTOFF_PAIRS, ids=[p[0] for p in CUTOFF_PAIRS])
def test_cutoff_measures(evaluated, trec_name, fn):
    level, tensors, reference = evaluated
    got = fn(**tensors, k=list(CUTS), ties="first", reduction="none", relevance_threshold=level)
    for j, k in enumerate(CUTS):
        torch.testing.assert_close(got[:, j], reference(f"{trec_name}_{k}"), rtol=0, atol=1e-9, msg=f"@{k}")


WHOLE_PAIRS = [
    ("map", F.average_precision), ("ndcg", F.ndcg), ("recip_rank", F.reciprocal_rank), ("Rprec", F.r_precision),
]


@pytest.mark.parametrize(("trec_name", "fn"), WHOLE_PAIRS, ids=[p[0] for p in WHOLE_PAIRS])
def test_whole_list_measures(evaluated, trec_name, fn):
    level, tensors, reference = evaluated
    got = fn(**tensors, ties="first", reduction="none", relevance_threshold=level)
    torch.testing.assert_close(got, reference(trec_name), rtol=0, atol=1e-9)


def test_flat_input_agrees(evaluated):
    """The same queries as flat ``(preds, target, indexes)``, shuffled, give the same per-query values."""
    _, tensors, _ = evaluated
    mask = tensors["mask"]
    rows = torch.arange(mask.shape[0]).unsqueeze(1).expand_as(mask)[mask]
    shuffle = torch.randperm(rows.numel(), generator=torch.Generator().manual_seed(0))
    preds, target = tensors["preds"][mask][shuffle], tensors["target"][mask][shuffle]
    got = F.ndcg(preds, target, indexes=rows[shuffle] * 7 + 3, k=10, ties="average", reduction="none")
    dense = F.ndcg(tensors["preds"], tensors["target"], mask=mask, k=10, reduction="none")
    torch.testing.assert_close(got, dense)
