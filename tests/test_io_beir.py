"""BEIR files as BEIR writes them (``corpus.jsonl`` / ``queries.jsonl`` with ``_id``, ``qrels/*.tsv`` with a header):
the ids read equal ``json``'s reading of each line, string ids stay strings, and bad lines name file and line."""

from __future__ import annotations

import json

import pytest
import torch

from torchrank.io import BeirQrels, IdMap, TrecFormatError, read_beir_qrels, read_jsonl_ids
from torchrank.io import beir as beir_module

HEADER = "query-id\tcorpus-id\tscore\n"


def _jsonl(path, records, newline="\n"):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + newline for r in records), encoding="utf-8")
    return path


def _json_ids(path):
    """The reference: each non-blank line decoded whole by ``json``."""
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    return [json.loads(line)["_id"] for line in lines if line.strip()]


TRICKY = [
    {"_id": "0042", "title": "", "text": "an id that looks like an integer stays a string"},
    {"_id": "42", "title": "t", "text": "..."},
    {"_id": "café-ñ-文书", "title": "", "text": "unicode id"},
    {"title": "key order", "text": 'a text that quotes "_id": "fake" and \\"_id\\"', "_id": "d\"q\\x"},
    {"_id": "tab\tand\\u00e9", "text": "escapes in the id"},
    {"_id": "n", "metadata": {"url": "x"}, "text": "nested object"},
    {"title": "_id", "_id": "v", "text": "the bytes of the key as a value"},
]


def test_jsonl_ids_equal_json_decoding(tmp_path):
    path = _jsonl(tmp_path / "corpus.jsonl", TRICKY)
    assert read_jsonl_ids(path) == _json_ids(path) == [r["_id"] for r in TRICKY]


def test_jsonl_ids_over_block_boundaries_blank_lines_crlf_and_bom(tmp_path, monkeypatch):
    monkeypatch.setattr(beir_module, "_CHUNK_BYTES", 37)  # lines cut across every read
    records = [{"_id": f"doc-{i:03d}", "text": "x" * (i % 7)} for i in range(50)] + TRICKY
    path = tmp_path / "corpus.jsonl"
    text = "".join(json.dumps(r) + ("\r\n" if i % 3 else "\n") + ("\n" if i % 11 == 0 else "")
                   for i, r in enumerate(records))
    path.write_bytes(b"\xef\xbb\xbf" + text.rstrip("\r\n").encode())  # a BOM, no newline after the last line
    assert read_jsonl_ids(path) == _json_ids(path) == [r["_id"] for r in records]


def test_jsonl_number_id_is_its_text(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"_id": 17, "text": "a"}\n{"_id": "17b"}\n{"_id": 18, "text": "_id"}\n')
    assert read_jsonl_ids(path) == ["17", "17b", "18"]


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ('{"_id": "a"}\n{"text": "no id"}\n', 2, "_id"),
        ('{"_id": "a"}\nnot json\n', 2, "JSON object"),
        ('{"_id": "a"}\n\n{"_id": "a"}\n', 3, "once"),
        ('{"_id": null}\n', 1, "string or number"),
        ('{"_id": "a", "m": {"_id": "b"}}\n{"text": "no id"}\n', 2, "_id"),  # two keys on a line, none on the next
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, text, line, match):
    path = tmp_path / "corpus.jsonl"
    path.write_text(text)
    with pytest.raises(TrecFormatError, match=match) as err:
        read_jsonl_ids(path)
    assert err.value.path == str(path) and err.value.lineno == line
    assert f"corpus.jsonl:{line}:" in str(err.value)


def test_id_map_round_trip():
    ids = IdMap(["10", "9", "10", "é"])
    assert len(ids) == 3 and ids.ids == ["10", "9", "é"] and "9" in ids and 9 not in ids
    assert ids.encode(["é", "10"]).tolist() == [2, 0]
    assert ids.decode(torch.tensor([[1, -1], [2, 3]])) == [["9", None], ["é", None]]
    assert ids.encode(["x", "9"], missing=-1).tolist() == [-1, 1] and len(ids) == 3
    with pytest.raises(KeyError, match="'x' is not in this IdMap"):
        ids.encode(["x"])
    assert ids.encode(["x"], add=True).tolist() == [3] and ids.decode([3]) == ["x"]
    with pytest.raises(TypeError, match="string ids"):
        IdMap([1])


def _beir_loader_reading(path):
    """The reference reading: BEIR's loader (csv, tab, header skipped), as a dict of dicts."""
    out: dict = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        q, d, s = line.split("\t")
        out.setdefault(q, {})[d] = int(s)
    return out


def test_qrels_rows_equal_the_dict_reading(tmp_path):
    lines = ["007\td2\t1", "q-é\t0042\t2", "007\t42\t0", "3\td2\t1", "007\tghost\t2", "q-é\td1\t1"]
    path = tmp_path / "test.tsv"
    path.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    corpus = IdMap(["d1", "d2", "42", "0042"])
    qrels = read_beir_qrels(path, corpus)
    assert isinstance(qrels, BeirQrels) and qrels.query_ids == ["007", "q-é", "3"]
    assert corpus.ids[4:] == ["ghost"]  # judged, not in the corpus: numbered after it
    got = {q: {corpus.ids[i]: lab for i, lab in zip(ids.tolist(), labels.tolist(), strict=True) if i >= 0}
           for q, ids, labels in zip(qrels.query_ids, qrels.relevant_ids, qrels.relevant_labels, strict=True)}
    assert got == _beir_loader_reading(path)
    assert qrels.relevant_ids.tolist()[2] == [1, -1, -1] and qrels.relevant_labels.tolist()[2] == [1, 0, 0]
    ids, labels = qrels.rows(["3", "unjudged", "007"])
    assert ids.tolist() == [[1, -1, -1], [-1, -1, -1], [1, 2, 4]] and labels.tolist() == [[1, 0, 0], [0, 0, 0],
                                                                                           [1, 0, 2]]


def test_qrels_without_header_loses_no_line_and_negative_scores_are_non_relevant(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text("1\ta\t1\r\n1\tb\t-1\r\n\n2\ta\t3\r\n")
    qrels = read_beir_qrels(path, IdMap())
    assert qrels.query_ids == ["1", "2"]
    assert qrels.relevant_labels.tolist() == [[1, 0], [3, 0]]


@pytest.mark.parametrize(
    ("body", "line", "match"),
    [
        ("1\td\tx\n", 2, "integer score"),
        ("1\td\t1.5\n", 2, "integer score"),
        ("1\td\n", 2, "3 tab-separated"),
        ("1 d 1\n", 2, "3 tab-separated"),
        ("1\td\t1\n1\td\t2\n", 3, "once per query"),
    ],
)
def test_qrels_errors_name_file_and_line(tmp_path, body, line, match):
    path = tmp_path / "test.tsv"
    path.write_text(HEADER + body)
    with pytest.raises(TrecFormatError, match=match) as err:
        read_beir_qrels(path, IdMap())
    assert f"test.tsv:{line}:" in str(err.value)


def test_qrels_missing_document_error(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text(HEADER + "1\ta\t1\n1\tz\t1\n")
    corpus = IdMap(["a"])
    with pytest.raises(TrecFormatError, match=r"test\.tsv:3: a corpus-id of the corpus, got 'z'"):
        read_beir_qrels(path, corpus, missing="error")
    assert len(corpus) == 1
    with pytest.raises(ValueError, match="`missing`"):
        read_beir_qrels(path, corpus, missing="drop")
