"""Runs and qrels beyond TREC text: DataFrames, parquet, CSV/TSV, compressed files; writing them back.

Every format must give the batch (and so the evaluation) of the same rows written as TREC text, checked field by
field, and byte for byte through ``torchrank evaluate``; errors name the file, the row and the column."""

from __future__ import annotations

import bz2
import gzip
import lzma
import random

import pytest
import torch
from test_judgments import _collection, _write

from torchrank.cli import main
from torchrank.io import (
    SAMPLE_QRELS,
    SAMPLE_RUN,
    TrecFormatError,
    from_dataframe,
    load_qrels,
    load_run,
    read_qrels,
    read_run,
    read_trec,
    to_dataframe,
    trec_to_dense,
    write_results,
    write_run,
)
from torchrank.io.trec_eval import score_run

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _frames(qrels: dict, run: dict) -> tuple:
    run_df = pd.DataFrame(
        [(q, d, s) for q, docs in run.items() for d, s in docs.items()], columns=["qid", "docno", "score"]
    )
    qrels_df = pd.DataFrame(
        [(q, d, rel) for q, docs in qrels.items() for d, rel in docs.items()], columns=["qid", "docno", "label"]
    )
    return run_df, qrels_df


def _same_batch(a, b) -> None:
    assert a.qids == b.qids
    for name in ("preds", "target", "mask", "judged", "ideal_target", "num_judged", "pooled_unjudged"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert list(a.docnos) == list(b.docnos)


def _evaluate(argv: list, capsys) -> str:
    assert main(["evaluate", *map(str, argv)]) == 0
    return capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------- reading


@pytest.mark.parametrize("options", [{}, {"depth": 7, "all_queries": True}, {"judged_only": True}])
def test_dataframes_give_the_batch_of_the_trec_files(options, tmp_path):
    qrels, run = _collection(1)
    run_df, qrels_df = _frames(qrels, run)
    _same_batch(from_dataframe(run_df, qrels_df, **options), read_trec(*_write(tmp_path, qrels, run), **options))
    # ranx / ir_measures dicts need no conversion (ranked in float64 as files are)
    kwargs = {k: v for k, v in options.items() if k != "judged_only"}
    dense = trec_to_dense(qrels, run, **kwargs)
    if not options.get("judged_only"):
        _same_batch(from_dataframe(run_df, qrels_df, **options), dense)


def test_configurable_columns_and_numeric_ids(tmp_path):
    frame = pd.DataFrame({"query_id": [1, 1, 2], "doc_id": [7, 3, 7], "sim": [0.2, 0.9, 0.5], "extra": [0, 0, 0]})
    qrels = pd.DataFrame({"query_id": [1, 2], "doc_id": [7, 7], "rel": [1, 2]})
    batch = from_dataframe(frame.rename(columns={"query_id": "qid", "doc_id": "docno", "sim": "score"}),
                           qrels.rename(columns={"query_id": "qid", "doc_id": "docno", "rel": "label"}))  # fmt: skip
    from torchrank.io import qrels_from_dataframe, run_from_dataframe

    again = read_trec(
        qrels_from_dataframe(qrels, qid="query_id", docno="doc_id", label="rel"),
        run_from_dataframe(frame, qid="query_id", docno="doc_id", score="sim"),
    )
    _same_batch(batch, again)
    assert batch.qids == ["1", "2"] and batch.docnos[0] == ["3", "7"]


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_without_pyarrow_dataframes_and_csv_read_the_same(suffix, tmp_path, monkeypatch):
    import torchrank.io.frames as frames

    qrels, run = _collection(9)
    run_df, qrels_df = _frames(qrels, run)
    run_df.to_csv(tmp_path / f"run{suffix}", sep="\t" if suffix == ".tsv" else ",", index=False)
    expected = read_trec(*_write(tmp_path, qrels, run))
    monkeypatch.setattr(frames, "_pyarrow", lambda: None)  # as on a machine without the extra
    _same_batch(from_dataframe(run_df, qrels_df), expected)
    _same_batch(read_trec(tmp_path / "qrels.txt", tmp_path / f"run{suffix}"), expected)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".tsv", ".csv.gz"])
def test_table_files_give_the_batch_of_the_trec_files(suffix, tmp_path):
    qrels, run = _collection(2)
    run_df, qrels_df = _frames(qrels, run)
    rpath, qpath = tmp_path / f"run{suffix}", tmp_path / f"qrels{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pandas(run_df), rpath)
        pq.write_table(pa.Table.from_pandas(qrels_df), qpath)
    else:
        sep = "\t" if suffix == ".tsv" else ","
        run_df.to_csv(rpath, sep=sep, index=False)  # floats as Python's repr: they read back exactly
        qrels_df.to_csv(qpath, sep=sep, index=False)
    text = _write(tmp_path, qrels, run)
    _same_batch(read_trec(qpath, rpath), read_trec(*text))
    assert load_run(rpath).runid == "run"


@pytest.mark.parametrize(("suffix", "opener"), [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_compressed_trec_files_by_extension(suffix, opener, tmp_path, capsys):
    qrels_path, run_path = _write(tmp_path, *_collection(3))
    packed = []
    for path in (qrels_path, run_path):
        target = path.with_name(path.name + suffix)
        with opener(target, "wb") as f:
            f.write(path.read_bytes())
        packed.append(target)
    _same_batch(read_trec(*packed), read_trec(qrels_path, run_path))
    assert read_run(packed[1]) == read_run(run_path) and read_qrels(packed[0]) == read_qrels(qrels_path)
    flags = ["-q", "-m", "all_trec", "-c"]
    assert _evaluate([*flags, *packed], capsys) == _evaluate([*flags, qrels_path, run_path], capsys)


# ---------------------------------------------------------------------------------------------------- round trip


def test_round_trip_trec_dataframe_parquet_trec_evaluates_byte_for_byte(tmp_path, capsys):
    qrels_path, run_path = _write(tmp_path, *_collection(4))
    for qrels_in, run_in in ((qrels_path, run_path), (SAMPLE_QRELS, SAMPLE_RUN)):
        original = load_run(run_in)
        frame = to_dataframe(original)  # TREC -> DataFrame
        parquet = tmp_path / "run.parquet"
        write_run(frame, parquet)  # -> parquet
        assert pq.read_table(parquet).column_names == ["qid", "docno", "score"]
        back = tmp_path / "back.txt"
        write_run(load_run(parquet), back, runid=original.runid)  # -> TREC
        flags = ["-q", "-m", "all_trec", "-c"]
        expected = _evaluate([*flags, qrels_in, run_in], capsys)
        assert _evaluate([*flags, qrels_in, back], capsys) == expected
        assert _evaluate([*flags, qrels_in, parquet], capsys).replace("\trun\n", f"\t{original.runid}\n") == expected
        # the qrels make the same round trip
        qframe = to_dataframe(load_qrels(qrels_in))
        qframe.to_parquet(tmp_path / "qrels.parquet")
        assert _evaluate([*flags, tmp_path / "qrels.parquet", back], capsys) == expected


def test_write_run_formats_and_compression(tmp_path):
    run = {"q1": {"d1": 0.1, "d2": 1e-07, "d3": 0.1}, "q0": {"x": -2.5}}
    for name in ("r.txt", "r.txt.gz", "r.csv", "r.tsv", "r.parquet"):
        write_run(run, tmp_path / name, runid="sys")
        assert read_run(tmp_path / name) == run if name.startswith("r.txt") else True
        file = load_run(tmp_path / name)
        assert {q: {file.columns.docno(i): v for i, v in enumerate(file.columns.value.tolist())
                    if file.columns.qids[file.columns.qid[i]] == q} for q in file.qids} == run  # fmt: skip
    lines = (tmp_path / "r.txt").read_text().splitlines()
    assert lines[0] == "q0 Q0 x 1 -2.5 sys"  # queries sorted, then trec_eval's rank order (docno descending on ties)
    assert lines[1:] == ["q1 Q0 d3 1 0.1 sys", "q1 Q0 d1 2 0.1 sys", "q1 Q0 d2 3 1e-07 sys"]
    with pytest.raises(ValueError, match="whitespace"):
        write_run({"q 1": {"d": 1.0}}, tmp_path / "bad.txt")


@pytest.mark.parametrize("suffix", [".txt", ".csv", ".parquet"])
def test_write_results(suffix, tmp_path, capsys):
    scores = score_run(SAMPLE_QRELS, SAMPLE_RUN, ["map", "P.5,10", "gm_map", "num_rel_ret"])
    path = tmp_path / f"results{suffix}"
    write_results([scores, scores], path)
    if suffix == ".txt":
        one = _evaluate(["-q", "-m", "map", "-m", "P.5,10", "-m", "gm_map", "-m", "num_rel_ret", SAMPLE_QRELS,
                         SAMPLE_RUN], capsys)  # fmt: skip
        assert path.read_text() == one + one
        return
    frame = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path, dtype={"qid": str})
    assert list(frame.columns) == ["run", "runid", "measure", "qid", "value"]
    # 2 runs x (3 queries x 4 per-query measures + 5 "all" rows): gm_map has an "all" row only
    assert len(frame) == 2 * (3 * 4 + 5)
    rows = frame[(frame.measure == "map") & (frame.qid != "all")].value.tolist()[:3]
    assert rows == scores.values["map"].tolist()
    all_rows = frame[frame.qid == "all"].set_index("measure").value
    assert all_rows["num_rel_ret"].tolist()[0] == scores.summary()["num_rel_ret"]


def test_cli_output_option_writes_the_per_query_values(tmp_path, capsys):
    path = tmp_path / "per_query.parquet"
    printed = _evaluate(["-q", "-m", "map,P@5", "-o", path, SAMPLE_QRELS, SAMPLE_RUN], capsys)
    frame = pd.read_parquet(path)
    for line in printed.splitlines():
        measure, qid, value = line.split()
        row = frame[(frame.measure == measure) & (frame.qid == qid)]
        assert f"{row.value.item():6.4f}" == value


# ---------------------------------------------------------------------------------------------------- errors


def _run_frame(changes: dict | None = None) -> pd.DataFrame:
    frame = pd.DataFrame({"qid": ["q1", "q1", "q2"], "docno": ["a", "b", "a"], "score": [1.0, 0.5, 0.2]})
    for (row, column), value in (changes or {}).items():
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
    return frame


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (
            _run_frame().drop(columns="score"),
            r"<DataFrame>:0: columns .* \(missing \['score'\]",
        ),
        (_run_frame({(2, "score"): float("nan")}), r"<DataFrame>:3: column 'score': a numeric \(non-NaN\) score"),
        (
            _run_frame({(1, "score"): "high"}),
            r"<DataFrame>:2: column 'score': a numeric .* got 'high'",
        ),
        (_run_frame({(1, "docno"): "a"}), r"<DataFrame>:2: column 'docno': each docno at most once per query"),
        (_run_frame({(0, "docno"): None}), r"<DataFrame>:1: column 'docno': a value in every row"),
    ],
)
def test_dataframe_errors_name_row_and_column(frame, message):
    qrels = pd.DataFrame({"qid": ["q1"], "docno": ["a"], "label": [1]})
    with pytest.raises(TrecFormatError, match=message):
        from_dataframe(frame, qrels)


def test_file_errors_name_file_row_and_column(tmp_path, capsys):
    qrels = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["a", "b"], "label": [1, 0.5]})
    qrels.to_parquet(tmp_path / "q.parquet")
    with pytest.raises(TrecFormatError, match=r"q\.parquet:2: column 'label': an integer relevance label, got 0\.5"):
        load_qrels(tmp_path / "q.parquet")
    (tmp_path / "r.csv").write_text("qid,docno,score\nq1,a,1.0\nq1,b,oops\n")
    with pytest.raises(TrecFormatError, match=r"r\.csv:3: column 'score': a numeric \(non-NaN\) score, got 'oops'"):
        load_run(tmp_path / "r.csv")
    with gzip.open(tmp_path / "r.txt.gz", "wb") as f:
        f.write(b"q1 Q0 a 1 1.0 t\nq1 Q0 b 2 x t\n")
    with pytest.raises(TrecFormatError, match=r"r\.txt\.gz:2: a numeric \(non-NaN\) score in field 5, got 'x'"):
        load_run(tmp_path / "r.txt.gz")
    # the command line: one error line, exit status 2
    assert main(["evaluate", str(tmp_path / "q.parquet"), str(SAMPLE_RUN)]) == 2
    assert "q.parquet:2: column 'label'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: (d / "q.csv").write_text("qid,docno,label\nq1,a,1\nq1,b,99999999999999999999\n"), "q.csv:3"),
        (lambda d: (d / "q.tsv").write_text("qid\tdocno\tlabel\nq1\ta\t1\nq1\tb\t1e20\n"), "q.tsv:3"),
        (
            lambda d: pq.write_table(
                pa.table({"qid": ["q1", "q1"], "docno": ["a", "b"], "label": pa.array([1, 2**64 - 1], pa.uint64())}),
                d / "q.parquet",
            ),
            "q.parquet:2",
        ),
    ],
)
def test_table_labels_beyond_int64_name_file_and_row(make, message, tmp_path):
    # the int64 cast would wrap such a label silently (to -2**63)
    make(tmp_path)
    (path,) = tmp_path.iterdir()
    expected = message + r": column 'label': an integer relevance label within the int64 range"
    with pytest.raises(TrecFormatError, match=expected):
        load_qrels(path)
    frame = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["a", "b"], "label": [1, 10**20]})  # Python ints
    with pytest.raises(TrecFormatError, match=r"<DataFrame>:2: column 'label': an integer relevance label within"):
        from_dataframe(pd.DataFrame({"qid": ["q1"], "docno": ["a"], "score": [1.0]}), frame)


def test_table_labels_at_the_int64_bounds_are_exact(tmp_path):
    (tmp_path / "q.csv").write_text("qid,docno,label\nq1,a,9223372036854775807\nq1,b,-9223372036854775808\n")
    assert load_qrels(tmp_path / "q.csv").columns.value.tolist() == [2**63 - 1, -(2**63)]


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_table_runs_rank_as_their_text_in_float64_and_float32(suffix, tmp_path):
    # tables are ranked as their rows written as TREC text: as doubles (trec_eval 10.0), or rounded to float32 as
    # trec_eval 9.x reads them into C floats
    run = {"q1": {"a": 16777217.0, "b": 16777216.0, "c": 0.1000000001, "d": 0.1000000002}}
    qrels = {"q1": {"a": 1, "c": 1}}
    run_df, qrels_df = _frames(qrels, run)
    path = tmp_path / f"run{suffix}"
    run_df.to_parquet(path) if suffix == ".parquet" else run_df.to_csv(path, index=False)
    text = _write(tmp_path, qrels, run)
    batch = read_trec(text[0], path)
    assert batch.docnos == [["a", "b", "d", "c"]]
    _same_batch(batch, read_trec(*text))
    _same_batch(from_dataframe(run_df, qrels_df), batch)
    as_float32 = read_trec(text[0], path, score_dtype=torch.float32)
    assert as_float32.docnos == [["b", "a", "d", "c"]]
    _same_batch(as_float32, read_trec(*text, score_dtype=torch.float32))


# ---------------------------------------------------------------------------------------------------- compare


def test_compare_reads_every_format(tmp_path, capsys):
    qrels_path, run_path = _write(tmp_path, *_collection(6))
    other = tmp_path / "other.txt"
    rng = random.Random(0)
    lines = [line.split() for line in run_path.read_text().splitlines()]
    other.write_text("".join(f"{q} Q0 {d} {r} {float(s) + rng.gauss(0, 0.3)!r} o\n" for q, _, d, r, s, _ in lines))
    write_run(load_run(other), tmp_path / "other.parquet")
    with gzip.open(tmp_path / "run.txt.gz", "wb") as f:
        f.write(run_path.read_bytes())
    argv = ["compare", "-m", "map,P@10", "--format", "csv", "--names", "a,b"]
    assert main([*argv, str(qrels_path), str(run_path), str(other)]) == 0
    plain = capsys.readouterr().out
    assert main([*argv, str(qrels_path), str(tmp_path / "run.txt.gz"), str(tmp_path / "other.parquet")]) == 0
    assert capsys.readouterr().out == plain


def test_to_dataframe_of_a_batch(tmp_path):
    qrels, run = _collection(8, queries=5)
    batch = trec_to_dense(qrels, run)
    frame = to_dataframe(batch)
    assert list(frame.columns) == ["qid", "docno", "rank", "score", "label"]
    assert len(frame) == int(batch.mask.sum())
    first = frame[frame.qid == batch.qids[0]]
    assert first.docno.tolist() == batch.docnos[0] and first["rank"].tolist() == list(range(len(first)))


def test_compressed_benchmark_runs_and_checks_its_means():
    from benchmarks.bench_compressed import measure

    record = measure(queries=30, docs=20, repeats=1, suffixes=[".gz", ".xz"])  # raises if a mean differs
    assert set(record["median_s"]) == {"plain", ".gz", ".xz"} and record["lines"] == 600


# ---------------------------------------------------------------------------------------------------- ids and values


def _no_pyarrow(monkeypatch) -> None:
    import torchrank.io.frames as frames

    monkeypatch.setattr(frames, "_pyarrow", lambda: None)  # as on a machine without the extra


@pytest.mark.parametrize("arrow", [True, False])
@pytest.mark.parametrize("missing", [pd.NA, pd.NaT, None, float("nan")])
@pytest.mark.parametrize(("column", "values"), [("qid", [1, "q2"]), ("docno", [7, "b"])])
def test_a_missing_id_in_a_mixed_column_is_an_error(column, values, missing, arrow, monkeypatch):
    # a mixed object column is read through Python strings, where pd.NA once became the id "<NA>"
    if not arrow:
        _no_pyarrow(monkeypatch)
    frame = pd.DataFrame({"qid": ["1", "1", "1"], "docno": ["a", "b", "c"], "score": [1.0, 2.0, 3.0]})
    frame[column] = pd.Series([*values, missing], dtype=object)
    with pytest.raises(TrecFormatError, match=rf"<DataFrame>:3: column '{column}': a value in every row"):
        from_dataframe(frame, pd.DataFrame({"qid": ["1"], "docno": ["a"], "label": [1]}))


_BIG = 123456789012


@pytest.mark.parametrize("path", ["float64", "object", "no pyarrow", "parquet"])
def test_float_ids_are_spelt_as_integers_and_join_integer_ids(path, tmp_path, monkeypatch):
    # pyarrow spelt float64 ids '5e+10' and '1.23456789012e+11', str '50000000000.0': none joined the
    # qrels' integer ids '50000000000' and '123456789012'
    qrels = pd.DataFrame({"qid": [5 * 10**10, 7, _BIG], "docno": [1, 2, 3], "label": [1, 1, 2]})
    run = pd.DataFrame({"qid": [5e10, 5e10, 7.0, float(_BIG)], "docno": [1.0, 2.0, 2.0, 3.0], "score": [1.0] * 4})
    expected = from_dataframe(run.astype({"qid": "int64", "docno": "int64"}), qrels)
    assert sorted(expected.qids) == sorted(["50000000000", "7", str(_BIG)]) and len(expected.docnos[0]) == 1
    if path == "object":
        run = run.astype(object)
    elif path == "no pyarrow":
        _no_pyarrow(monkeypatch)
    elif path == "parquet":
        run.to_parquet(tmp_path / "run.parquet")
        run = load_run(tmp_path / "run.parquet")
    _same_batch(from_dataframe(run, qrels), expected)


@pytest.mark.parametrize("arrow", [True, False])
def test_float_ids_that_are_not_whole_numbers_are_their_repr(arrow, monkeypatch):
    if not arrow:
        _no_pyarrow(monkeypatch)
    from torchrank.io import run_from_dataframe

    run = run_from_dataframe(pd.DataFrame({"qid": [1.5, 2.0, 0.1], "docno": ["a", "b", "c"], "score": [1.0] * 3}))
    assert run.qids == ["1.5", "2", "0.1"]
    mixed = run_from_dataframe(pd.DataFrame({"qid": [1.5, "x"], "docno": ["a", "b"], "score": [1.0] * 2}))
    assert mixed.qids == ["1.5", "x"]


@pytest.mark.parametrize("arrow", [True, False])
@pytest.mark.parametrize("bad", [2.0**53, -(2.0**60), float("inf")])
def test_float_ids_that_a_float_cannot_hold_exactly_are_refused(bad, arrow, monkeypatch):
    # 2**53 + 1 is stored as 2**53: spelling the float would silently name another query
    if not arrow:
        _no_pyarrow(monkeypatch)
    frame = pd.DataFrame({"qid": [1.0, bad], "docno": ["a", "b"], "score": [1.0, 2.0]})
    with pytest.raises(TrecFormatError, match=r"<DataFrame>:2: column 'qid': an id that a float holds exactly"):
        from_dataframe(frame, pd.DataFrame({"qid": ["1"], "docno": ["a"], "label": [1]}))


@pytest.mark.parametrize("arrow", [True, False])
@pytest.mark.parametrize(
    ("column", "bad", "what"),
    [
        ("score", " 1", "a numeric"),
        ("score", "1_0", "a numeric"),
        ("score", "1 ", "a numeric"),
        ("score", "\u0661", "a numeric"),  # an Arabic-Indic one: Python's float takes it, a TREC field does not
        ("label", " 2", "an integer relevance label"),
        ("label", "2_0", "an integer relevance label"),
    ],
)
def test_a_number_as_text_is_read_as_a_trec_field(column, bad, what, arrow, monkeypatch):
    # Python's float takes " 1" and "1_0", pyarrow does not: the error once blamed row 1 and a valid value
    if not arrow:
        _no_pyarrow(monkeypatch)
    run = pd.DataFrame({"qid": ["q1"] * 3, "docno": ["a", "b", "c"], "score": ["0.3", "0.5", "1"]})
    qrels = pd.DataFrame({"qid": ["q1"] * 3, "docno": ["a", "b", "c"], "label": ["1", "0", "2"]})
    assert from_dataframe(run, qrels).target.tolist() == [[2, 0, 1]]
    (run if column == "score" else qrels).loc[2, column] = bad
    with pytest.raises(TrecFormatError) as info:
        from_dataframe(run, qrels)
    assert str(info.value).startswith(f"<DataFrame>:3: column '{column}': {what}")
    assert info.value.got == bad


@pytest.mark.parametrize("arrow", [True, False])
def test_a_number_as_text_in_a_csv_names_its_line(arrow, tmp_path, monkeypatch):
    # pyarrow's CSV reader takes spaces around a number, and so does the reader without pyarrow
    if not arrow:
        _no_pyarrow(monkeypatch)
    (tmp_path / "r.csv").write_text("qid,docno,score\nq1,a,0.3\nq1,b,0.5\nq1,c, 1\t\n")
    assert load_run(tmp_path / "r.csv").columns.value.tolist() == [0.3, 0.5, 1.0]
    (tmp_path / "r.csv").write_text("qid,docno,score\nq1,a,0.3\nq1,b,0.5\nq1,c,1_0\n")
    with pytest.raises(TrecFormatError, match=r"r\.csv:4: column 'score': a numeric \(non-NaN\) score, got '1_0'"):
        load_run(tmp_path / "r.csv")


def test_a_column_named_twice_is_an_error(tmp_path, monkeypatch):
    # pandas gives both columns for frame["score"]: the reader once failed with a bare KeyError 0
    run = pd.DataFrame({"qid": ["q1"], "docno": ["a"], "score": [1.0]})
    twice = pd.concat([run, run[["score"]]], axis=1)
    message = r"one column named 'score' \(it names 2 columns\)"
    with pytest.raises(TrecFormatError, match=r"<DataFrame>:0: " + message):
        from_dataframe(twice, pd.DataFrame({"qid": ["q1"], "docno": ["a"], "label": [1]}))
    twice.columns = ["qid", "docno", "score", "score"]
    (tmp_path / "r.csv").write_text("qid,docno,score,score\nq1,a,1,2\n")
    pq.write_table(pa.Table.from_arrays([pa.array(c) for c in (["q1"], ["a"], [1.0], [2.0])], names=list(twice)),
                   tmp_path / "r.parquet")  # fmt: skip
    with pytest.raises(TrecFormatError, match=r"r\.csv:1: " + message):
        load_run(tmp_path / "r.csv")
    with pytest.raises(TrecFormatError, match=r"r\.parquet:0: " + message):
        load_run(tmp_path / "r.parquet")
    # a repeated column that is not read is no concern
    extra = pd.concat([run, run[["qid"]].rename(columns={"qid": "x"}), run[["qid"]].rename(columns={"qid": "x"})],
                      axis=1)  # fmt: skip
    assert from_dataframe(extra, pd.DataFrame({"qid": ["q1"], "docno": ["a"], "label": [1]})).qids == ["q1"]
    _no_pyarrow(monkeypatch)
    with pytest.raises(TrecFormatError, match=r"r\.csv:1: " + message):
        load_run(tmp_path / "r.csv")
