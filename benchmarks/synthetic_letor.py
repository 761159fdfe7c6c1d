"""Seeded MSLR-WEB-like learning-to-rank files: 136 raw features of the kinds MSLR-WEB10K/30K has, in its layout.

No real web-search data may ship with torchrank (MSLR-WEB's licence, and its size), yet feature scaling must be
judged on features shaped like real ones: term and stream counts with many tied zeros and heavy tails, lengths,
BM25 / language-model / tf-idf scores computed from those counts, and link, PageRank and click counts with a few
values near 1e8. This module draws such data.

Each document has hidden properties: which query terms it covers and how topical it is for them (``topicality``),
its site's quality, its popularity, and whether it is keyword spam. The features are noisy, heavy-tailed
measurements of these (term frequencies from a negative binomial whose mean grows with stream length and
topicality; BM25, LMIR and tf-idf computed from those frequencies as the MSLR feature list defines them; PageRank,
inlinks and clicks log-normal in quality and popularity). The relevance grade depends nonlinearly on the hidden
properties, not on any one feature's scale: covering every query term matters more than covering most (a
squared coverage), topicality saturates, spam is demoted whatever its term counts, plus per-query and per-document
noise; grades 0-4 cut the relevance at MSLR-WEB10K's label frequencies (52%, 32%, 13%, 2%, 1%), so some queries
have no relevant document. Feature indices follow MSLR-WEB's list (streams body, anchor, title, url, whole
document in each group of five):

    1-5 covered query terms, 6-10 covered ratio, 11-15 stream length, 16-20 IDF, 21-45 term frequency (sum, min,
    max, mean, variance over the query terms), 46-70 the same of tf / stream length, 71-95 of tf * idf,
    96-100 boolean model, 101-105 vector space model, 106-110 BM25, 111-125 LMIR.ABS, .DIR, .JM (negative),
    126 slashes in the URL, 127 URL length, 128 inlinks, 129 outlinks, 130 PageRank, 131 SiteRank,
    132-133 quality scores, 134 query-URL clicks, 135 URL clicks, 136 URL dwell time.

Usage (writes ``Fold1/{train,vali,test}.txt``, MSLR-WEB's layout, which ``LetorDataModule`` finds):

    python -m benchmarks.synthetic_letor OUT_DIR [--seed 0] [--train 43] [--vali 20] [--test 100]

Example:
    >>> queries = draw_queries(3, seed=0)
    >>> [q.features.shape[1] for q in queries], all(18 <= len(q.labels) <= 300 for q in queries)
    ([136, 136, 136], True)
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["LABEL_FREQUENCIES", "NUM_FEATURES", "Query", "draw_queries", "write_fold"]

NUM_FEATURES = 136
#: MSLR-WEB10K's grade frequencies, 0 to 4
LABEL_FREQUENCIES = (0.52, 0.32, 0.13, 0.02, 0.01)
STREAMS = ("body", "anchor", "title", "url")  # the fifth stream, the whole document, is their sum
BM25_K1, BM25_B = 1.2, 0.75
LM_DELTA, LM_MU, LM_LAMBDA = 0.7, 2000.0, 0.1


@dataclass
class Query:
    features: np.ndarray  # [N, 136] float64, raw
    relevance: np.ndarray  # [N] the hidden relevance, before grading
    labels: np.ndarray  # [N] int grades 0-4 (set by draw_queries)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _stream_lengths(rng: np.random.Generator, n: int, popularity: np.ndarray, spam: np.ndarray) -> np.ndarray:
    """``[N, 4]`` token counts of body, anchor, title and URL: a log-normal body (median ~700, tail ~1e5), an
    anchor text that most unpopular pages lack, short titles and URLs."""
    body = np.ceil(np.exp(rng.normal(6.5, 1.2, n)) * np.where(spam, 3, 1))
    has_anchor = rng.random(n) < _sigmoid(popularity - 0.3)
    anchor = np.where(has_anchor, np.ceil(np.exp(rng.normal(2.5 + popularity, 1.5))), 0)
    title = 1 + rng.poisson(7, n)
    url = 2 + rng.poisson(5, n)
    return np.stack([body, anchor, title, url], 1)


def _term_frequencies(
    rng: np.random.Generator, lengths: np.ndarray, covered: np.ndarray, topicality: np.ndarray, spam: np.ndarray
) -> np.ndarray:
    """``[N, 4, T]`` counts of each query term per stream: negative binomial (overdispersed, as real term counts)
    with a mean proportional to the stream length, growing with topicality; 0 where the term is not covered."""
    n, terms = covered.shape
    rate = np.exp(-4.5 + 0.8 * topicality)[:, None, None] * np.array([1.0, 3.0, 8.0, 6.0])[None, :, None]
    rate = rate * np.where(spam, 8.0, 1.0)[:, None, None]
    mean = lengths[:, :, None] * np.minimum(rate, 0.5)
    shape = 0.7  # negative binomial size: variance = mean + mean^2 / shape
    tf = rng.negative_binomial(shape, shape / (shape + mean + 1e-12), size=(n, 4, terms)).astype(np.float64)
    in_stream = rng.random((n, 4, terms)) < np.array([0.95, 0.5, 0.6, 0.4])[None, :, None]
    tf = np.minimum(np.maximum(tf, 1), lengths[:, :, None])  # a covered term occurs, within its stream
    return np.where(covered[:, None, :] & in_stream, tf, 0)


def _summaries(values: np.ndarray) -> list[np.ndarray]:
    """sum, min, max, mean and variance over the query terms (last axis), per stream."""
    return [values.sum(-1), values.min(-1), values.max(-1), values.mean(-1), values.var(-1)]


def _text_features(tf: np.ndarray, lengths: np.ndarray, idf: np.ndarray) -> np.ndarray:
    """Features 1-125: five per group (body, anchor, title, url, whole document) in MSLR-WEB's order."""
    tf = np.concatenate([tf, tf.sum(1, keepdims=True)], 1)  # [N, 5, T]
    lengths = np.concatenate([lengths, lengths.sum(1, keepdims=True)], 1)  # [N, 5]
    terms = tf.shape[-1]
    stream_idf = idf[None, :] + np.array([0.0, 0.8, 0.5, 0.6, 0.1])[:, None]  # [5, T]
    normalized = tf / np.maximum(lengths, 1)[:, :, None]
    tfidf = tf * stream_idf[None]
    covered = (tf > 0).sum(-1).astype(np.float64)
    avg_length = np.maximum(lengths.mean(0), 1)
    saturation = tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * lengths / avg_length)[:, :, None])
    bm25 = (stream_idf[None] * saturation).sum(-1)
    norm = np.sqrt((tfidf**2).sum(-1)) * np.sqrt((stream_idf**2).sum(-1))[None]
    vsm = np.where(norm > 0, (tfidf * stream_idf[None]).sum(-1) / np.maximum(norm, 1e-12), 0)
    collection = np.exp(-stream_idf)[None]  # p(term | collection)
    length = np.maximum(lengths, 1)[:, :, None]
    unique = np.minimum(length, 20 * np.sqrt(length))  # distinct words of the stream (Heaps' law)
    lm_abs = np.log(np.maximum(tf - LM_DELTA, 0) / length + LM_DELTA * unique / length * collection).sum(-1)
    lm_dir = np.log((tf + LM_MU * collection) / (lengths[:, :, None] + LM_MU)).sum(-1)
    lm_jm = np.log((1 - LM_LAMBDA) * tf / length + LM_LAMBDA * collection).sum(-1)
    groups = [covered, covered / terms, lengths, np.broadcast_to(stream_idf.sum(-1), covered.shape)]
    groups += _summaries(tf) + _summaries(normalized) + _summaries(tfidf)
    groups += [(covered == terms).astype(np.float64), vsm, bm25, lm_abs, lm_dir, lm_jm]
    return np.concatenate(groups, 1)


def _draw_query(rng: np.random.Generator, min_docs: int, max_docs: int) -> Query:
    n = int(np.exp(rng.uniform(np.log(min_docs), np.log(max_docs + 1))))
    terms = int(rng.choice([1, 2, 3, 4, 5], p=[0.2, 0.35, 0.25, 0.12, 0.08]))
    idf = rng.uniform(1.0, 9.0, terms)
    query_offset = rng.normal(0, 0.5)  # some queries have many relevant documents, some none
    topicality = rng.normal(0, 1, n) + rng.normal(0, 0.5)
    quality = rng.normal(0, 1, n)
    popularity = 0.6 * quality + rng.normal(0, 0.8, n)
    spam = rng.random(n) < 0.05
    coverage_logit = 1.5 * topicality[:, None] + 1.0 - 0.3 * idf[None, :] + rng.normal(0, 1, (n, terms))
    covered = rng.random((n, terms)) < _sigmoid(coverage_logit)
    lengths = _stream_lengths(rng, n, popularity, spam)
    tf = _term_frequencies(rng, lengths, covered, topicality, spam)
    text = _text_features(tf, lengths, idf)

    coverage = (covered * idf).sum(1) / idf.sum()
    in_title = ((tf[:, 2] > 0) * idf).sum(1) / idf.sum()
    relevance = (
        2.2 * coverage**2 * _sigmoid(1.5 * topicality)
        + 0.6 * in_title
        + 0.5 * np.tanh(quality)
        - 1.5 * spam
        + query_offset
        + rng.normal(0, 1.4, n)  # what no feature measures
    )
    slashes = 1 + rng.poisson(2, n)
    url_length = 12 + rng.poisson(30, n) + 4 * slashes
    inlinks = np.floor(np.exp(rng.normal(1.0 + 2.0 * popularity, 2.2))) * (rng.random(n) < 0.7)
    outlinks = rng.poisson(np.exp(rng.normal(3.0, 1.0, n)))
    pagerank = np.floor(np.exp(rng.normal(9.0 + 1.6 * quality + 0.8 * popularity, 1.8)))
    siterank = np.floor(np.exp(rng.normal(10.0 + 1.5 * quality, 2.5)))
    quality_score = np.clip(np.round(40 + 15 * quality + rng.normal(0, 10, n)), 0, 255)
    quality_score2 = np.clip(np.round(30 + 12 * quality + 5 * popularity + rng.normal(0, 12, n)), 0, 255)
    query_clicks = rng.poisson(np.exp(-2.5 + 0.5 * relevance + 0.7 * popularity)) * (rng.random(n) < 0.5)
    url_clicks = np.floor(np.exp(rng.normal(1.5 + 2.2 * popularity, 2.0))) * (rng.random(n) < 0.6)
    dwell = np.floor(url_clicks * np.exp(rng.normal(3.5, 1.2, n)))
    web = [slashes, url_length, inlinks, outlinks, pagerank, siterank, quality_score, quality_score2]
    web += [query_clicks, url_clicks, dwell]
    features = np.concatenate([text, np.stack(web, 1).astype(np.float64)], 1)
    features = np.minimum(features, 2.3e8)  # MSLR-WEB's largest raw value
    return Query(features, relevance, np.zeros(n, dtype=np.int64))


def draw_queries(num_queries: int, seed: int, min_docs: int = 18, max_docs: int = 300) -> list[Query]:
    """``num_queries`` queries of ``min_docs``-``max_docs`` documents (log-uniform), graded 0-4 at
    :data:`LABEL_FREQUENCIES` over all their documents together."""
    rng = np.random.default_rng(seed)
    queries = [_draw_query(rng, min_docs, max_docs) for _ in range(num_queries)]
    relevance = np.concatenate([q.relevance for q in queries])
    cuts = np.quantile(relevance, np.cumsum(LABEL_FREQUENCIES)[:-1])
    for q in queries:
        q.labels = np.searchsorted(cuts, q.relevance, side="right")
    return queries


def _format(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:.6g}"


def write_letor(path: Path, queries: list[Query], first_qid: int) -> None:
    """SVMlight / LETOR lines ``label qid:Q 1:v ... 136:v``, every feature written, as MSLR-WEB's files are."""
    lines = []
    for offset, query in enumerate(queries):
        for label, row in zip(query.labels, query.features, strict=True):
            values = " ".join(f"{i + 1}:{_format(v)}" for i, v in enumerate(row))
            lines.append(f"{label} qid:{first_qid + offset} {values}")
    path.write_text("\n".join(lines) + "\n")


def write_fold(out_dir: str | Path, seed: int, train: int = 43, vali: int = 20, test: int = 100) -> Path:
    """``out_dir/Fold1/{train,vali,test}.txt`` drawn together (one grading), split by query; returns ``out_dir``."""
    queries = draw_queries(train + vali + test, seed)
    fold = Path(out_dir) / "Fold1"
    fold.mkdir(parents=True, exist_ok=True)
    splits = {"train.txt": queries[:train], "vali.txt": queries[train : train + vali], "test.txt": queries[-test:]}
    first = 1
    for name, part in splits.items():
        write_letor(fold / name, part, first)
        first += len(part)
    return Path(out_dir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=43, help="training queries (43: issue 30's MSLR sample)")
    parser.add_argument("--vali", type=int, default=20, help="validation queries")
    parser.add_argument("--test", type=int, default=100, help="test queries")
    args = parser.parse_args(argv)
    print(write_fold(args.out_dir, args.seed, args.train, args.vali, args.test) / "Fold1")


if __name__ == "__main__":
    main()
