"""``torchrank compare``: trec_eval's means, the stats functions' p-values, every output format, clean errors."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import random
from pathlib import Path

import pytest
import torch
from conftest import DATA, DEVICES

from torchrank.cli import main
from torchrank.compare import add_parser, run
from torchrank.functional import evaluate
from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN, read_qrels, read_run, trec_to_dense
from torchrank.stats import (
    benjamini_hochberg,
    bonferroni,
    bootstrap_ci,
    cohens_d,
    holm,
    paired_t_test,
    randomization_test,
    wilcoxon,
)

TREC = DATA / "trec_eval"
QRELS31 = TREC / "qrels.comment.test"  # 31 judged queries
RUN31 = TREC / "results.comment.test"
MEASURES = ["map", "P_10", "ndcg_cut_10", "recip_rank", "recall_100"]


def compare(argv: list) -> int:
    """``torchrank compare ARGV...`` through the command line's entry point."""
    return main(["compare", *map(str, argv)])


def _json(argv: list, capsys) -> dict:
    assert compare([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory) -> Path:
    """results.comment.test with Gaussian noise on its scores: a clearly worse run on the same queries."""
    rng = random.Random(1)
    lines = []
    for line in RUN31.read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            fields[4] = repr(float(fields[4]) + rng.gauss(0, 0.5))
            line = " ".join(fields)
        lines.append(line)
    path = tmp_path_factory.mktemp("runs") / "noisy.run"
    path.write_text("\n".join(lines) + "\n")
    return path


def _published_all(name: str) -> dict[str, float]:
    out = {}
    for line in (TREC / name).read_text().splitlines():
        measure, qid, value = line.split()
        if qid == "all" and measure in MEASURES:
            out[measure] = float(value)
    return out


def _per_query(qrels: Path, run_path: Path, measures: list[str]) -> torch.Tensor:
    batch = trec_to_dense(read_qrels(qrels), read_run(run_path), all_queries=True)
    values = evaluate(
        batch.preds, batch.target, measures, mask=batch.mask, ideal_target=batch.ideal_target,
        judged=batch.judged, ties="first", reduction="none",
    )  # fmt: skip
    return torch.stack([values[m] for m in measures]).double()


# ---------------------------------------------------------------------------------------------------- values


def test_means_equal_trec_eval_with_missing_queries_scored_zero(capsys):
    # results.trunc lacks query 302: by default it scores 0 there, as trec_eval -c (out.test.aqc)
    argv = [TREC / "qrels.test", TREC / "results.test", TREC / "results.trunc", "-m", ",".join(MEASURES)]
    assert compare([*argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "results.trunc has no results for 1 of 3 qrels queries" in captured.err
    doc = json.loads(captured.out)
    assert doc["queries"] == 3
    full, trunc = (run_["means"] for run_ in doc["runs"])
    for measure, value in _published_all("out.test.aq").items():
        assert round(full[measure], 4) == value, measure
    for measure, value in _published_all("out.test.aqc").items():
        assert round(trunc[measure], 4) == value, measure


def test_common_queries_option(capsys):
    argv = [TREC / "qrels.test", TREC / "results.test", TREC / "results.trunc", "-m", "P_10", "--queries", "common"]
    doc = _json(argv, capsys)
    assert doc["queries"] == 2
    # per-query P_10 of trec_eval for 301 and 303 (out.test.aq and out.test.aqc)
    assert doc["runs"][0]["means"]["P_10"] == pytest.approx((0.2 + 0.0) / 2)
    assert doc["runs"][1]["means"]["P_10"] == pytest.approx((0.2 + 0.4) / 2)


def test_values_equal_the_evaluate_path_and_the_stats_functions(noisy_run, capsys):
    argv = [QRELS31, RUN31, noisy_run, "-m", ",".join(MEASURES), "--permutations", "2000", "--bootstrap", "3000"]
    doc = _json([*argv, "--seed", "7"], capsys)
    base, other = _per_query(QRELS31, RUN31, MEASURES), _per_query(QRELS31, noisy_run, MEASURES)
    assert doc["queries"] == base.shape[-1] == 31
    t = paired_t_test(other, base).pvalue
    r = randomization_test(other, base, 2000, generator=torch.Generator().manual_seed(7)).pvalue
    ci = bootstrap_ci(other, base, 3000, generator=torch.Generator().manual_seed(8))
    adjusted = holm(t)
    for k, measure in enumerate(MEASURES):
        assert doc["runs"][0]["means"][measure] == pytest.approx(base[k].mean().item(), abs=1e-12)
        assert doc["runs"][1]["means"][measure] == pytest.approx(other[k].mean().item(), abs=1e-12)
        row = doc["comparisons"][k]
        assert (row["measure"], row["run"], row["baseline"]) == (measure, "noisy.run", "results.comment.test")
        assert row["diff"] == pytest.approx((other[k] - base[k]).mean().item(), abs=1e-12)
        assert row["p_t"] == pytest.approx(t[k].item(), rel=1e-12)
        assert row["p_randomization"] == pytest.approx(r[k].item(), rel=1e-12)
        assert row["ci_low"] == pytest.approx(ci.low[k].item(), rel=1e-9)
        assert row["ci_high"] == pytest.approx(ci.high[k].item(), rel=1e-9)
        assert row["p_adjusted"] == pytest.approx(adjusted[k].item(), rel=1e-12)
        assert row["significant"] == (adjusted[k].item() <= 0.05)
    assert doc["comparisons"][0]["significant"]  # noise costs map clearly


def test_all_pairs_and_randomization_drive_holm(noisy_run, capsys):
    argv = [QRELS31, RUN31, noisy_run, RUN31, "-m", "map,P@10", "--baseline", "all-pairs"]
    doc = _json([*argv, "--test", "randomization", "--permutations", "1000", "--bootstrap", "0"], capsys)
    rows = doc["comparisons"]
    assert len(rows) == 3 * 2  # 3 pairs x 2 measures, adjusted together
    assert [(r["run"], r["baseline"]) for r in rows[:3]] == [
        ("noisy.run", "results.comment.test"), ("results.comment.test#2", "results.comment.test"),
        ("results.comment.test#2", "noisy.run"),
    ]  # fmt: skip
    p = torch.tensor([r["p_randomization"] for r in rows], dtype=torch.float64)
    assert [r["p_adjusted"] for r in rows] == pytest.approx(holm(p).tolist(), rel=1e-12)
    assert all(r["ci_low"] is None for r in rows)
    same = rows[1]
    assert same["diff"] == 0 and same["p_t"] == 1 and same["p_randomization"] == 1 and not same["significant"]


@pytest.mark.parametrize(("test", "correction"), [("wilcoxon", "bh"), ("t", "bonferroni"), ("wilcoxon", "none")])
def test_wilcoxon_effect_size_and_corrections(noisy_run, test, correction, capsys):
    argv = [QRELS31, RUN31, noisy_run, RUN31, "-m", ",".join(MEASURES), "--permutations", "0", "--bootstrap", "0"]
    doc = _json([*argv, "--test", test, "--correction", correction], capsys)
    runs = [_per_query(QRELS31, path, MEASURES) for path in (RUN31, noisy_run, RUN31)]
    other, base = torch.stack(runs[1:]), runs[0].expand(2, -1, -1)  # [pairs, measures, queries]
    p_w = wilcoxon(other, base).pvalue
    tested = p_w if test == "wilcoxon" else paired_t_test(other, base).pvalue
    adjusted = {"bh": benjamini_hochberg, "bonferroni": bonferroni, "none": lambda p: p}[correction](tested)
    d = cohens_d(other, base)
    for row in doc["comparisons"]:
        k, pair = MEASURES.index(row["measure"]), 0 if row["run"] == "noisy.run" else 1
        assert row["p_wilcoxon"] == pytest.approx(p_w[pair, k].item(), rel=1e-12)
        assert row["p_adjusted"] == pytest.approx(adjusted[pair, k].item(), rel=1e-12)
        assert row["cohens_d"] == pytest.approx(d[pair, k].item(), rel=1e-12)
        assert row["p_tukey"] is None
    same = [r for r in doc["comparisons"] if r["run"] == "results.comment.test#2"]  # the baseline again
    assert all(r["p_wilcoxon"] == 1 and r["cohens_d"] == 0 for r in same)


def test_tukey_over_all_runs_equals_scipy(noisy_run, capsys):
    scipy_stats = pytest.importorskip("scipy.stats")
    argv = [QRELS31, RUN31, noisy_run, RUN31, "-m", "map,P_10", "--baseline", "all-pairs", "--test", "tukey"]
    doc = _json([*argv, "--correction", "none", "--permutations", "0", "--bootstrap", "0"], capsys)
    runs = [_per_query(QRELS31, path, ["map", "P_10"]) for path in (RUN31, noisy_run, RUN31)]
    index = {"results.comment.test": 0, "noisy.run": 1, "results.comment.test#2": 2}
    for k, measure in enumerate(["map", "P_10"]):
        ref = scipy_stats.tukey_hsd(*[r[k].numpy() for r in runs]).pvalue
        rows = [r for r in doc["comparisons"] if r["measure"] == measure]
        assert len(rows) == 3
        for row in rows:
            expected = ref[index[row["run"]], index[row["baseline"]]]
            assert row["p_tukey"] == pytest.approx(expected, abs=1e-10) and row["p_adjusted"] == row["p_tukey"]
    assert compare([*argv, "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "Tukey HSD, Holm-adjusted over 6 comparisons" in out and "p (Tukey)" in out


def test_seed_makes_resampling_reproducible(capsys):
    argv = [SAMPLE_QRELS, SAMPLE_RUN, TREC / "results.trunc", "-m", "map", "--permutations", "5", "--seed", "3"]
    first = _json(argv, capsys)["comparisons"]
    assert _json(argv, capsys)["comparisons"] == first


# ---------------------------------------------------------------------------------------------------- formats


def test_table_and_markdown_mark_the_significantly_better_run(noisy_run, capsys):
    argv = [QRELS31, RUN31, noisy_run, "-m", "map,mean_rank", "--names", "bm25,noisy", "--bootstrap", "500"]
    assert compare([*argv, "--permutations", "500"]) == 0
    text = capsys.readouterr().out
    assert "31 queries" in text and "Holm-adjusted over 2 comparisons" in text
    base_row = next(line for line in text.splitlines() if line.startswith("(a) bm25"))
    assert base_row.split()[2].endswith("^b")  # higher map than the noisy run, significantly
    assert compare([*argv, "--format", "markdown", "--permutations", "500"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line.startswith("| (")]
    assert len(table) == 2  # the summary rows (detail rows start with the measure)
    assert len([line for line in lines if line.startswith(("| map |", "| mean_rank |"))]) == 2
    cells = [c.strip() for c in table[0].strip("|").split("|")]
    assert cells[0] == "(a) bm25" and cells[1].startswith("**") and cells[1].endswith("<sup>b</sup>")
    # mean_rank: lower is better, so the mark (if any) goes to the run with the smaller mean
    noisy_cells = [c.strip() for c in table[1].strip("|").split("|")]
    assert "<sup>" not in noisy_cells[1]
    header_counts = {line.count("|") for line in lines if line.startswith("|")}
    assert len(header_counts) == 2  # every row of each table has its table's number of cells


def test_latex_is_a_booktabs_tabular(noisy_run, capsys):
    argv = [QRELS31, RUN31, noisy_run, "-m", "map,P@10,ndcg@10", "--names", "BM25_base,noisy & co", "--format", "latex"]
    assert compare([*argv, "--permutations", "100", "--bootstrap", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("% torchrank compare:")
    body = lines[lines.index(r"\begin{tabular}{lrrr}") :]
    assert body[1] == r"\toprule" and body[-2:] == [r"\bottomrule", r"\end{tabular}"]
    rows = [line for line in body if line.endswith(r"\\")]
    assert rows[0] == r"Run & map & P@10 & ndcg@10 \\"
    assert rows[1].startswith(r"(a) BM25\_base & \textbf{") and "$^{b}$" in rows[1]
    assert rows[2].startswith(r"(b) noisy \& co & ")
    assert all(row.count(" & ") == 3 for row in rows)


def test_csv_parses(capsys):
    argv = [SAMPLE_QRELS, SAMPLE_RUN, TREC / "results.trunc", "-m", "map,P@5", "--format", "csv", "--bootstrap", "100"]
    assert compare([*argv, "--permutations", "50"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["measure"] for r in rows] == ["map", "P@5"]
    assert all(float(r["p_t"]) <= 1 and r["significant"] in ("True", "False") for r in rows)
    assert float(rows[0]["mean_baseline"]) == pytest.approx(0.1785, abs=5e-5)


def test_skipped_tests_leave_their_columns_out(capsys):
    argv = [SAMPLE_QRELS, SAMPLE_RUN, TREC / "results.trunc", "-m", "map", "--permutations", "0", "--bootstrap", "0"]
    assert compare([*argv, "--correction", "none"]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("measure"))
    assert header.split() == ["measure", "run", "vs", "diff", "d", "p", "(t)", "p", "(Wilcoxon)", "sig."]


# ---------------------------------------------------------------------------------------------------- errors


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


_GOOD = "301 Q0 FBIS3-10082 1 2.5 t\n301 Q0 FBIS3-10169 2 2.0 t\n"
_BAD_INPUT = {  # case: (run files after the sample run, extra options, expected message)
    "four_columns": ([TREC / "qrels.test"], [], "qrels.test:1: at least 6"),
    "bad_score": ([("bad.run", "301 Q0 d1 1 2.5 t\n301 Q0 d2 2 high t\n")], [], "bad.run:2: a numeric"),
    "duplicate": ([("dup.run", _GOOD + "301 Q0 FBIS3-10082 3 1.0 t\n")], [], "dup.run:3: each docno at most once"),
    "empty": ([("empty.run", "# nothing here\n")], [], "empty.run:0: at least one"),
    "foreign": ([("foreign.run", "999 Q0 d1 1 1.0 t\n")], [], "foreign.run: the run shares no query with the qrels"),
    "missing": ([Path("missing.run")], [], "No such file"),
    "one_run": ([], [], "at least two runs"),
    "measure": ([SAMPLE_RUN], ["-m", "map,ndgc@10"], "Unknown measure 'ndgc@10'"),
    "names": ([SAMPLE_RUN], ["--names", "a,b,c"], "--names: expected 2"),
    "no_permutations": ([SAMPLE_RUN], ["--test", "randomization", "--permutations", "0"], "needs --permutations > 0"),
}


@pytest.mark.parametrize("case", sorted(_BAD_INPUT))
def test_bad_input_is_one_line_and_exit_2(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs, options, message = _BAD_INPUT[case]
    paths = [_write(tmp_path, *r) if isinstance(r, tuple) else r for r in runs]
    assert compare([SAMPLE_QRELS, SAMPLE_RUN, *paths, *options]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("torchrank compare: error: ") and message in err[0], err
    assert captured.out == ""


@pytest.mark.parametrize("option", [["--alpha", "1.5"], ["--permutations", "-1"], ["--depth", "0"]])
def test_bad_numbers_are_refused_by_the_parser(option, capsys):
    with pytest.raises(SystemExit) as exit_:
        compare([SAMPLE_QRELS, SAMPLE_RUN, SAMPLE_RUN, *option])
    assert exit_.value.code == 2 and option[0] in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_unavailable_cuda_is_a_clean_error(capsys):
    assert compare([SAMPLE_QRELS, SAMPLE_RUN, SAMPLE_RUN, "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- devices, cli


@pytest.mark.parametrize("device", DEVICES)
def test_device_gives_the_cpu_numbers(device, noisy_run, capsys):
    argv = [QRELS31, RUN31, noisy_run, "-m", "map,ndcg@10,P@10", "--permutations", "5000", "--bootstrap", "1000"]
    on_device = _json([*argv, "--device", device], capsys)
    on_cpu = _json(argv, capsys)
    assert on_device["settings"]["device"].startswith(device)
    assert on_device["runs"] == on_cpu["runs"] or all(
        a["means"][m] == pytest.approx(b["means"][m], abs=1e-12)
        for a, b in zip(on_device["runs"], on_cpu["runs"], strict=True)
        for m in a["means"]
    )
    for dev_row, cpu_row in zip(on_device["comparisons"], on_cpu["comparisons"], strict=True):
        assert dev_row["p_t"] == pytest.approx(cpu_row["p_t"], rel=1e-9)
        assert abs(dev_row["p_randomization"] - cpu_row["p_randomization"]) < 0.01  # other random streams
        assert abs(dev_row["ci_low"] - cpu_row["ci_low"]) < 0.02


def test_standalone_parser_contract(capsys):
    """``add_parser`` + ``run`` work on any argparse sub-parsers object, as the command line uses them."""
    parser = argparse.ArgumentParser(prog="torchrank")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", str(SAMPLE_QRELS), str(SAMPLE_RUN), str(SAMPLE_RUN), "-m", "map"])
    assert args.handler is run
    assert run(args) == 0
    assert "(b) results.test#2" in capsys.readouterr().out


def test_infap_bpref_and_judged_only_equal_torchrank_evaluate(tmp_path, capsys):
    """compare's per-query values are evaluate's: infAP reads the pool (-1 labels), bpref the judged count, -J."""
    from test_judgments import _collection, _write

    from torchrank.io import read_trec
    from torchrank.io.trec_eval import evaluate_batch

    qrels, run_a = _collection(3)
    _, run_b = _collection(4)
    qpath, apath = _write(tmp_path, qrels, run_a)
    bpath = tmp_path / "b.txt"
    bpath.write_text("".join(f"{q} Q0 {d} 1 {s!r} b\n" for q, docs in run_b.items() for d, s in docs.items()))
    for flags in ([], ["-J"]):
        doc = _json([qpath, apath, bpath, "-m", "infap,bpref,judged@10", "--bootstrap", "0", *flags], capsys)
        for r, path in enumerate((apath, bpath)):
            batch = read_trec(qpath, path, all_queries=True, judged_only=bool(flags))
            ref = evaluate_batch(batch, ["infAP", "bpref", "judged@10"]).values
            assert doc["runs"][r]["means"]["infap"] == pytest.approx(ref["infAP"].mean().item(), abs=1e-12)
            assert doc["runs"][r]["means"]["bpref"] == pytest.approx(ref["bpref"].mean().item(), abs=1e-12)
            assert doc["runs"][r]["means"]["judged@10"] == pytest.approx(ref["judged@10"].mean().item(), abs=1e-12)
        assert doc["settings"]["judged_only"] == bool(flags)


# ---------------------------------------------------------------------------------------------------- plots


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's signature and IHDR chunk; fails on anything that is not a PNG."""
    import struct

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_option_draws_a_readable_png_of_the_expected_size(noisy_run, tmp_path, capsys):
    image = pytest.importorskip("matplotlib.image")
    path = tmp_path / "compare.png"
    argv = [QRELS31, RUN31, noisy_run, RUN31, "-m", "map,P@10,mean_rank", "--bootstrap", "0", "--plot", path]
    assert compare(argv) == 0
    assert "map" in capsys.readouterr().out  # the table is printed as without --plot
    # 3 measures x 360 px wide; 2 compared runs + the distributions, 240 px each, at 100 dpi
    assert _png_size(path) == (3 * 360, 3 * 240)
    pixels = image.imread(path)
    assert pixels.shape[:2] == (3 * 240, 3 * 360) and pixels.std() > 0.05  # decoded, and not blank
    assert compare([QRELS31, RUN31, noisy_run, "-m", "map", "--plot", tmp_path / "c.svg"]) == 0
    assert (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")


def test_plot_functions_draw_the_sorted_differences_and_distributions(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    from torchrank.compare import plot_comparison, plot_differences, plot_distributions

    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(3, 2, 15, generator=gen, dtype=torch.float64)
    scores[2, 0] = scores[0, 0]  # run (c) equals the baseline on map: every bar 0, grey
    fig = plot_differences(scores, ["a", "b", "c"], ["map", "mean_rank"])
    axes = fig.axes  # rows: runs b and c; columns: map, mean_rank
    for ax, (r, k) in zip(axes, [(1, 0), (1, 1), (2, 0), (2, 1)], strict=True):
        heights = [p.get_height() for p in ax.patches]
        diff = scores[r, k] - scores[0, k]
        lower = k == 1  # mean_rank: smaller is better, sorted with the best (most negative) first
        assert heights == pytest.approx(diff.sort(descending=not lower).values.tolist())
        for patch, h in zip(ax.patches, heights, strict=True):
            better = h < 0 if lower else h > 0
            expected = "#2e7d32" if better else "#c62828" if h != 0 else "#9e9e9e"
            assert to_hex(patch.get_facecolor()) == expected
    assert "better 0, worse 0, same 15" in axes[2].get_title()
    dist = plot_distributions(scores, ["a", "b", "c"], ["map", "mean_rank"])
    assert [ax.get_title() for ax in dist.axes] == ["map per query", "mean_rank per query"]
    means = dist.axes[0].collections[0].get_offsets()[:, 1]
    assert means.tolist() == pytest.approx(scores[:, 0].mean(-1).tolist())
    path = tmp_path / "all.png"
    plot_comparison(scores, ["a", "b", "c"], ["map", "mean_rank"]).savefig(path, dpi=100)
    assert _png_size(path) == (2 * 360, 3 * 240)
    with pytest.raises(ValueError, match="one row per run"):
        plot_differences(scores, ["a", "b"], ["map", "mean_rank"])


# ---------------------------------------------------------------------------------------------------- NaN, ranges


@pytest.mark.parametrize("test", ["t", "randomization", "wilcoxon", "tukey"])
def test_a_nan_score_is_never_significant(test, noisy_run, capsys, monkeypatch):
    # The randomisation test gave p = 0 (and Wilcoxon p = 1) for a comparison with a NaN per-query score, and
    # p = 0 went through Holm as significant. Every test now gives NaN: n/a, null, left out of the family.
    import torchrank.compare as compare_module

    scores = compare_module._scores

    def with_nan(args, measures, device):
        values = scores(args, measures, device)
        values[1, 0, 3] = math.nan  # the noisy run's map on one query
        return values

    monkeypatch.setattr(compare_module, "_scores", with_nan)
    argv = [QRELS31, RUN31, noisy_run, "-m", "map,ndcg@10", "--permutations", "1000", "--bootstrap", "200"]
    rows = {r["measure"]: r for r in _json([*argv, "--test", test], capsys)["comparisons"]}
    assert rows["map"]["p_adjusted"] is None and rows["map"]["significant"] is False
    assert rows["map"]["p_randomization"] is None and rows["map"]["p_wilcoxon"] is None and rows["map"]["p_t"] is None
    assert rows["ndcg@10"]["significant"] is True and rows["ndcg@10"]["p_adjusted"] <= 0.05
    assert compare([*argv, "--test", test]) == 0
    base_row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("(a) "))
    cells = base_row.split()  # "(a)", name, map, ndcg@10: no mark on map, one on ndcg@10
    assert "^" not in cells[2] and cells[3].endswith("^b")


def test_largest_seed_runs_and_wraps_the_bootstrap_stream(capsys):
    from torchrank.compare import _bootstrap_seed

    argv = [SAMPLE_QRELS, SAMPLE_RUN, TREC / "results.trunc", "-m", "map", "--permutations", "50", "--bootstrap", "100"]
    largest = _json([*argv, "--seed", str(2**64 - 1)], capsys)
    assert largest["settings"]["seed"] == 2**64 - 1 and largest["comparisons"][0]["ci_low"] is not None
    assert _bootstrap_seed(7) == 8 and _bootstrap_seed(2**64 - 1) == 0  # seed + 1 would overflow torch's seed


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--seed", "99999999999999999999"], "argument --seed: expected an integer from 0 to 2**64 - 1"),
        (["--seed", str(2**64)], "argument --seed: expected an integer from 0 to 2**64 - 1"),
        (["--seed", "-1"], "argument --seed: expected an integer from 0 to 2**64 - 1"),
        (["--bootstrap", "1"], "argument --bootstrap: expected 0 (skip the interval) or at least 100"),
        (["--bootstrap", "99"], "argument --bootstrap: expected 0 (skip the interval) or at least 100"),
    ],
)
def test_seed_and_bootstrap_ranges_are_named_by_the_parser(option, message, capsys):
    # --seed 10**20 failed in torch with "Overflow when unpacking long long"; --bootstrap 1 gave an interval
    # [m, m] of one resample's mean.
    with pytest.raises(SystemExit) as exit_:
        compare([SAMPLE_QRELS, SAMPLE_RUN, SAMPLE_RUN, *option])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "Overflow" not in err
