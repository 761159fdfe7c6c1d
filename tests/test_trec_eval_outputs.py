"""Per-query agreement, to trec_eval's 4 printed decimals, with trec_eval's own published test outputs.

The files and the commands that produced them come from trec_eval's ``test/`` folder (NIST notice in
``tests/data/trec_eval/LICENSE.trec_eval.md``). Ties are ordered as trec_eval orders them (score
descending, then docno descending) by ``torchrank.io``, and ranked with ``ties="first"``. With
``trec_eval="9"``, scores equal once rounded to float32 (9.x's ``float sim``) are ties: checked against
pytrec_eval, trec_eval 9.x's C code.
"""

from __future__ import annotations

import gzip
import json
import random
import re

import pytest
import torch
from conftest import DATA

from benchmarks.trec_eval_fuzz import Outcome, first_difference, generate, run_torchrank
from torchrank.functional import evaluate
from torchrank.io import read_qrels, read_run, read_trec, trec_to_dense
from torchrank.io.trec_eval import evaluate_batch, format_trec_eval, score_run

TREC = DATA / "trec_eval"
SUPPORTED = re.compile(
    r"^(map|map_cut_\d+|P_\d+|recall_\d+|ndcg|ndcg_cut_\d+|recip_rank|Rprec|success_\d+|rbp|rbp_resid)$"
)

CASES = {
    # expected output: (qrels, run, trec_eval flags as keyword arguments)
    "out.test.aq": ("qrels.test", "results.test", {}),
    "out.test.aql": ("qrels.rel_level", "results.test", {"relevance_threshold": 2}),
    "out.test.aqc": ("qrels.test", "results.trunc", {"all_queries": True}),
    "out.test.aqcM": ("qrels.test", "results.trunc", {"all_queries": True, "depth": 100}),
    "out.comment.test": ("qrels.comment.test", "results.comment.test", {}),
    "out.test": ("qrels.test.with-comments", "results.test", {}),
}


def _expected(name: str) -> dict[tuple[str, str], float]:
    rows = {}
    for line in (TREC / name).read_text().splitlines():
        measure, qid, value = line.split()
        if SUPPORTED.match(measure):
            rows[(measure, qid)] = float(value)
    return rows


@pytest.mark.parametrize("expected_file", list(CASES))
def test_matches_published_trec_eval_output(expected_file):
    qrels_file, run_file, flags = CASES[expected_file]
    flags = dict(flags)
    threshold = flags.pop("relevance_threshold", 1)
    batch = trec_to_dense(read_qrels(TREC / qrels_file), read_run(TREC / run_file), **flags)
    expected = _expected(expected_file)
    measures = sorted({m for m, _ in expected})
    ours = evaluate(
        batch.preds, batch.target, measures, mask=batch.mask, ideal_target=batch.ideal_target,
        judged=batch.judged, ties="first", reduction="none", relevance_threshold=threshold,
    )
    # trec_eval -c scores a query missing from the run 0 in every measure, rbp_resid too, whereas
    # torchrank's residual of an empty ranking is 1 (nothing was seen): apply trec_eval's convention
    missing = ~batch.mask.any(1)
    if "rbp_resid" in ours:
        ours["rbp_resid"] = ours["rbp_resid"].masked_fill(missing, 0)
    row = {qid: i for i, qid in enumerate(batch.qids)}
    compared = 0
    for (measure, qid), value in expected.items():
        got = ours[measure].mean() if qid == "all" else ours[measure][row[qid]]
        assert float(got) == pytest.approx(value, abs=5.01e-5), f"{measure} {qid}"
        compared += 1
    assert compared >= len(measures) * (1 if expected_file in ("out.comment.test", "out.test") else 3)
    if expected_file.startswith("out.test."):
        assert {"map", "ndcg", "P_10", "recip_rank", "Rprec", "rbp"} <= set(measures)


def test_published_files_hold_the_measures_we_claim():
    """Guard against a vacuous pass: the per-query files hold every supported family."""
    measures = {m for m, _ in _expected("out.test.aq")}
    for family in ("map", "map_cut_10", "P_5", "recall_100", "ndcg", "ndcg_cut_20", "recip_rank", "Rprec",
                   "success_10", "rbp", "rbp_resid"):
        assert family in measures
    assert torch.tensor(len(_expected("out.test.aq"))) > 100


# ------------------------------------------------------------------------ scores equal in float32 (pytrec_eval)

MEASURES = ["map", "ndcg_cut.10", "P.5", "recip_rank"]
KEYS = ["map", "ndcg_cut_10", "P_5", "recip_rank"]


def _colliding_files(tmp_path, seed: int, odd: bool) -> tuple:
    """Random qrels and a shuffled run whose scores often differ only beyond float32's precision."""
    rng = random.Random(seed)
    qrels_lines, run_lines = [], []
    for q in range(6):
        docs = list(dict.fromkeys(f"d{rng.randrange(50):02d}" for _ in range(30)))
        qrels_lines += [f"q{q} 0 {d} {rng.choice([0, 1, 2])}\n" for d in docs[::2]]
        kind = rng.randrange(4)
        for d in docs:
            if kind == 0:
                score = repr(float(2**24 + rng.randrange(4)))
            elif kind == 1:
                score = repr(0.1 + 1e-10 * rng.randrange(6))
            elif kind == 2:
                score = rng.choice(["1e-320", "0.0", "-0.0", "1e-46", "7e-46", "1e-45"])
            else:
                score = "%.12g" % (1 + rng.randrange(3) * 2**-25 + rng.randrange(2) * 2**-24)
            run_lines.append(f"q{q} Q0 {d} 0 {score} tag\n")
    rng.shuffle(run_lines)
    if odd:  # a lone \r: the line-by-line reader reads the file instead of the vectorised scan
        run_lines.insert(0, "# a comment\r# another\n")
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("".join(qrels_lines), newline="")
    run.write_text("".join(run_lines), newline="")
    return qrels, run


@pytest.mark.parametrize("odd", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_scores_equal_in_float32_are_ties_as_in_trec_eval(seed, odd, tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels_path, run_path = _colliding_files(tmp_path, seed, odd)
    qrels, run = read_qrels(qrels_path), read_run(run_path)
    expected = pytrec_eval.RelevanceEvaluator(qrels, set(KEYS)).evaluate(run)  # trec_eval's C code
    computed = [
        score_run(qrels_path, run_path, MEASURES, trec_eval="9"),  # pytrec_eval is trec_eval 9.x's code
        evaluate_batch(trec_to_dense(qrels, run, score_dtype=torch.float32), MEASURES),
    ]
    for scores in computed:
        for key in KEYS:
            got = dict(zip(scores.qids, scores.values[key].tolist(), strict=True))
            assert got == pytest.approx({q: expected[q][key] for q in got}, abs=1e-12), key
    # the float64 ranking (trec_eval 10.0's, score_run's default) is not 9.x's on these runs
    doubles = score_run(qrels_path, run_path, MEASURES)
    assert any(
        abs(v - expected[q][key]) > 1e-12
        for key in KEYS
        for q, v in zip(doubles.qids, doubles.values[key].tolist(), strict=True)
    )


# ------------------------------------------------------------------ recorded outputs of the trec_eval binaries
# trec_eval 10.0 and 9.0.8, built from usnistgov/trec_eval's source, ran once on the fuzz generator's files
# (benchmarks/trec_eval_fuzz.py, which wrote tests/data/trec_eval_parity.json.gz): inputs and outputs are committed,
# so this compares byte for byte without a binary. 10.0 exits with status 4 on a qrels query missing from a run
# unless -c is given; its recorded output is then the binary's on the shared queries, what torchrank evaluates
# (shared_queries_only, docs/cli.md). A file both refuse (a docno twice in an evaluated query's qrels) agrees.
def _recorded() -> list:
    with gzip.open(DATA / "trec_eval_parity.json.gz", "rt", encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    return [
        pytest.param(case, version, out, id=f"{case['seed']}-{version}-{' '.join(out['flags']) or 'official'}")
        for case in cases
        for version in ("10", "9")
        for out in case["outputs"][version]
    ]


@pytest.mark.parametrize(("case", "version", "recorded"), _recorded())
def test_output_equals_the_recorded_trec_eval_output(case, version, recorded):
    assert generate(case["seed"]) == (case["qrels"], case["run"])  # the generator still makes the recorded files
    ours = run_torchrank(recorded["flags"], case["qrels"], case["run"], version)
    theirs = Outcome(recorded["rc"], recorded["stdout"])
    assert first_difference(ours, theirs) is None
    if theirs.rc == 0:
        assert ours.out == theirs.out and theirs.out.count("\n") >= 20
    else:
        assert ours.rc == 2  # torchrank refuses the duplicate docno with a one-line error


def test_evaluate_batch_follows_c_and_j_as_the_batch_was_read(tmp_path):
    """A batch read with all_queries (-c) and judged_only (-J) carries them to evaluate_batch: num_rel's all line
    counts every qrels label above 0 whatever -l, and query 2, missing from the run, is an empty list (-nan).
    Expected: the trec_eval 10.0 binary's output for ``-q -c -J -l2 -m num_rel -m iprec_at_recall.0``."""
    (tmp_path / "qrels").write_text("1 0 a 1\n1 0 b 2\n2 0 c 1\n")
    (tmp_path / "run").write_text("1 Q0 a 1 1 r\n")
    batch = read_trec(tmp_path / "qrels", tmp_path / "run", all_queries=True, judged_only=True)
    scores = evaluate_batch(batch, ["num_rel", "iprec_at_recall.0"], relevance_threshold=2)
    assert format_trec_eval(scores, per_query=True).splitlines() == [
        "num_rel               \t1\t1",
        "iprec_at_recall_0.00  \t1\t0.0000",
        "num_rel               \t2\t0",
        "iprec_at_recall_0.00  \t2\t  -nan",
        "num_rel               \tall\t3",
        "iprec_at_recall_0.00  \tall\t  -nan",
    ]
