"""``torchrank.io.read_trec`` (the vectorised reader) against ``trec_to_dense(read_qrels, read_run)``:
same rows, columns, tie order, judgments and errors, on trec_eval's files and on random files, with scores
ranked in float64 (trec_eval 10.0's, read_trec's default) and in float32 (trec_eval 9.x's)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from torchrank.io import TrecFormatError, load_qrels, load_run, read_qrels, read_run, read_trec, trec_to_dense

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"


def _same(fast, slow) -> None:
    assert fast.qids == slow.qids
    for name in ("preds", "target", "mask", "judged", "ideal_target", "num_judged", "in_run"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert a.dtype == b.dtype and torch.equal(a, b), name
    assert list(fast.docnos) == list(slow.docnos)


@pytest.mark.parametrize(
    ("qrels", "run", "kwargs"),
    [
        ("qrels.test", "results.test", {}),
        ("qrels.rel_level", "results.test", {}),
        ("qrels.test", "results.trunc", {"all_queries": True}),
        ("qrels.test", "results.trunc", {"all_queries": True, "depth": 100}),
        ("qrels.comment.test", "results.comment.test", {}),
        ("qrels.test.with-comments", "results.test", {"depth": 7, "dtype": torch.float32}),
    ],
)
def test_trec_eval_files(qrels, run, kwargs):
    _same(
        read_trec(DATA / qrels, DATA / run, score_dtype=torch.float32, **kwargs),
        trec_to_dense(read_qrels(DATA / qrels), read_run(DATA / run), score_dtype=torch.float32, **kwargs),
    )
    _same(
        read_trec(DATA / qrels, DATA / run, **kwargs),
        trec_to_dense(read_qrels(DATA / qrels), read_run(DATA / run), **kwargs),
    )


def _random_files(tmp_path: Path, rng: random.Random) -> tuple[Path, Path]:
    run_lines, qrels_lines, seen = [], [], set()
    for _ in range(rng.randint(1, 8)):
        qid = f"q{rng.randint(0, 20)}"
        for d in rng.sample(range(60), rng.randint(1, 40)):
            doc = f"doc{d}" + "x" * rng.randint(0, 20) + rng.choice(["", "#1", "é"])
            if (qid, doc) in seen:
                continue
            seen.add((qid, doc))
            score = rng.choice(
                [
                    "1",
                    "2.5",
                    "-1.5",
                    "0.5",
                    f"{rng.random():.6f}",
                    "1e-3",
                    "3E2",
                    f"{rng.random()}",
                    "-0",
                    "+7.25",
                    "12345678901234567",
                    "16777217",  # the next four: pairs equal once rounded to float32, as trec_eval keeps scores
                    "16777216",
                    "0.1000000001",
                    "0.1000000002",
                    "1e-320",
                ]
            )
            sep = rng.choice([" ", "\t", "  "])
            run_lines.append(f"{qid}{sep}Q0 {doc} 1 {score} tag{' extra' * rng.randint(0, 1)}\n")
            if rng.random() < 0.3:
                qrels_lines.append(f"{qid} 0 {doc} {rng.randint(-1, 12)}\n")
    if rng.random() < 0.5:
        rng.shuffle(run_lines)
    if rng.random() < 0.3:
        run_lines.insert(0, "# a comment\n\n")
    qrels_lines.append("q0 0 judged-only 1\n")
    (tmp_path / "r").write_text("".join(run_lines), encoding="utf-8")
    (tmp_path / "q").write_text("".join(qrels_lines), encoding="utf-8")
    return tmp_path / "q", tmp_path / "r"


@pytest.mark.parametrize("seed", range(40))
def test_random_files(seed, tmp_path):
    qrels, run = _random_files(tmp_path, random.Random(seed))
    for kwargs in ({}, {"all_queries": True}, {"depth": 3}, {"score_dtype": torch.float64}, {"judged_only": True},
                   {"depth": 3, "judged_only": True}):
        kwargs = {"score_dtype": torch.float32, **kwargs}
        try:
            slow = trec_to_dense(read_qrels(qrels), read_run(run), **kwargs)
        except ValueError as error:
            with pytest.raises(ValueError) as info:
                read_trec(qrels, run, **kwargs)
            assert "share no query" in str(error) and "share no query" in str(info.value)
            continue
        _same(read_trec(qrels, run, **kwargs), slow)


@pytest.mark.parametrize(
    "text",
    [
        "q Q0 d1 1 1.0 t\nq Q0 d2 1 x t\n",
        "q Q0 d1 1 1.0 t\nq Q0 d2 1 1_0 t\n",
        "q Q0 d1 1 1.0 t\nq Q0 d1 1 2.0 t\n",
        "q Q0 d1 1 nan t\n",
        "q Q0 d1 1 1.0\n",
        "# only a comment\n",
        "",
        "q Q0 d1 1 1.0 t\r\nq Q0 d2 1 2.0 t\rq Q0 d3 1 3.0 t\n",  # a lone \r ends a line
        "q Q0 d\x01x 1 1.0 t\nq Q0 d\x01x 1 1.0 t\n",  # a control character is part of a token
    ],
)
def test_errors_and_odd_files_match_the_line_by_line_reader(text, tmp_path):
    path = tmp_path / "run.txt"
    path.write_bytes(text.encode())
    try:
        expected = read_run(path)
    except TrecFormatError as error:
        with pytest.raises(TrecFormatError) as info:
            load_run(path)
        assert str(info.value) == str(error)
        return
    got = load_run(path)
    assert got.qids == list(expected)
    assert len(got) == sum(map(len, expected.values()))


@pytest.mark.parametrize("label", ["99999999999999999999", "9223372036854775808", "-9223372036854775809"])
@pytest.mark.parametrize("odd", [False, True])
def test_labels_beyond_int64_name_file_and_line(label, odd, tmp_path):
    # a lone \r sends the file to the line-by-line reader; otherwise the vectorised scan finds the label
    text = "# a comment" + ("\r" if odd else "\n") + f"# another\nq 0 d1 1\nq 0 d2 {label}\n"
    path = tmp_path / "qrels.txt"
    path.write_bytes(text.encode())
    expected = f"{path}:4: an integer relevance in field 4 within the int64 range, got '{label}'"
    for read in (read_qrels, load_qrels, lambda p: read_trec(p, p)):
        with pytest.raises(TrecFormatError) as info:
            read(path)
        assert str(info.value) == expected


@pytest.mark.parametrize("odd", [False, True])
def test_scores_round_to_float32_through_the_double_as_trec_eval(odd, tmp_path):
    # 1 + 2**-24 + 2**-60 (to 28 digits) lies just above a float32 midpoint, so its nearest float32 is 1 + 2**-23;
    # but trec_eval's atof gives the double 1 + 2**-24, the midpoint itself, and its (float) cast rounds that to
    # even, 1.0: a tie with 1, which a direct text-to-float32 parse would miss
    from decimal import Decimal

    text = str(1 + Decimal(2) ** -24 + Decimal(2) ** -60)
    path = tmp_path / "run.txt"
    path.write_bytes(("# x\r" if odd else "").encode() + f"q Q0 a 1 {text} t\nq Q0 b 2 1 t\nq Q0 c 3 0.5 t\n".encode())
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q 0 a 1\n")
    batch = read_trec(qrels, path, score_dtype=torch.float32)
    assert batch.docnos == [["b", "a", "c"]]
    assert batch.preds.tolist() == [[1.0, 1.0, 0.5]]
    assert read_trec(qrels, path, score_dtype=torch.float64).docnos == [["a", "b", "c"]]


def test_labels_at_the_int64_bounds_are_read(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q 0 d1 9223372036854775807\nq 0 d2 -9223372036854775808\n")
    assert read_qrels(path) == {"q": {"d1": 2**63 - 1, "d2": -(2**63)}}
    assert load_qrels(path).columns.value.tolist() == [2**63 - 1, -(2**63)]


def test_errors_late_in_a_large_file_name_the_line(tmp_path):
    lines = [f"q{i // 1000} Q0 d{i} {i} {1e6 - i:.4f} t\n" for i in range(300_000)]
    lines[250_123] = lines[250_000].replace("1 t", "1 t")  # duplicate of line 250001
    path = tmp_path / "run.txt"
    path.write_text("".join(lines))
    with pytest.raises(TrecFormatError, match=r"run\.txt:250124: each docno at most once per query \(qid q250\)"):
        load_run(path)


def test_scores_parse_exactly_like_python_float(tmp_path):
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(0, 10, 5000), rng.random(5000) * 1e-3, rng.integers(-(10**6), 10**6, 500)])
    texts = [f"{v:.{rng.integers(0, 12)}f}" for v in values] + [repr(float(v)) for v in values[:2000]]
    path = tmp_path / "run.txt"
    path.write_text("".join(f"q Q0 d{i} 1 {t} t\n" for i, t in enumerate(texts)))
    got = load_run(path).columns.value
    assert got.tolist() == [float(t) for t in texts]


def test_qrels_read_once_for_several_runs():
    qrels = load_qrels(DATA / "qrels.test")
    a = read_trec(qrels, DATA / "results.test")
    b = read_trec(qrels, load_run(DATA / "results.trunc"), all_queries=True)
    assert a.runid == "STANDARD" and b.qids == ["301", "302", "303"] and int(b.num_judged.sum()) == 3681
