"""The ``torchrank evaluate`` command: bundled sample, measures, per-query output and clean errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import DATA

from torchrank.cli import main

TREC = DATA / "trec_eval"


def _published(name: str, measure: str) -> str:
    for line in (TREC / name).read_text().splitlines():
        m, qid, value = line.split()
        if m == measure and qid == "all":
            return value
    raise KeyError(measure)


def test_bundled_sample_prints_trec_eval_means(capsys):
    assert main(["evaluate", "-m", "map,P_10,ndcg,recip_rank"]) == 0
    out = capsys.readouterr().out
    for measure in ("map", "P_10", "ndcg", "recip_rank"):
        line = next(row for row in out.splitlines() if row.split() and row.split()[0] == measure)
        assert line.split()[1] == _published("out.test.aq", measure)


def test_per_query_columns(capsys):
    assert main(["evaluate", "-q", "-m", "P_5", str(TREC / "qrels.test"), str(TREC / "results.trunc")]) == 0
    header = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("measure"))
    assert header.split() == ["measure", "all", "301", "303"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evaluate", "-m", "ndgc"], "Unknown measure 'ndgc'"),
        (["evaluate", str(TREC / "qrels.test")], "give both QRELS and RUN"),
        (["evaluate", "missing.qrels", "missing.run"], "No such file"),
        (["evaluate", str(TREC / "results.test"), str(TREC / "results.test")], "results.test:1"),
    ],
)
def test_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "torchrank", "evaluate", "-m", "map"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "0.1785" in done.stdout  # trec_eval's map on its sample
