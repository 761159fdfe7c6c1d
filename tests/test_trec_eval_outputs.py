"""Per-query agreement, to trec_eval's 4 printed decimals, with trec_eval's own published test outputs.

The files and the commands that produced them come from trec_eval's ``test/`` folder (NIST notice in
``tests/data/trec_eval/LICENSE.trec_eval.md``). Ties are ordered as trec_eval orders them (score
descending, then docno descending) by ``torchrank.io``, and ranked with ``ties="first"``.
"""

from __future__ import annotations

import re

import pytest
import torch
from conftest import DATA

from torchrank.functional import evaluate
from torchrank.io import read_qrels, read_run, trec_to_dense

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
