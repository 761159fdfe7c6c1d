"""Search plus measures against the anchors on the same embeddings: sentence-transformers'
``InformationRetrievalEvaluator`` (given the corpus embeddings and a stand-in query encoder; skipped where
sentence-transformers is not installed: it is in the ``bench`` extra) and pytrec_eval on the top-k run.

Where the definitions agree the values are equal; the one difference, the evaluator's MAP@k dividing by
``min(k, R)`` where trec_eval divides by ``R``, is checked as such (it shows only for queries with more than ``k``
relevant documents).
"""

from __future__ import annotations

import pytest
import torch

import torchrank.functional as F

K = 100
OURS = ["ndcg@10", "recall@100", "mrr@10", "P@10", "map@100", "map@10", "success@10"]


def retrieval_data(integer: bool, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """60 queries over 1,500 documents; 1 to 30 relevant documents per query (-1 pads), the query near them.
    ``integer``: small-integer embeddings, so that scores tie often."""
    g = torch.Generator().manual_seed(seed)
    corpus = torch.randn(1500, 24, generator=g)
    relevant = torch.rand(60, 1500, generator=g).argsort(1)[:, :30]  # distinct ids per query
    relevant = torch.where(torch.arange(30) < torch.randint(1, 31, (60, 1), generator=g), relevant, -1)
    near = (corpus[relevant.clamp(min=0)] * (relevant >= 0).unsqueeze(-1)).sum(1)
    queries = near / (relevant >= 0).sum(1, keepdim=True) + 0.3 * torch.randn(60, 24, generator=g)
    if integer:
        return (queries * 2).round(), (corpus * 2).round(), relevant
    return queries, corpus, relevant


def torchrank_values(queries: torch.Tensor, corpus: torch.Tensor, relevant: torch.Tensor
                     ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    scores, ids = F.search(queries, corpus, K)
    return F.evaluate(measures=OURS, reduction="none", **F.ids_to_dense(ids, relevant)), scores, ids


class QueryEncoder:
    """The evaluator's model: ``encode_query`` returns the given query embeddings (no model, no download)."""

    def __init__(self, embeddings: torch.Tensor) -> None:
        self.embeddings = embeddings

    def encode_query(self, sentences: list[str], **_: object) -> torch.Tensor:
        assert len(sentences) == len(self.embeddings)
        return self.embeddings

    encode = encode_query  # versions before 5 call model.encode


@pytest.mark.parametrize("integer", [False, True], ids=["floats", "tied-integers"])
def test_equal_to_information_retrieval_evaluator(integer: bool) -> None:
    pytest.importorskip("sentence_transformers")
    try:  # where version 6 keeps it; the old path still imports, with a deprecation warning
        from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    except ImportError:
        from sentence_transformers.evaluation import InformationRetrievalEvaluator
    from sentence_transformers.util import dot_score

    queries, corpus, relevant = retrieval_data(integer)
    relevant_sets = {q: {int(i) for i in row if i >= 0} for q, row in enumerate(relevant.tolist())}
    evaluator = InformationRetrievalEvaluator(
        queries={q: "" for q in range(len(queries))}, corpus={c: "" for c in range(len(corpus))},
        relevant_docs=relevant_sets, corpus_chunk_size=400, mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[10],
        precision_recall_at_k=[10, 100], map_at_k=[10, 100], score_functions={"dot": dot_score}, write_csv=False)
    compute = getattr(evaluator, "compute_all_metrics", None) or evaluator.compute_metrices
    theirs = compute(QueryEncoder(queries), corpus_embeddings=corpus)["dot"]
    ours, _, _ = torchrank_values(queries, corpus, relevant)
    mean = {name: float(v.double().mean()) for name, v in ours.items()}
    # the same definitions; ties (integer embeddings) ordered alike: score, then the lower corpus id
    for name, (key, at) in {"ndcg@10": ("ndcg@k", 10), "recall@100": ("recall@k", 100), "mrr@10": ("mrr@k", 10),
                            "P@10": ("precision@k", 10), "success@10": ("accuracy@k", 10)}.items():
        assert theirs[key][at] == pytest.approx(mean[name], abs=1e-6), name
    # MAP@k: the evaluator divides the sum of precisions by min(k, R), trec_eval (and torchrank) by R
    total = (relevant >= 0).sum(1).double()
    for at in (10, 100):
        rescaled = (ours[f"map@{at}"].double() * total / total.clamp(max=at)).mean()
        assert theirs["map@k"][at] == pytest.approx(float(rescaled), abs=1e-6)
    assert (total > 10).any() and theirs["map@k"][10] > mean["map@10"] + 1e-3  # R > k: the definitions part


def test_equal_to_pytrec_eval_on_the_top_k_run() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    queries, corpus, relevant = retrieval_data(integer=False, seed=1)  # no ties: trec_eval orders them otherwise
    ours, scores, ids = torchrank_values(queries, corpus, relevant)
    qrels = {str(q): {str(int(i)): 1 for i in row if i >= 0} for q, row in enumerate(relevant.tolist())}

    def run(depth: int) -> dict[str, dict[str, float]]:
        return {str(q): {str(d): float(s) for d, s in zip(ids[q, :depth].tolist(), scores[q, :depth].tolist(),
                                                          strict=True)} for q in range(len(ids))}

    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "P.10", "map_cut.10,100"}).evaluate(
        run(K))
    top10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run(10))  # MRR@10: the run cut at 10
    for name, (source, key) in {"ndcg@10": (full, "ndcg_cut_10"), "recall@100": (full, "recall_100"),
                                "P@10": (full, "P_10"), "map@100": (full, "map_cut_100"),
                                "map@10": (full, "map_cut_10"), "mrr@10": (top10, "recip_rank")}.items():
        want = torch.tensor([source[str(q)][key] for q in range(len(ids))], dtype=torch.float64)
        torch.testing.assert_close(ours[name].double(), want, atol=1e-6, rtol=0, msg=name)
