"""The ``torchrank evaluate`` command: trec_eval's published outputs line by line, formats, several runs,
clean one-line errors for bad files, the progress bar and the ``compare`` sub-command's wiring.

The expected outputs are trec_eval's own (``tests/data/trec_eval``, NIST notice beside them), produced by
the commands listed in ``CASES`` (from trec_eval's Makefile ``quicktest`` target).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA

from torchrank.cli import ProgressBar, main
from torchrank.io.trec_eval import UNSUPPORTED

TREC = DATA / "trec_eval"

# expected output: trec_eval's arguments, as given to `torchrank evaluate` (files relative to TREC)
CASES = {
    "out.test": ["qrels.test", "results.test"],
    "out.comment.test": ["qrels.comment.test", "results.comment.test"],
    "out.test.a": ["-m", "all_trec", "qrels.test", "results.test"],
    "out.test.aq": ["-m", "all_trec", "-q", "qrels.test", "results.test"],
    "out.test.aqc": ["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"],
    "out.test.aqcM": ["-m", "all_trec", "-q", "-c", "-M100", "qrels.test", "results.trunc"],
    "out.test.aql": ["-m", "all_trec", "-q", "-l2", "-mrelstring.20", "qrels.rel_level", "results.test"],
    "out.test.meas_params": [
        "-q",
        "-miprec_at_recall..10,.20,.25,.75,.50",
        "-m",
        "P.5,7,3",
        "-m",
        "recall.20,2000",
        "-m",
        "Rprec_mult.5.0,0.2,0.35",
        "-mutility.2,-1,0,0",
        "-m",
        "11pt_avg..25,.5,.75",
        "-mndcg.1=3,2=9,4=4.5",
        "-mndcg_cut.10,20,23.4",
        "-msuccess.2,5,20",
        "qrels.test",
        "results.test",
    ],
}


def _argv(args: list[str]) -> list[str]:
    return [str(TREC / a) if (TREC / a).is_file() else a for a in args]


def _evaluate(args: list[str], capsys: pytest.CaptureFixture) -> str:
    assert main(["evaluate", *_argv(args)]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("expected_file", list(CASES))
def test_output_equals_trec_eval_line_by_line(expected_file, capsys):
    ours = _evaluate(CASES[expected_file], capsys).splitlines()
    published = (TREC / expected_file).read_text().splitlines()
    assert ours == published  # byte for byte: names padded to 22, tabs, 4 decimals, counts, runid, num_q, relstring


def test_unsupported_measures_are_listed_in_docs():
    docs = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    for name in UNSUPPORTED:
        assert f"`{name}`" in docs
    for name in ("relstring", "binG", "G", "ndcg_rel", "Rndcg", "infAP"):  # computed, as trec_eval's all_trec prints
        assert name not in UNSUPPORTED


def test_bundled_sample_is_the_default(capsys):
    out = _evaluate([], capsys)
    assert out == (TREC / "out.test").read_text()


def test_grammar_names_follow_trec_eval_names(capsys):
    out = _evaluate(["-m", "ndcg@10,map@100", "-m", "P.10", "-m", "rbp.95", "-m", "err@20"], capsys)
    names = [line.split("\t")[0].rstrip() for line in out.splitlines()]
    assert names == ["P_10", "ndcg@10", "map@100", "rbp.95", "err@20"]
    values = {line.split("\t")[0].rstrip(): line.split("\t")[2] for line in out.splitlines()}
    assert values["ndcg@10"] == "0.3016"  # = trec_eval's ndcg_cut_10
    assert values["map@100"] == "0.1622"  # = trec_eval's map_cut_100


def test_several_runs_give_one_block_each(tmp_path, capsys):
    other = tmp_path / "other.run"
    other.write_text((TREC / "results.trunc").read_text().replace("STANDARD", "OTHER"))
    out = _evaluate(["-m", "official", "qrels.test", "results.test", str(other)], capsys)
    first = (TREC / "out.test").read_text()
    assert out.startswith(first)  # each block is trec_eval's output for that run
    second = out[len(first) :].splitlines()
    assert second[:2] == ["runid                 \tall\tOTHER", "num_q                 \tall\t2"]


@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_other_formats(fmt, capsys):
    out = _evaluate(["--format", fmt, "-q", "-m", "map,ndcg@10", "qrels.test", "results.test"], capsys)
    if fmt == "json":
        (run,) = json.loads(out)
        assert run["runid"] == "STANDARD" and run["num_q"] == 3
        assert round(run["all"]["map"], 4) == 0.1785
        assert round(run["per_query"]["map"]["302"], 4) == 0.4175
    elif fmt == "csv":
        lines = out.splitlines()
        assert lines[0] == "run,runid,measure,qid,value"
        assert any(line.endswith(",STANDARD,map,302,0.41750794729214034") or ",map,302," in line for line in lines)
        assert len(lines) == 1 + 2 * 3 + 2
    else:
        assert "0.1785" in out and "0.4175" in out and out.splitlines()[0].split() == ["measure", "qid", "STANDARD"]


def test_ties_option(capsys):
    first = _evaluate(["-m", "map", "qrels.test", "results.test"], capsys)
    average = _evaluate(["--ties", "average", "-m", "map", "qrels.test", "results.test"], capsys)
    assert first.splitlines()[-1] == "map                   \tall\t0.1785"
    assert average.splitlines()[-1].startswith("map")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_gives_the_cpu_output(capsys):
    assert _evaluate(["--device", "cuda", "-m", "all_trec", "-q", "qrels.test", "results.test"], capsys) == _evaluate(
        ["-m", "all_trec", "-q", "qrels.test", "results.test"], capsys
    )


def _bad(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


_RUN = "1 Q0 d1 1 0.5 t\n1 Q0 d2 2 0.4 t\n"
_QRELS = "1 0 d1 1\n1 0 d2 0\n"


@pytest.mark.parametrize(
    ("scores", "first_is_greater"),
    [(("16777217", "16777216"), True), (("0.1000000001", "0.1000000002"), False), (("1e-320", "0.0"), True),
     (("1e400", "1e39"), True)],
)
@pytest.mark.parametrize("version", ["10", "9"])
def test_scores_rank_as_doubles_in_trec_eval_10_and_as_float32_in_9(scores, first_is_greater, version, tmp_path,
                                                                     capsys):
    # trec_eval 10.0 ranks the doubles atof parses (double sim): a first when its score is greater, RR 1. 9.x (and
    # pytrec_eval) keep a C float: both scores are the same float, the tie goes to the greater docno, b, and the
    # relevant a comes second: RR 0.5 (the trec_eval binaries of both versions print these values)
    q = _bad(tmp_path, "qrels.txt", "q1 0 a 1\n")
    r = _bad(tmp_path, "run.txt", f"q1 Q0 a 1 {scores[0]} r\nq1 Q0 b 2 {scores[1]} r\n")
    out = _evaluate(["--trec-eval", version, "-m", "recip_rank", "-m", "map", q, r], capsys)
    value = "1.0000" if first_is_greater and version == "10" else "0.5000"
    assert out == f"map                   \tall\t{value}\nrecip_rank            \tall\t{value}\n"


# the minimal repros (a differential fuzz against trec_eval 10.0 found them), each expected output printed
# by the trec_eval 10.0 binary built from usnistgov/trec_eval's source
TREC_EVAL_10_REPROS = {
    "-M cuts before -J drops": (
        ["-M1", "-J", "-m", "P.1", "-m", "map", "-m", "num_ret"],
        "q1 0 a 1\nq1 0 c 0\n",
        "q1 Q0 b 1 3 r\nq1 Q0 a 2 2 r\nq1 Q0 c 3 1 r\n",
        "num_ret               \tall\t0\nmap                   \tall\t0.0000\nP_1                   \tall\t0.0000\n",
    ),
    "rbp_resid 0 without an unjudged document": (
        ["-m", "rbp", "-m", "rbp_resid"],
        "1 0 a 1\n",
        "1 Q0 a 1 1.0 r\n",
        "rbp                   \tall\t0.1000\nrbp_resid             \tall\t0.0000\n",
    ),
    "-c num_rel counts labels above 0 whatever -l": (
        ["-c", "-l2", "-q", "-m", "num_rel"],
        "1 0 a 1\n1 0 b 2\n2 0 c 1\n",
        "1 Q0 a 1 1 r\n",
        "num_rel               \t1\t1\nnum_rel               \t2\t0\nnum_rel               \tall\t3\n",
    ),
    "-J with no judged document: -nan": (
        ["-J", "-m", "iprec_at_recall.0,0.5", "-m", "11pt_avg", "-m", "map"],
        "q1 0 a 1\nq1 0 b 0\n",
        "q1 Q0 x 1 1 r\n",
        "map                   \tall\t0.0000\niprec_at_recall_0.00  \tall\t  -nan\n"
        "iprec_at_recall_0.50  \tall\t0.0000\n11pt_avg              \tall\t  -nan\n",
    ),
    "runid is the last line's tag": (
        ["-m", "runid", "-m", "map"],
        "q1 0 a 1\n",
        "q1 Q0 a 1 2 first\nq1 Q0 b 2 1 last\n",
        "runid                 \tall\tlast\nmap                   \tall\t1.0000\n",
    ),
    "AP 71/160 on a rounding boundary": (
        ["-m", "map"],
        "".join(f"q 0 d{i} {int(i > 0)}\n" for i in range(6)) + "q 0 u0 1\nq 0 u1 1\nq 0 u2 1\n",
        "".join(f"q Q0 d{i} {i + 1} {6 - i} r\n" for i in range(6)),
        "map                   \tall\t0.4438\n",
    ),
    "RBP 513/4000 on a rounding boundary": (
        ["-m", "rbp"],
        "Q16 0 d108 3\nQ16 0 d9 3\nQ16 0 D16-c 4\n",
        "Q16 Q0 D11-a 10 3 r\nQ16 Q0 d108 3 2.5 r\nQ16 Q0 d9 14 2.5 r\n",
        "rbp                   \tall\t0.1283\n",
    ),
}


@pytest.mark.parametrize("case", list(TREC_EVAL_10_REPROS))
def test_trec_eval_10_repros(case, tmp_path, capsys):
    flags, qrels, run, expected = TREC_EVAL_10_REPROS[case]
    q, r = _bad(tmp_path, "qrels.txt", qrels), _bad(tmp_path, "run.txt", run)
    assert _evaluate([*flags, q, r], capsys) == expected


@pytest.mark.parametrize(
    ("case", "qrels", "run", "message"),
    [
        ("4 columns", _QRELS, _RUN + "1 Q0 d3 3\n", "run.txt:3: at least 6 whitespace-separated fields"),
        ("non-numeric score", _QRELS, "1 Q0 d1 1 0.5 t\n1 Q0 d2 2 high t\n", "run.txt:2: a numeric (non-NaN) score"),
        ("NaN score", _QRELS, "1 Q0 d1 1 nan t\n", "run.txt:1: a numeric (non-NaN) score"),
        ("duplicate docno", _QRELS, _RUN + "1 Q0 d1 3 0.1 t\n", "run.txt:3: each docno at most once per query (qid 1)"),
        ("empty run", _QRELS, "", "run.txt:0: at least one 'qid Q0 docno rank score tag' line"),
        ("empty qrels", "", _RUN, "qrels.txt:0: at least one 'qid iter docno rel' line"),
        ("no shared query", _QRELS, "9 Q0 d1 1 0.5 t\n", "run.txt:1: queries judged in"),
        ("bad qrels label", "1 0 d1 x\n", _RUN, "qrels.txt:1: an integer relevance in field 4"),
        (
            "qrels label beyond int64",
            "1 0 d1 1\n1 0 d2 99999999999999999999\n",
            _RUN,
            "qrels.txt:2: an integer relevance in field 4 within the int64 range, got '99999999999999999999'",
        ),
        ("missing file", None, _RUN, "No such file"),
    ],
)
def test_bad_files_one_line_error_exit_2(case, qrels, run, message, tmp_path, capsys):
    q = _bad(tmp_path, "qrels.txt", qrels) if qrels is not None else str(tmp_path / "missing.qrels")
    r = _bad(tmp_path, "run.txt", run)
    assert main(["evaluate", q, r]) == 2, case
    captured = capsys.readouterr()
    err = captured.err
    assert message in err, err
    assert err.count("\n") == 1 and err.startswith("torchrank evaluate: error: ") and "Traceback" not in err
    assert captured.out == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-m", "ndgc"], "Unknown measure 'ndgc'"),
        (["-m", "yaap"], "yaap is not supported"),
        (["-m", "P.x"], "comma-separated numbers"),
        (["-M", "0", "qrels.test", "results.test"], "-M/--depth"),
        (["qrels.test"], "give QRELS and at least one RUN"),
    ],
)
def test_bad_options_one_line_error(argv, message, capsys):
    assert main(["evaluate", *_argv(argv)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_large_error_line_found_without_reading_line_by_line(tmp_path, capsys):
    lines = [f"q{i // 1000} Q0 d{i} {i} {1e6 - i:.3f} t\n" for i in range(200_000)]
    lines[150_000] = "q150 Q0 d150000 1 oops t\n"
    run = tmp_path / "big.run"
    run.write_text("".join(lines))
    qrels = _bad(tmp_path, "q.txt", "q1 0 d1000 1\n")
    assert main(["evaluate", qrels, str(run)]) == 2
    assert f"{run}:150001: a numeric (non-NaN) score in field 5, got 'oops'" in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_on_a_terminal_only():
    term = _Terminal()
    bar = ProgressBar(1000, "reading run", stream=term, enabled=None)
    assert not bar.enabled  # small job: no bar
    bar = ProgressBar(64 << 20, "reading run", stream=term)
    assert bar.enabled
    for _ in range(4):
        bar(16 << 20)
    bar.stage("evaluating")
    bar.close()
    text = term.getvalue()
    assert text.count("\r") >= 5 and "reading run [" in text and "100%" in text and "evaluating" in text
    assert "\n" not in text
    plain = io.StringIO()
    bar = ProgressBar(64 << 20, "reading", stream=plain)
    bar(64 << 20)
    bar.close()
    assert not bar.enabled and plain.getvalue() == ""


def test_progress_flag_forces_the_bar(capsys):
    assert main(["evaluate", "--progress", "-m", "map"]) == 0
    captured = capsys.readouterr()
    assert "\r" in captured.err and "reading" in captured.err
    assert captured.out.splitlines()[-1] == "map                   \tall\t0.1785"


def test_compare_subcommand_is_wired():
    with pytest.raises(SystemExit) as info:
        main(["compare", "--help"])
    assert info.value.code == 0


def test_python_dash_m_entry_point():
    done = subprocess.run(
        [sys.executable, "-m", "torchrank", "evaluate", "-m", "map"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "map                   \tall\t0.1785"
    assert done.stderr == ""  # not a terminal: no progress bar


def test_bpref_on_a_rounding_boundary_prints_as_trec_eval(capsys):
    """bpref = 71/160 = 0.44375 exactly: trec_eval's sum, term by term in rank order, lands just below it and
    prints 0.4437 (seen from the trec_eval binary); torchrank must add in the same order to print the same."""
    folder = DATA / "bpref_boundary"
    assert main(["evaluate", "-q", "-m", "bpref", str(folder / "qrels"), str(folder / "run")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["bpref                 \tq2\t0.4437", "bpref                 \tall\t0.4437"]


def test_all_line_adds_queries_one_by_one_as_trec_eval():
    """The mean over queries is a sum in query order, then one division, as trec_eval accumulates: on these
    values a pairwise (torch) mean differs in the last bit, which can move a printed 4th decimal."""
    import random

    from torchrank.io.trec_eval import RunScores

    rng = random.Random(0)
    values = [rng.random() for _ in range(37)]
    sequential = 0.0
    for v in values:
        sequential += v
    pairwise = float(torch.tensor(values, dtype=torch.float64).mean())
    assert pairwise != sequential / len(values)  # the case discriminates
    scores = RunScores(None, "r", [str(i) for i in range(37)], {"map": torch.tensor(values, dtype=torch.float64)},
                       {"map": "float"})
    assert scores.summary()["map"] == sequential / len(values)


@pytest.mark.parametrize("argv", [["--help"], ["evaluate", "--help"], ["compare", "--help"]])
def test_help_answers_without_importing_torch(argv):
    """`torchrank --help` must not pay torch's start-up (over a second): -X importtime lists every module
    the process imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "torchrank", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: torchrank")
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "torchrank.cli" in imported  # the listing is read right
    heavy = sorted(m for m in imported if m.split(".")[0] == "torch" or m.startswith("torchrank.functional"))
    assert heavy == []


def test_compare_parser_names_the_corrections_that_stats_implements():
    """`--correction`'s choices are listed apart from torchrank.stats (which imports torch): they must agree."""
    from torchrank import _compare_args
    from torchrank.stats import CORRECTIONS

    assert _compare_args.CORRECTIONS == CORRECTIONS
