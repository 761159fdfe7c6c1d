"""CorpusRetrieval in one process: values against a brute-force reference (the whole ``[Q, C]`` score matrix, dense
labels, torchrank's measures) and against pytrec_eval on the top-k run; layout invariances; bad input.

The distributed cases (queries gathered, shards merged) are in test_metrics_distributed.py.
"""

from __future__ import annotations

import math

import pytest
import torch

import torchrank.functional as F
from torchrank.functional.backends import use_backend
from torchrank.metrics import CorpusRetrieval

K = 20
CUTOFF_MEASURES = ["ndcg@10", "recall@20", "P@5", "map@20", "mrr@10", "ndcg@20"]


def _data(seed=0, corpus=150, queries=24, dim=8, width=6):
    """Corpus embeddings with shuffled, non-contiguous ids; queries whose judged ids are mostly in the corpus, some
    absent from it (ids >= 10,000), graded 0..3, padded with -1; query 0 has no judged id, query 1 only label 0."""
    g = torch.Generator().manual_seed(seed)
    docs = torch.randn(corpus, dim, generator=g)
    ids = torch.randperm(5 * corpus, generator=g)[:corpus] * 3 + 1
    q = torch.randn(queries, dim, generator=g)
    relevant = ids[torch.randint(0, corpus, (queries, width), generator=g)]
    absent = torch.rand(queries, width, generator=g) < 0.15
    relevant = torch.where(absent, 10_000 + torch.arange(queries * width).view(queries, width), relevant)
    relevant[torch.rand(queries, width, generator=g) < 0.3] = -1
    labels = torch.randint(0, 4, (queries, width), generator=g)
    relevant[0] = -1
    labels[1] = 0
    relevant[1, 0] = ids[3]
    return docs, ids, q, relevant, labels


def _dense_reference(docs, ids, q, relevant, labels, measures, **options):
    """Every query scored against the whole corpus (one matmul), labels placed by id: torchrank's measures."""
    scores = q @ docs.T
    target = torch.zeros_like(scores, dtype=torch.int64)
    ideal = torch.zeros_like(labels)
    for row in range(q.shape[0]):
        judged = {}
        for i, lab in zip(relevant[row].tolist(), labels[row].tolist(), strict=True):
            if i != -1:
                judged[i] = max(lab, judged.get(i, 0))
        for col, i in enumerate(ids.tolist()):
            target[row, col] = judged.get(i, 0)
        ideal[row, : len(judged)] = torch.tensor(sorted(judged.values(), reverse=True), dtype=torch.int64)
    return F.evaluate(scores, target, measures, ideal_target=ideal, reduction="none", **options)


def _metric_on(docs, ids, q, relevant, labels, measures, corpus_splits=(40, 7, 1, 102), query_splits=(5, 19), **kw):
    metric = CorpusRetrieval(measures, k=K, keep_per_query=True, **kw)
    for d, i in zip(docs.split(list(corpus_splits)), ids.split(list(corpus_splits)), strict=True):
        metric.update_corpus(d, i)
    pad = torch.nn.functional.pad
    for j, (e, r, lab) in enumerate(zip(q.split(list(query_splits)), relevant.split(list(query_splits)),
                                        labels.split(list(query_splits)), strict=True)):
        metric.update_queries(e, pad(r, (0, 2 * j), value=-1), pad(lab, (0, 2 * j)))  # widths differ
    return metric


def test_values_equal_the_dense_brute_force():
    docs, ids, q, relevant, labels = _data()
    metric = _metric_on(docs, ids, q, relevant, labels, CUTOFF_MEASURES)
    got = metric.compute()
    expected = _dense_reference(docs, ids, q, relevant, labels, CUTOFF_MEASURES)
    for j, name in enumerate(CUTOFF_MEASURES):
        torch.testing.assert_close(metric.per_query_values()[:, j], expected[name].double(), atol=1e-6, rtol=0)
        torch.testing.assert_close(got[name], expected[name].mean(), atol=1e-6, rtol=0)
    assert 0 < got["recall@20"] < 1


def test_values_equal_pytrec_eval_on_the_top_k_run():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    docs, ids, q, relevant, labels = _data(seed=1)
    measures = ["map", "ndcg@10", "P@5", "mrr", "recall@20"]
    metric = _metric_on(docs, ids, q, relevant, labels, measures, query_splits=(24,))
    metric.compute()
    values, top = (q @ docs.T).topk(K, dim=1)
    run = {f"q{r}": {f"d{ids[c]}": float(v) for v, c in zip(values[r].tolist(), top[r].tolist(), strict=True)}
           for r in range(q.shape[0])}
    qrels = {f"q{r}": {f"d{i}": int(lab) for i, lab in zip(relevant[r].tolist(), labels[r].tolist(), strict=True)
                       if i != -1} for r in range(q.shape[0])}
    judged = [r for r in range(q.shape[0]) if any(v > 0 for v in qrels[f"q{r}"].values())]
    names = {"map": "map", "ndcg@10": "ndcg_cut_10", "P@5": "P_5", "mrr": "recip_rank", "recall@20": "recall_20"}
    evaluator = pytrec_eval.RelevanceEvaluator({f"q{r}": qrels[f"q{r}"] for r in judged}, set(names.values()))
    reference = evaluator.evaluate(run)
    per_query = metric.per_query_values()
    assert len(judged) >= 15
    for j, name in enumerate(measures):
        want = torch.tensor([reference[f"q{r}"][names[name]] for r in judged], dtype=torch.float64)
        torch.testing.assert_close(per_query[judged, j], want, atol=1e-6, rtol=0)


def test_chunking_layout_and_similarity_do_not_change_values():
    docs, ids, q, relevant, labels = _data(seed=2)
    base = _metric_on(docs, ids, q, relevant, labels, CUTOFF_MEASURES).compute()
    for kw, splits in (({"chunk_size": 7}, (150,)), ({}, (1,) * 10 + (140,))):
        other = _metric_on(docs, ids, q, relevant, labels, CUTOFF_MEASURES, corpus_splits=splits, **kw).compute()
        assert other == base
    perm = torch.randperm(150, generator=torch.Generator().manual_seed(0))
    assert _metric_on(docs[perm], ids[perm], q, relevant, labels, CUTOFF_MEASURES).compute() == base
    unit = torch.nn.functional.normalize
    cosine = _metric_on(docs, ids, q, relevant, labels, CUTOFF_MEASURES, similarity="cosine").compute()
    scaled = _metric_on(unit(docs, dim=1), ids, q, relevant, labels, CUTOFF_MEASURES).compute()
    for name in CUTOFF_MEASURES:
        torch.testing.assert_close(cosine[name], scaled[name], atol=1e-6, rtol=0)


def test_ties_go_to_the_lowest_id_whatever_the_shard_order():
    docs = torch.tensor([[1.0, 0.0]] * 6)  # six equal documents: the top 2 are ids 3 and 5 in every layout
    ids = torch.tensor([9, 5, 7, 3, 11, 8])
    queries, relevant = torch.tensor([[1.0, 0.0]]), torch.tensor([[5, 9]])
    for order in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [3, 0, 4, 1, 5, 2]):
        metric = CorpusRetrieval(["P@2", "recall@2"], k=2, ties="first")
        for j in order:
            metric.update_corpus(docs[j : j + 1], ids[j : j + 1])
        metric.update_queries(queries, relevant)
        assert {n: v.item() for n, v in metric.compute().items()} == {"P@2": 0.5, "recall@2": 0.5}


def test_k_larger_than_the_corpus_pads_the_lists():
    metric = CorpusRetrieval(["P@5", "recall@5", "ndcg@5"], k=5)
    metric.update_corpus(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1]))
    metric.update_queries(torch.tensor([[1.0, 0.2]]), torch.tensor([[1, 4]]))  # 4: judged, never added
    values = {n: round(v.item(), 4) for n, v in metric.compute().items()}
    second = 1 / math.log2(3)  # id 1 at rank 2; id 4 never retrieved, in the ideal at rank 2
    assert values == {"P@5": 0.2, "recall@5": 0.5, "ndcg@5": round(second / (1 + second), 4)}
    empty = CorpusRetrieval(["recall@5"], k=5)  # no corpus at all: nothing retrieved
    empty.update_queries(torch.ones(2, 3), torch.tensor([[0], [1]]))
    assert empty.compute()["recall@5"].item() == 0.0


def test_bad_input_is_refused_and_nothing_is_lost():
    docs, ids, q, relevant, labels = _data(seed=3)
    metric, twin = CorpusRetrieval(["ndcg@10"], k=10), CorpusRetrieval(["ndcg@10"], k=10)  # twin: valid calls only
    for m in (metric, twin):
        m.update_corpus(docs[:100], ids[:100])
        m.update_queries(q, relevant, labels)
    bad_calls = [
        (lambda: metric.update_corpus(docs[:5], ids[:5].float()), "`ids` must be a \\[5\\] integer tensor"),
        (lambda: metric.update_corpus(docs[:5], ids[:4]), "`ids` must be a \\[5\\] integer"),
        (lambda: metric.update_corpus(docs[:5, :4], ids[:5]), "\\[\\*, 8\\] torch.float32 like"),
        (lambda: metric.update_corpus(docs[:5].double(), ids[:5]), "like the embeddings added before"),
        (lambda: metric.update_queries(q[:2, :3], relevant[:2]), "\\[\\*, 8\\]"),
        (lambda: metric.update_queries(q[:2], relevant[:2].float()), "`relevant_ids` must be a \\[2, M\\] integer"),
        (lambda: metric.update_queries(q[:2], relevant[:3]), "`relevant_ids` must be a \\[2, M\\]"),
        (lambda: metric.update_queries(q[:2], relevant[:2], labels[:2, :1]), "`relevant_labels` must be a tensor"),
        (lambda: metric.update_corpus(torch.full((2, 8), torch.nan), ids[100:102]), "`embeddings` of update_corpus "
                                                                                    "holds NaN"),
        (lambda: metric.update_corpus(docs[100:102], torch.tensor([-1, 4])), "`ids` of update_corpus holds a neg"),
        (lambda: metric.update_queries(q[:1] * torch.inf, relevant[:1]), "`embeddings` of update_queries holds"),
        (lambda: metric.update_queries(q[2:3], relevant[2:3], labels[2:3] - 9), "`relevant_labels` of update_queries"),
        (lambda: metric.update(q, relevant), "update_corpus"),
        (lambda: metric(q, relevant), "update_corpus"),
    ]
    for call, match in bad_calls:
        with pytest.raises((ValueError, TypeError), match=match):
            call()
        for m in (metric, twin):  # a valid update after the refused call (and a new compute, not the cached one)
            m.update_queries(q[2:4], relevant[2:4], labels[2:4])
        assert metric.compute() == twin.compute()  # nothing stored, nothing lost


def test_configuration_errors():
    with pytest.raises(ValueError, match="deeper than the 10 documents"):
        CorpusRetrieval(["ndcg@10", "recall@100"], k=10)
    with pytest.raises(ValueError, match="`k` must be a positive int"):
        CorpusRetrieval(["ndcg@10"], k=0)
    with pytest.raises(ValueError, match="`similarity`"):
        CorpusRetrieval(["ndcg@10"], k=10, similarity="l2")
    with pytest.raises(ValueError, match="Unknown measure"):
        CorpusRetrieval(["ndcg@10", "nope"], k=10)
    with pytest.raises(TypeError, match="single string"):
        CorpusRetrieval("ndcg@10", k=10)


def test_torchmetrics_argument_names_say_what_to_write():
    """As the other metric classes (issue 30): torchmetrics' `top_k` is a cut-off in a measure's name here (`k` is
    the documents retrieved); Metric's own options still reach torchmetrics' check."""
    with pytest.raises(TypeError, match=r"`top_k`, use the cut-off in each measure's name"):
        CorpusRetrieval(["ndcg@10"], k=100, top_k=10)
    with pytest.raises(TypeError, match="`ignore_index` has no counterpart in CorpusRetrieval"):
        CorpusRetrieval(["ndcg@10"], k=10, ignore_index=-1)
    with pytest.raises(ValueError, match="Unexpected keyword"):
        CorpusRetrieval(["ndcg@10"], k=10, sync_on_computation=True)


def test_compute_before_any_update_warns_once_in_torchrank_words():
    """One warning naming the class the user holds, at the user's line: neither torchmetrics' "may lead to errors"
    nor that of the RankingMetrics inside."""
    import warnings

    metric = CorpusRetrieval(["ndcg@10", "recall@10"], k=10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = metric.compute()
    assert [str(w.message).split(":")[0] for w in caught] == [
        "CorpusRetrieval.compute() was called before any update() since the metric was created or reset"
    ]
    assert caught[0].filename == __file__
    assert all(torch.isnan(v) for v in value.values())


def test_device_path_defers_value_checks_to_compute():
    """Under the torch backend (the device path, exercised on CPU) a bad update is found without a host read and
    compute raises, naming the first update with the problem."""
    docs, ids, q, relevant, labels = _data(seed=4)
    with use_backend("torch"):
        metric = CorpusRetrieval(["ndcg@10"], k=10)
        metric.update_corpus(docs, ids)
        metric.update_queries(q, relevant, labels)
        metric.update_corpus(torch.full((1, 8), torch.nan), torch.tensor([99_999]))
        with pytest.raises(ValueError, match="`embeddings` of update_corpus holds NaN or infinity in update 3"):
            metric.compute()
        metric.reset()
        metric.update_corpus(docs, ids)
        metric.update_queries(q, relevant, labels)
        reference = _dense_reference(docs, ids, q, relevant, labels, ["ndcg@10"])["ndcg@10"].mean()
        torch.testing.assert_close(metric.compute()["ndcg@10"], reference, atol=1e-6, rtol=0)


def test_repeated_corpus_ids():
    metric = CorpusRetrieval(["P@2"], k=2)
    metric.update_corpus(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1]))
    metric.update_corpus(torch.tensor([[0.9, 0.0], [0.0, -1.0]]), torch.tensor([0, 1]))  # both ids again
    metric.update_queries(torch.tensor([[0.0, 1.0]]), torch.tensor([[1]]))  # top 2: id 1, then id 0 (0.0 vs -1.0)
    assert metric.compute()["P@2"].item() == 0.5  # the second copy of 1 ranks last, outside the top 2
    metric.update_queries(torch.tensor([[1.0, 0.0]]), torch.tensor([[0]]))  # top 2: both copies of id 0
    with pytest.raises(ValueError, match="Corpus id 0 was added more than once"):
        metric.compute()


def test_a_synced_compute_that_raises_leaves_the_local_states():
    """torchmetrics leaves a metric synced when its synced compute raises: every later compute raised "already
    synced" and the states held every process's queries. Synced here through a one-process gather."""
    metric = CorpusRetrieval(["P@2"], k=2, dist_sync_fn=lambda tensor, group=None: [tensor],
                             distributed_available_fn=lambda: True)
    metric.update_corpus(torch.tensor([[1.0, 0.0], [0.9, 0.0]]), torch.tensor([0, 0]))  # id 0 twice
    metric.update_queries(torch.tensor([[1.0, 0.0]]), torch.tensor([[0]]))
    for _ in range(2):  # the same error again, not torchmetrics' "already synced"
        with pytest.raises(ValueError, match="Corpus id 0 was added more than once"):
            metric.compute()
    assert not metric._is_synced and isinstance(metric.query_embeddings, list)
    assert len(metric.query_embeddings) == 1
    metric.reset()
    metric.update_corpus(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1]))
    metric.update_queries(torch.tensor([[1.0, 0.0]]), torch.tensor([[0]]))
    assert metric.compute()["P@2"].item() == 0.5


def test_compute_without_queries_warns_in_its_own_words():
    metric = CorpusRetrieval(["ndcg@3"], k=3)
    metric.update_corpus(torch.eye(3), torch.arange(3))
    with pytest.warns(UserWarning) as caught:
        values = metric.compute()
    assert math.isnan(values["ndcg@3"].item())
    messages = [str(w.message) for w in caught]
    assert any("no query was added by update_queries" in m for m in messages), messages
    assert not any("RankingMetrics" in m for m in messages), messages
    assert all(w.filename == __file__ for w in caught if "update_queries" in str(w.message))


def test_compute_stays_within_the_search_memory_bound():
    """The search's bound (256 queries, 500,000 x 32, memory_budget(64 MiB): well under 100 MiB beyond the inputs)
    holds for the metric too, its corpus added in many small blocks that compute concatenates into groups: the
    allocations compute makes (the torch profiler's, op by op) peak under 100 MiB."""
    from _memory import peak_cpu_allocation

    g = torch.Generator().manual_seed(7)
    corpus, queries = torch.randn(500_000, 32, generator=g), torch.randn(256, 32, generator=g)
    metric = CorpusRetrieval(["recall@100"], k=100)
    for block, ids in zip(corpus.split(5_000), torch.arange(500_000).split(5_000), strict=True):
        metric.update_corpus(block, ids)
    metric.update_queries(queries, torch.arange(256)[:, None])
    with F.memory_budget(64 * 2**20):
        peak = peak_cpu_allocation(metric.compute)
    assert 0 < peak < 100 * 2**20


def test_reset_forgets_the_corpus():
    metric = CorpusRetrieval(["recall@2"], k=2)
    metric.update_corpus(torch.eye(2), torch.tensor([0, 1]))
    metric.reset()
    metric.update_queries(torch.eye(2), torch.tensor([[0], [1]]))
    assert metric.compute()["recall@2"].item() == 0.0


def test_device_path_updates_read_nothing_on_the_host(monkeypatch):
    """Under the torch backend (the GPU path, on CPU tensors) the updates and their value checks queue device work
    only: a validation step never waits for the metric."""
    from test_backends import counting

    docs, ids, q, relevant, labels = _data(seed=5)
    with use_backend("torch"):
        metric = CorpusRetrieval(["ndcg@10"], k=10)
        with counting(monkeypatch) as mode:
            metric.update_corpus(docs[:80], ids[:80])
            metric.update_corpus(docs[80:], ids[80:])
            metric.update_queries(q, relevant, labels)
            metric.update_queries(q[:3], relevant[:3])
        assert mode.reads == []
