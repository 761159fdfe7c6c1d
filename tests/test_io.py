"""Tests for torchrank.io: TREC qrels/run readers, dense conversion and SVMlight/LETOR reading."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

import torchrank
from torchrank.io import (
    SAMPLE_QRELS,
    SAMPLE_RUN,
    TrecFormatError,
    group_to_dense,
    read_qrels,
    read_run,
    read_svmlight,
    trec_to_dense,
)

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"
# the LightGBM lambdarank example ships in the package (torchrank/data): no test skips for want of it
LGBM = Path(torchrank.__file__).resolve().parent / "data" / "lightgbm_lambdarank"


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8", newline="")
    else:
        path.write_bytes(text)
    return path


def _trec_eval_counts(path: Path) -> dict[tuple[str, str], int]:
    """``{(measure, qid): value}`` for the count measures of a ``trec_eval -q`` output file."""
    out = {}
    for line in path.read_text().splitlines():
        measure, qid, value = line.split()
        if measure in {"num_ret", "num_rel", "num_rel_ret", "num_q"}:
            out[measure, qid] = int(value)
    return out


def _reference_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's order: score descending, then docno descending."""
    return [d for d, _ in sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


# --------------------------------------------------------------------------------------------------
# TREC readers
# --------------------------------------------------------------------------------------------------


def test_sample_paths_are_bundled_copies():
    assert SAMPLE_QRELS.read_bytes() == (DATA / "qrels.test").read_bytes()
    assert SAMPLE_RUN.read_bytes() == (DATA / "results.test").read_bytes()


def test_read_qrels_sample():
    qrels = read_qrels(DATA / "qrels.test")
    assert list(qrels) == ["301", "302", "303"]
    assert {q: len(d) for q, d in qrels.items()} == {"301": 1708, "302": 1061, "303": 912}
    assert qrels["301"]["CR93E-1282"] == 1
    assert all(type(v) is int for d in qrels.values() for v in d.values())
    rel_level = read_qrels(str(DATA / "qrels.rel_level"))  # str paths work too
    assert {v for d in rel_level.values() for v in d.values()} == {-1, 0, 1, 2, 3, 4}


def test_qrels_comment_lines_and_hash_inside_docno():
    plain = read_qrels(DATA / "qrels.test")
    commented = read_qrels(DATA / "qrels.test.with-comments")
    assert "CR#93E-1860" in commented["301"]
    assert "CR93E-1860" not in commented["301"]
    commented["301"]["CR93E-1860"] = commented["301"].pop("CR#93E-1860")
    assert commented == plain


def test_hash_inside_docnos_msmarco_style():
    qrels = read_qrels(DATA / "qrels.comment.test")
    run = read_run(DATA / "results.comment.test")
    assert sum(map(len, qrels.values())) == 5890
    assert sum(map(len, run.values())) == 30100
    assert qrels["2024-127266"]["msmarco_v2.1_doc_00_880019750#4_1633802806"] == 1
    assert run["2024-224960"]["msmarco_v2.1_doc_50_2286987788#13_3087841662"] == 0.7


def test_whitespace_variants_and_comments(tmp_path):
    qrels = _write(
        tmp_path,
        "q.txt",
        "# header\n\n   # indented comment\nq1\t0\td1\t2\r\n  q1   0  d2    -1\nq2 0 d#3 0\n\t\n",
    )
    assert read_qrels(qrels) == {"q1": {"d1": 2, "d2": -1}, "q2": {"d#3": 0}}
    run = _write(
        tmp_path,
        "r.txt",
        "\ufeffq1 Q0 d1 1 1.5 t\n#q1 Q0 d9 1 9 t\nq1\t\tQ0\td2\t2\t-2e-3\ttag\textra stuff\n",
    )
    assert read_run(run) == {"q1": {"d1": 1.5, "d2": -0.002}}


def test_run_extra_trailing_columns():
    run = read_run(DATA / "results.trunc")
    assert {q: len(d) for q, d in run.items()} == {"301": 500, "303": 84}
    assert run["301"]["FBIS3-27619"] == 2.138276


def test_run_rank_and_q0_fields_are_ignored(tmp_path):
    path = _write(tmp_path, "r.txt", "q1 iter d1 rank? 3 tag\nq1 Q0 d2 - 4.25 tag\n")
    assert read_run(path) == {"q1": {"d1": 3.0, "d2": 4.25}}


# --------------------------------------------------------------------------------------------------
# trec_to_dense
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("out_file", "qrels_file", "run_file", "kwargs", "rel_level"),
    [
        ("out.test.aq", "qrels.test", "results.test", {}, 1),
        ("out.test.aqc", "qrels.test", "results.trunc", {"all_queries": True}, 1),
        ("out.test.aqcM", "qrels.test", "results.trunc", {"all_queries": True, "depth": 100}, 1),
        ("out.test.aql", "qrels.rel_level", "results.test", {}, 2),
        ("out.comment.test", "qrels.comment.test", "results.comment.test", {}, 1),
    ],
)
def test_counts_match_trec_eval(out_file, qrels_file, run_file, kwargs, rel_level):
    expected = _trec_eval_counts(DATA / out_file)
    batch = trec_to_dense(read_qrels(DATA / qrels_file), read_run(DATA / run_file), **kwargs)
    num_ret = batch.mask.sum(1)
    num_rel = (batch.ideal_target >= rel_level).sum(1)
    num_rel_ret = ((batch.target >= rel_level) & batch.mask).sum(1)
    got = {}
    for i, q in enumerate(batch.qids):
        got["num_ret", q] = int(num_ret[i])
        got["num_rel", q] = int(num_rel[i])
        got["num_rel_ret", q] = int(num_rel_ret[i])
    got["num_q", "all"] = len(batch.qids)
    got["num_ret", "all"] = int(num_ret.sum())
    got["num_rel", "all"] = int(num_rel.sum())
    got["num_rel_ret", "all"] = int(num_rel_ret.sum())
    assert {k: got[k] for k in expected} == expected
    assert len(expected) >= 4


def test_all_queries_adds_empty_rows():
    qrels, run = read_qrels(DATA / "qrels.test"), read_run(DATA / "results.trunc")
    default = trec_to_dense(qrels, run)
    assert default.qids == ["301", "303"]
    assert default.preds.shape == (2, 500)
    full = trec_to_dense(qrels, run, all_queries=True)
    assert full.qids == ["301", "302", "303"]
    assert full.preds.shape == (3, 500)
    assert not full.mask[1].any()
    assert full.docnos[1] == []
    assert (full.preds[1] == 0).all() and (full.target[1] == 0).all() and not full.judged[1].any()
    assert int((full.ideal_target[1] > 0).sum()) == 77
    assert torch.equal(full.preds[[0, 2]], default.preds)


def test_all_queries_with_no_retrieved_docs_has_one_column():
    batch = trec_to_dense({"q1": {"d1": 1}}, {"q9": {"d1": 1.0}}, all_queries=True)
    assert batch.qids == ["q1"]
    assert batch.preds.shape == (1, 1) and not batch.mask.any()
    assert batch.ideal_target.tolist() == [[1]]


def test_run_only_and_qrels_only_queries():
    qrels = {"b": {"x": 1}, "a": {"x": 0}, "c": {"y": 1}}
    run = {"a": {"x": 1.0}, "b": {"x": 2.0}, "z": {"x": 3.0}}
    assert trec_to_dense(qrels, run).qids == ["a", "b"]
    assert trec_to_dense(qrels, run, all_queries=True).qids == ["a", "b", "c"]
    # trec_eval sorts qids as strings, not numbers
    assert trec_to_dense({"10": {"d": 1}, "9": {"d": 1}}, {"10": {"d": 1.0}, "9": {"d": 1.0}}).qids == [
        "10",
        "9",
    ]


def test_no_shared_query_raises():
    with pytest.raises(ValueError, match="share no query"):
        trec_to_dense({"q1": {"d": 1}}, {"q2": {"d": 1.0}})
    with pytest.raises(ValueError, match="no query"):
        trec_to_dense({}, {}, all_queries=True)


def test_tie_order_is_docno_descending(tmp_path):
    run = _write(
        tmp_path,
        "ties.run",
        "q Q0 b 1 1.0 t\nq Q0 a 2 1.0 t\nq Q0 c 3 1.0 t\nq Q0 z 4 0.5 t\nq Q0 B 5 1.0 t\nq Q0 y 6 2 t\n",
    )
    batch = trec_to_dense({"q": {"a": 1}}, read_run(run))
    # "B" < "a" < "b" < "c" in strcmp order, so descending: c, b, a, B
    assert batch.docnos == [["y", "c", "b", "a", "B", "z"]]
    assert batch.preds.tolist() == [[2.0, 1.0, 1.0, 1.0, 1.0, 0.5]]
    assert batch.target.tolist() == [[0, 0, 0, 1, 0, 0]]


@pytest.mark.parametrize(
    ("qrels_file", "run_file"),
    [("qrels.test", "results.test"), ("qrels.comment.test", "results.comment.test")],
)
def test_row_order_matches_reference_sort(qrels_file, run_file):
    qrels, run = read_qrels(DATA / qrels_file), read_run(DATA / run_file)
    batch = trec_to_dense(qrels, run)
    for i, q in enumerate(batch.qids):
        expected = _reference_order(run[q])
        assert batch.docnos[i] == expected
        n = len(expected)
        assert batch.preds[i, :n].tolist() == [run[q][d] for d in expected]
        assert batch.target[i, :n].tolist() == [max(qrels[q].get(d, 0), 0) for d in expected]
        assert batch.judged[i, :n].tolist() == [qrels[q].get(d, -1) >= 0 for d in expected]
        assert batch.mask[i, :n].all() and not batch.mask[i, n:].any()
        assert (batch.preds[i, n:] == 0).all() and (batch.target[i, n:] == 0).all()
        assert not batch.judged[i, n:].any()


def test_depth_truncates_in_rank_order():
    qrels, run = read_qrels(SAMPLE_QRELS), read_run(SAMPLE_RUN)
    full = trec_to_dense(qrels, run)
    cut = trec_to_dense(qrels, run, depth=10)
    assert cut.preds.shape == (3, 10)
    assert torch.equal(cut.preds, full.preds[:, :10])
    assert torch.equal(cut.target, full.target[:, :10])
    assert cut.docnos == [d[:10] for d in full.docnos]
    assert torch.equal(cut.ideal_target, full.ideal_target)  # depth does not touch the qrels side
    deep = trec_to_dense(qrels, run, depth=10_000)
    assert torch.equal(deep.preds, full.preds)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="depth"):
            trec_to_dense(qrels, run, depth=bad)


def test_negative_labels_unjudged_and_ideal_target():
    qrels = {"q": {"a": 2, "b": -1, "c": 0, "d": 3, "e": 1}}
    run = {"q": {"a": 0.1, "b": 0.9, "x": 0.5}}
    batch = trec_to_dense(qrels, run)
    assert batch.docnos == [["b", "x", "a"]]
    assert batch.target.tolist() == [[0, 0, 2]]
    assert batch.judged.tolist() == [[False, False, True]]
    assert batch.ideal_target.tolist() == [[3, 2, 1, 0]]  # label -1 counts as unjudged
    assert batch.target.dtype == batch.ideal_target.dtype == torch.int64
    assert batch.mask.dtype == batch.judged.dtype == torch.bool


def test_dtype_and_float64_precision():
    run = {"q": {"a": 1.0, "b": 1.0 + 1e-12, "c": 1.0 - 1e-12}}
    batch = trec_to_dense({"q": {"a": 1}}, run)
    assert batch.preds.dtype == torch.float64
    assert batch.docnos == [["b", "a", "c"]]
    assert torch.unique(batch.preds).numel() == 3
    low = trec_to_dense({"q": {"a": 1}}, run, dtype=torch.float32)
    assert low.preds.dtype == torch.float32
    assert low.docnos == batch.docnos  # ranking uses the float64 scores
    with pytest.raises(ValueError, match="dtype"):
        trec_to_dense({"q": {"a": 1}}, run, dtype=torch.int64)


def test_score_dtype_float32_ties_scores_equal_in_float32():
    # trec_eval keeps each score in a C float: all three are 1.0f, tied, so ordered by docno descending
    run = {"q": {"a": 1.0, "b": 1.0 + 1e-12, "c": 1.0 - 1e-12}}
    batch = trec_to_dense({"q": {"a": 1}}, run, score_dtype=torch.float32)
    assert batch.docnos == [["c", "b", "a"]]
    assert batch.preds.dtype == torch.float64 and batch.preds.tolist() == [[1.0, 1.0, 1.0]]  # the scores as ranked
    low = trec_to_dense({"q": {"a": 1}}, run, dtype=torch.float32, score_dtype=torch.float32)
    assert low.docnos == batch.docnos
    for bad in (torch.float16, torch.int64):
        with pytest.raises(ValueError, match="score_dtype"):
            trec_to_dense({"q": {"a": 1}}, run, score_dtype=bad)


@pytest.mark.parametrize(
    ("scores", "float32_order"),
    [
        ((16777217.0, 16777216.0), ["b", "a"]),  # 2**24 + 1 rounds to 2**24
        ((0.1000000001, 0.1000000002), ["b", "a"]),
        ((1e-320, 0.0), ["b", "a"]),  # below float32's smallest subnormal: 0
        ((1e300, float("inf")), ["b", "a"]),  # beyond float32's range: inf
        ((2.0**-149, 0.0), ["a", "b"]),  # float32's smallest subnormal stays distinct from 0
        ((1.0 + 2.0**-24, 1.0), ["b", "a"]),  # halfway: rounds to even, 1.0
        ((1.0 + 3 * 2.0**-24, 1.0 + 2.0**-22), ["b", "a"]),  # halfway: rounds to even, up
    ],
)
def test_score_dtype_rounds_as_c_float_conversion(scores, float32_order):
    run = {"q": dict(zip("ab", scores, strict=True))}
    assert trec_to_dense({"q": {"a": 1}}, run).docnos == [["a", "b"] if scores[0] > scores[1] else ["b", "a"]]
    assert trec_to_dense({"q": {"a": 1}}, run, score_dtype=torch.float32).docnos == [float32_order]
    with pytest.raises(ValueError, match="NaN"):
        trec_to_dense({"q": {"a": 1}}, {"q": {"a": float("nan")}})


def test_batch_to_device():
    batch = trec_to_dense(read_qrels(SAMPLE_QRELS), read_run(SAMPLE_RUN), depth=5)
    moved = batch.to("cpu")
    assert moved.qids == batch.qids and moved.docnos == batch.docnos
    assert torch.equal(moved.preds, batch.preds)


# --------------------------------------------------------------------------------------------------
# Malformed TREC input
# --------------------------------------------------------------------------------------------------

_QRELS_OK = "# c\n1 0 d1 1\n"
_RUN_OK = "# c\n1 Q0 d1 1 0.5 t\n"


@pytest.mark.parametrize(
    ("reader", "text", "lineno", "fragment"),
    [
        (read_qrels, _QRELS_OK + "1 0 d2\n", 3, "4 whitespace-separated fields"),
        (read_qrels, _QRELS_OK + "1 0 d2 1 extra\n", 3, "4 whitespace-separated fields"),
        (read_qrels, _QRELS_OK + "1 0 d2 1.5\n", 3, "'1.5'"),
        (read_qrels, _QRELS_OK + "1 0 d2 rel\n", 3, "an integer relevance"),
        (read_qrels, _QRELS_OK + "1 0 d2 1_0\n", 3, "'1_0'"),
        (read_qrels, _QRELS_OK + "1 0 d2 99999999999999999999\n", 3, "within the int64 range"),
        (read_qrels, _QRELS_OK + "1 0 d2 -9223372036854775809\n", 3, "within the int64 range"),
        (read_qrels, _QRELS_OK + "2 0 d1 1\n1 0 d1 0\n", 4, "each docno at most once"),
        (read_qrels, "", 0, "at least one"),
        (read_qrels, "# only\n\n# comments\n", 0, "at least one"),
        (read_run, _RUN_OK + "1 Q0 d2 2 0.4\n", 3, "at least 6"),
        (read_run, _RUN_OK + "1 Q0 d2 2 high t\n", 3, "'high'"),
        (read_run, _RUN_OK + "1 Q0 d2 2 nan t\n", 3, "non-NaN"),
        (read_run, _RUN_OK + "1 Q0 d2 2 1_0 t\n", 3, "score"),
        (read_run, _RUN_OK + "\n1 Q0 d2 2 0.1 t\n1 Q0 d1 3 0.2 t\n", 5, "each docno at most once"),
        (read_run, "\n\n", 0, "at least one"),
    ],
)
def test_malformed_trec_input(tmp_path, reader, text, lineno, fragment):
    path = _write(tmp_path, "bad.txt", text)
    with pytest.raises(TrecFormatError) as info:
        reader(path)
    err = info.value
    message = str(err)
    assert message.startswith(f"{path}:{lineno}: ")
    assert ", got " in message
    assert fragment in message
    assert (err.path, err.lineno) == (str(path), lineno)
    assert isinstance(err, ValueError)


def test_error_shows_offending_line_and_pickles(tmp_path):
    path = _write(tmp_path, "bad.qrels", "1 0 d1 1\n1\t0 d2\n")
    with pytest.raises(TrecFormatError) as info:
        read_qrels(path)
    assert str(info.value).endswith("got '1\\t0 d2'")
    clone = pickle.loads(pickle.dumps(info.value))
    assert type(clone) is TrecFormatError and str(clone) == str(info.value)


# --------------------------------------------------------------------------------------------------
# SVMlight / LETOR
# --------------------------------------------------------------------------------------------------

_LETOR = (
    "# LETOR-style file\n"
    "2 qid:10 1:0.5 3:1.25 # doc A\n"
    "0 qid:10 2:-0.25\n"
    "\n"
    "1 qid:7 1:1e-3 4:2\n"
    "3 qid:10\n"
    "0 qid:42 2:7\n"
)


def test_read_svmlight_with_qid_matches_sklearn(tmp_path):
    from sklearn.datasets import load_svmlight_file

    path = _write(tmp_path, "letor.txt", _LETOR)
    data = read_svmlight(path)
    x, y, q = load_svmlight_file(str(path), query_id=True, zero_based=False)
    assert data.features.dtype == data.labels.dtype == torch.float32
    assert data.qid.dtype == torch.int64
    assert torch.equal(data.features, torch.from_numpy(x.toarray().astype(np.float32)))
    assert torch.equal(data.labels, torch.from_numpy(y.astype(np.float32)))
    assert q.tolist() == [10, 10, 7, 10, 42]
    assert data.qid.tolist() == [0, 0, 1, 0, 2]  # first-appearance numbering
    # unlike sklearn, unsorted (but unique) indices are accepted
    shuffled = _write(tmp_path, "shuffled.txt", _LETOR.replace("1:1e-3 4:2", "4:2 1:1e-3"))
    assert torch.equal(read_svmlight(shuffled).features, data.features)


def test_read_svmlight_keeps_the_files_qids(tmp_path):
    from sklearn.datasets import load_svmlight_file

    data = read_svmlight(_write(tmp_path, "letor.txt", _LETOR))
    _, _, q = load_svmlight_file(str(tmp_path / "letor.txt"), query_id=True, zero_based=False)
    assert data.query_ids[data.qid].tolist() == q.tolist()  # every row joins back to its own qid
    assert data.query_ids.tolist() == [10, 7, 42]  # query index order: first appearance
    plain = _write(tmp_path, "g.txt", "1 1:1\n0 2:1\n2 1:3\n")
    assert read_svmlight(plain, group_file=_write(tmp_path, "g.query", "2\n1\n")).query_ids.tolist() == [0, 1]


def test_read_svmlight_keeps_letor4_docids(tmp_path):
    # LETOR 4.0 (MQ2007) lines: "#docid = <id> inc = <x> prob = <p>"
    text = (
        "2 qid:10032 1:0.056537 2:0.000000 #docid = GX029-35-5894638 inc = 0.0119881192468859 prob = 0.139842\n"
        "0 qid:10032 1:0.279152 2:0.000000 #docid = GX030-77-6315042 inc = 1 prob = 0.341364\n"
        "0 qid:8 1:0.5 # no docid here\n"
    )
    data = read_svmlight(_write(tmp_path, "mq2007.txt", text))
    assert data.docids == ["GX029-35-5894638", "GX030-77-6315042", ""]
    assert data.query_ids[data.qid].tolist() == [10032, 10032, 8]
    assert data.features[:, 0].tolist() == pytest.approx([0.056537, 0.279152, 0.5])
    assert read_svmlight(_write(tmp_path, "l.txt", _LETOR)).docids is None


def test_read_svmlight_n_features_and_comments(tmp_path):
    path = _write(tmp_path, "c.txt", "# all comment\n1 qid:1 2:3 #x 5:9\n  \n0 qid:1 # nothing\n")
    data = read_svmlight(path, n_features=4)
    assert data.features.tolist() == [[0, 3, 0, 0], [0, 0, 0, 0]]
    assert data.labels.tolist() == [1, 0]
    assert read_svmlight(path).features.shape == (2, 2)
    with pytest.raises(TrecFormatError, match=r":2: a feature index <= n_features=1, got '2:3'"):
        read_svmlight(path, n_features=1)


def test_read_svmlight_with_group_file(tmp_path):
    plain = _write(tmp_path, "g.txt", "1 1:1\n0 2:1\n2 1:3 # c\n0 3:1\n")
    group = _write(tmp_path, "g.txt.query", "2\n\n2\n")
    data = read_svmlight(plain, group_file=group)
    assert data.qid.tolist() == [0, 0, 1, 1]
    assert data.features.tolist() == [[1, 0, 0], [0, 1, 0], [3, 0, 0], [0, 0, 1]]

    bad = _write(tmp_path, "bad.query", "3\n2\n")
    with pytest.raises(TrecFormatError) as info:
        read_svmlight(plain, group_file=bad)
    assert str(info.value).startswith(f"{bad}:0: group sizes adding up to the 4 rows")
    with pytest.raises(TrecFormatError, match=r"bad2\.query:2: a positive integer group size, got 'x'"):
        read_svmlight(plain, group_file=_write(tmp_path, "bad2.query", "2\nx\n"))
    with pytest.raises(TrecFormatError, match="positive integer group size"):
        read_svmlight(plain, group_file=_write(tmp_path, "bad3.query", "4\n0\n"))


def test_read_svmlight_query_source_errors(tmp_path):
    plain = _write(tmp_path, "p.txt", "# c\n1 1:1\n0 2:1\n")
    with pytest.raises(TrecFormatError, match=r"p\.txt:2: a 'qid:' field \(or a group_file argument\)"):
        read_svmlight(plain)
    letor = _write(tmp_path, "l.txt", _LETOR)
    group = _write(tmp_path, "l.query", "5\n")
    with pytest.raises(TrecFormatError, match=r"l\.txt:2: no 'qid:' field since group_file="):
        read_svmlight(letor, group_file=group)
    mixed = _write(tmp_path, "m.txt", "1 qid:1 1:1\n0 2:1\n")
    with pytest.raises(TrecFormatError, match=r"m\.txt:2: a 'qid:' field like the first data line"):
        read_svmlight(mixed)


@pytest.mark.parametrize(
    ("line", "got"),
    [
        ("1 qid:1 1:", "1:"),
        ("1 qid:1 :1", ":1"),
        ("1 qid:1 a:1", "a:1"),
        ("1 qid:1 1:x", "1:x"),
        ("1 qid:1 1:2:3", "1:2:3"),
        ("1 qid:1 0:1", "0:1"),
        ("1 qid:1 -2:1", "-2:1"),
        ("1 qid:1 1_0:1", "1_0:1"),
        ("1 qid:1 2:1 7", "7"),
        ("1 qid:1 2:1 qid:3", "qid:3"),
        ("x qid:1 1:1", "x"),
        ("1 qid:a 1:1", "a"),
        ("1 qid:99999999999999999999 1:1", "99999999999999999999"),  # beyond int64: named, not an OverflowError
        ("1 qid:1 99999999999999999999:1", "99999999999999999999:1"),
        ("1 qid:1 3:1 1:2 3:0", "1 qid:1 3:1 1:2 3:0"),
    ],
)
def test_read_svmlight_malformed_line(tmp_path, line, got):
    path = _write(tmp_path, "bad.svm", f"0 qid:1 1:1 2:2\n# comment\n{line} # trailing\n0 qid:2 1:1\n")
    with pytest.raises(TrecFormatError) as info:
        read_svmlight(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3: ")
    assert message.endswith(f", got {got!r}") or message.endswith(f", got {line + ' # trailing'!r}")


@pytest.mark.parametrize("token", ["1:2:3", ":1", "1:", "a:1", "1:x", "1::2", "1:2:", ":", "0:1"])
@pytest.mark.parametrize("neighbour", ["", " 4", " 4:5", " 7:1 8"])
def test_read_svmlight_every_feature_is_one_index_value_pair(tmp_path, token, neighbour):
    # "1:2:3 4" once passed a count of the colons and pieces of the whole line and read as "1:2 3:4";
    # sklearn refuses every one of these lines, and so does the reader, naming file, line and token
    from sklearn.datasets import load_svmlight_file

    path = _write(tmp_path, "bad.svm", f"0 qid:1 1:1 2:2\n1 qid:1 {token}{neighbour}\n")
    with pytest.raises(ValueError):
        load_svmlight_file(str(path), query_id=True, zero_based=False)
    with pytest.raises(TrecFormatError) as info:
        read_svmlight(path)
    assert str(info.value).startswith(f"{path}:2: an 'index:value' feature")
    assert info.value.got in (token, neighbour.split()[0] if neighbour else None)


@pytest.mark.parametrize(
    "text",
    [
        "1 qid:1 1:2 3:4\n0 qid:1 2:-1.5e3\n",
        "1 qid:1 1:2\t3:4 # c:o:m:m:e:n:t\n2 qid:2 1:+7 3:.5\n",
        "0 qid:3\n1 qid:3 5:1e-3\n",
    ],
)
def test_read_svmlight_well_formed_lines_match_sklearn(tmp_path, text):
    from sklearn.datasets import load_svmlight_file

    path = _write(tmp_path, "ok.svm", text)
    data = read_svmlight(path)
    x, y, q = load_svmlight_file(str(path), query_id=True, zero_based=False)
    assert torch.equal(data.features, torch.from_numpy(x.toarray().astype(np.float32)))
    assert torch.equal(data.labels, torch.from_numpy(y.astype(np.float32)))
    assert data.query_ids[data.qid].tolist() == q.tolist()


def test_read_svmlight_refuses_an_inferred_width_beyond_the_limit(tmp_path):
    # a stray index once sized the dense matrix: 10**12 columns failed in the allocator, 10**9 took 4 GB
    from torchrank.io.svmlight import MAX_INFERRED_FEATURES

    path = _write(tmp_path, "big.svm", f"1 qid:1 1:1\n1 qid:1 {10**12}:1\n")
    with pytest.raises(TrecFormatError) as info:
        read_svmlight(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: a feature index <= {MAX_INFERRED_FEATURES} when n_features is not given")
    assert f"dense width of {10**12} columns" in message and f"pass n_features={10**12}" in message
    edge = _write(tmp_path, "edge.svm", f"1 qid:1 {MAX_INFERRED_FEATURES}:1\n")
    assert read_svmlight(edge).features.shape == (1, MAX_INFERRED_FEATURES)
    wide = _write(tmp_path, "wide.svm", f"1 qid:1 {MAX_INFERRED_FEATURES + 1}:2\n")
    with pytest.raises(TrecFormatError, match=r"wide\.svm:1: a feature index <= "):
        read_svmlight(wide)
    data = read_svmlight(wide, n_features=MAX_INFERRED_FEATURES + 1)  # a stated width lifts the limit
    assert data.features.shape == (1, MAX_INFERRED_FEATURES + 1) and data.features[0, -1] == 2


def test_read_svmlight_repeats_are_found_with_a_huge_n_features(tmp_path):
    # the repeat check once folded (row, index) into row * (width + 1) + index, which overflows int64
    path = _write(tmp_path, "r.svm", f"1 qid:1 {2**62}:1\n0 qid:1 {2**62}:1 {2**62}:2\n")
    with pytest.raises(TrecFormatError, match=r"r\.svm:2: each feature index at most once per line"):
        read_svmlight(path, n_features=2**62 + 1)


@pytest.mark.parametrize("n_features", [1.5, 2.0, "3", True, -1])
def test_read_svmlight_n_features_must_be_a_count(tmp_path, n_features):
    path = _write(tmp_path, "n.svm", "1 qid:1 1:1\n")
    with pytest.raises(ValueError, match="n_features must be a non-negative int or None"):
        read_svmlight(path, n_features=n_features)
    assert read_svmlight(path, n_features=np.int64(3)).features.shape == (1, 3)


def test_read_svmlight_empty_file(tmp_path):
    path = _write(tmp_path, "e.svm", "# nothing here\n\n")
    with pytest.raises(TrecFormatError, match=r"e\.svm:0: at least one"):
        read_svmlight(path)


def test_read_svmlight_lightgbm_example():
    from sklearn.datasets import load_svmlight_file

    data = read_svmlight(LGBM / "rank.test", group_file=LGBM / "rank.test.query")
    x, y = load_svmlight_file(str(LGBM / "rank.test"), n_features=300, zero_based=False)
    assert data.features.shape == (768, 300)
    assert torch.equal(data.features, torch.from_numpy(x.toarray().astype(np.float32)))
    assert torch.equal(data.labels, torch.from_numpy(y.astype(np.float32)))
    assert set(data.labels.tolist()) <= {0, 1, 2, 3, 4}
    sizes = [int(s) for s in (LGBM / "rank.test.query").read_text().split()]
    assert torch.bincount(data.qid).tolist() == sizes
    feats, labels, mask = group_to_dense(data.features, data.labels, data.qid)
    assert feats.shape == (50, max(sizes), 300)
    assert mask.sum(1).tolist() == sizes
    assert torch.equal(feats[mask], data.features)  # rows are already grouped contiguously
    assert torch.equal(labels[mask], data.labels)


# --------------------------------------------------------------------------------------------------
# group_to_dense
# --------------------------------------------------------------------------------------------------


def test_group_to_dense_round_trip():
    gen = torch.Generator().manual_seed(0)
    qid = torch.randint(0, 7, (60,), generator=gen) * 3 + 100  # non-contiguous ids, shuffled rows
    feats = torch.randn(60, 5, generator=gen)
    scores = torch.randn(60, generator=gen)
    labels = torch.randint(0, 5, (60,), generator=gen)
    x, y, mask = group_to_dense(feats, labels, qid)
    s, y2, mask2 = group_to_dense(scores, labels, qid)
    uniq, counts = torch.unique(qid, return_counts=True)
    assert x.shape == (uniq.numel(), int(counts.max()), 5)
    assert s.shape == y.shape == mask.shape == (uniq.numel(), int(counts.max()))
    assert torch.equal(mask, mask2) and torch.equal(y, y2)
    assert mask.sum(1).tolist() == counts.tolist()
    order = torch.argsort(qid, stable=True)  # rows grouped by ascending qid, original order inside
    assert torch.equal(x[mask], feats[order])
    assert torch.equal(s[mask], scores[order])
    assert torch.equal(y[mask], labels[order])
    assert (x[~mask] == 0).all() and (s[~mask] == 0).all() and (y[~mask] == 0).all()
    # and back: scatter the dense rows to their original positions
    back = torch.empty_like(scores)
    back[order] = s[mask]
    assert torch.equal(back, scores)


def test_group_to_dense_shape_errors():
    with pytest.raises(ValueError, match="expected qid"):
        group_to_dense(torch.zeros(3), torch.zeros(3), torch.zeros(4, dtype=torch.int64))
    with pytest.raises(ValueError, match="expected qid"):
        group_to_dense(torch.zeros(3), torch.zeros(2), torch.zeros(3, dtype=torch.int64))
