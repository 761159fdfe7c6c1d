"""``torchrank compare``'s output: the summary and detail tables as text, Markdown and LaTeX, and the records as
CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import TYPE_CHECKING

from torch import Tensor

from torchrank._compare_args import TESTS as _TESTS
from torchrank.functional import MEASURES, parse_measure

if TYPE_CHECKING:
    from torchrank.compare import _Result

_CSV_FIELDS = (
    "measure",
    "run",
    "baseline",
    "queries",
    "mean_run",
    "mean_baseline",
    "diff",
    "ci_low",
    "ci_high",
    "p_t",
    "p_randomization",
    "p_adjusted",
    "significant",
    "cohens_d",
    "p_wilcoxon",
    "p_tukey",
)
#: ``--test`` choices and what the output calls them
_CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni", "bh": "Benjamini-Hochberg"}


def _letter(i: int) -> str:
    """a, b, ..., z, aa, ab, ... for run ``i``."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(97 + r) + out
    return out


def _better_than(res: _Result) -> list[list[list[int]]]:
    """``[run][measure]`` -> runs it is significantly better than (the direction of the measure)."""
    wins: list[list[list[int]]] = [[[] for _ in res.measures] for _ in res.names]
    for p, (i, j) in enumerate(res.pairs):
        for k, measure in enumerate(res.measures):
            if not res.significant[p, k]:
                continue
            d = float(res.diff[p, k])
            run_better = d < 0 if _lower_is_better(measure) else d > 0
            winner, loser = (j, i) if run_better else (i, j)
            if d != 0:
                wins[winner][k].append(loser)
    return [[sorted(w) for w in row] for row in wins]


def _lower_is_better(measure: str) -> bool:
    """Whether a smaller value of ``measure`` is better (its declaration says; no direction reads as higher)."""
    return MEASURES[parse_measure(measure).family].higher_is_better is False


def _best(res: _Result, k: int) -> set[int]:
    shown = [round(float(v), 4) for v in res.means[:, k]]
    lower = _lower_is_better(res.measures[k])
    top = min(shown) if lower else max(shown)
    return {r for r, v in enumerate(shown) if v == top}


def _fmt_d(d: float) -> str:
    return "n/a" if math.isnan(d) else f"{d:+.2f}"


def _fmt_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _describe(res: _Result) -> str:
    s = res.settings
    where = "every qrels query, missing ones scored 0" if s["queries"] == "qrels" else "queries every run has"
    test = _TESTS[s["test"]] + (f" ({s['permutations']} sign flips)" if s["test"] == "randomization" else "")
    name = _CORRECTION_NAMES.get(s["correction"])
    corr = f"{name}-adjusted over {res.p_adj.numel()} comparisons" if name else "not adjusted"
    return f"{res.n_queries} queries ({where}); {test}, {corr}; alpha {s['alpha']:g}"


def _legend(res: _Result, sup: str) -> str:
    s = res.settings
    test = _TESTS[s["test"]]
    adj = f"{_CORRECTION_NAMES[s['correction']]}-adjusted " if s["correction"] in _CORRECTION_NAMES else ""
    return f"{sup}: significantly better than run (x) ({adj}{test} p <= {s['alpha']:g}, {res.n_queries} queries)"


def _summary_rows(res: _Result, mark: str, bold: str) -> list[list[str]]:
    """Runs x measures cells with superscript letters (``mark`` and ``bold`` are format strings)."""
    wins = _better_than(res)
    best = [_best(res, k) for k in range(len(res.measures))]
    rows = []
    for r, name in enumerate(res.names):
        cells = [f"({_letter(r)}) {name}"]
        for k in range(len(res.measures)):
            cell = f"{float(res.means[r, k]):.4f}"
            if bold and r in best[k] and len(best[k]) < len(res.names):  # no bold when all runs tie
                cell = bold.format(cell)
            if wins[r][k]:
                cell += mark.format("".join(_letter(i) for i in wins[r][k]))
            cells.append(cell)
        rows.append(cells)
    return rows


def _detail_rows(res: _Result) -> list[list[str]]:
    level = round(100 * (1 - res.settings["alpha"]), 2)
    correction = _CORRECTION_NAMES.get(res.settings["correction"])
    header = ["measure", "run", "vs", "diff", "d"]
    header += [f"{level:g}% CI"] if res.ci_low is not None else []
    header += ["p (t)"] + (["p (rand.)"] if res.p_rand is not None else []) + ["p (Wilcoxon)"]
    header += ["p (Tukey)"] if res.p_tukey is not None else []
    header += ([f"p ({correction})"] if correction else []) + ["sig."]
    rows = [header]
    for k, measure in enumerate(res.measures):
        for p, (i, j) in enumerate(res.pairs):
            row = [
                measure,
                f"({_letter(j)}) {res.names[j]}",
                f"({_letter(i)}) {res.names[i]}",
                f"{float(res.diff[p, k]):+.4f}",
                _fmt_d(float(res.effect[p, k])),
            ]
            if res.ci_low is not None:
                row.append(f"[{float(res.ci_low[p, k]):+.4f}, {float(res.ci_high[p, k]):+.4f}]")
            row.append(_fmt_p(float(res.p_t[p, k])))
            if res.p_rand is not None:
                row.append(_fmt_p(float(res.p_rand[p, k])))
            row.append(_fmt_p(float(res.p_wilcoxon[p, k])))
            if res.p_tukey is not None:
                row.append(_fmt_p(float(res.p_tukey[p, k])))
            if correction:
                row.append(_fmt_p(float(res.p_adj[p, k])))
            row.append("*" if res.significant[p, k] else "")
            rows.append(row)
    return rows


def _text_table(rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    fmt = [(str.rjust if c in right else str.ljust) for c in range(len(widths))]
    lines = ["  ".join(f(cell, w) for f, cell, w in zip(fmt, row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _md_table(rows: list[list[str]], right: set[int]) -> str:
    esc = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    rule = ["---:" if c in right else "---" for c in range(len(rows[0]))]
    return "\n".join("| " + " | ".join(row) + " |" for row in [esc[0], rule, *esc[1:]])


_LATEX_SPECIAL = {c: "\\" + c for c in "&%$#_{}"} | {
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


def _render_table(res: _Result, markdown: bool) -> str:
    header = ["run", *res.measures]
    right = set(range(1, len(header)))
    detail = _detail_rows(res)
    detail_right = set(range(3, len(detail[0]) - 1))
    if markdown:
        summary = [header, *_summary_rows(res, "<sup>{}</sup>", "**{}**")]
        return (
            f"{_describe(res)}\n\n{_md_table(summary, right)}\n\n{_legend(res, '<sup>x</sup>')}; "
            f"bold: best run per measure.\n\n{_md_table(detail, detail_right)}"
        )
    summary = [header, *_summary_rows(res, "^{}", "")]
    legend = _legend(res, "^x")
    return f"{_describe(res)}\n\n{_text_table(summary, right)}\n{legend}\n\n{_text_table(detail, detail_right)}"


def _render_latex(res: _Result) -> str:
    rows = [[_latex_escape(c) for c in ["Run", *res.measures]]]
    for row in _summary_rows(res, "$^{{{}}}$", r"\textbf{{{}}}"):
        rows.append([_latex_escape(row[0]), *row[1:]])
    lines = [
        f"% torchrank compare: {_describe(res)}",
        f"% {_legend(res, 'superscript x')}; bold: best run per measure. Needs \\usepackage{{booktabs}}.",
        r"\begin{tabular}{l" + "r" * len(res.measures) + "}",
        r"\toprule",
        " & ".join(rows[0]) + r" \\",
        r"\midrule",
        *[" & ".join(row) + r" \\" for row in rows[1:]],
        r"\bottomrule",
        r"\end{tabular}",
    ]
    return "\n".join(lines)


def _records(res: _Result) -> list[dict]:
    def num(t: Tensor | None, p: int, k: int) -> float | None:
        v = None if t is None else float(t[p, k])
        return None if v is None or not math.isfinite(v) else v  # JSON has no NaN or Infinity

    out = []
    for k, measure in enumerate(res.measures):
        for p, (i, j) in enumerate(res.pairs):
            out.append(
                {
                    "measure": measure,
                    "run": res.names[j],
                    "baseline": res.names[i],
                    "queries": res.n_queries,
                    "mean_run": float(res.means[j, k]),
                    "mean_baseline": float(res.means[i, k]),
                    "diff": float(res.diff[p, k]),
                    "ci_low": num(res.ci_low, p, k),
                    "ci_high": num(res.ci_high, p, k),
                    "p_t": num(res.p_t, p, k),
                    "p_randomization": num(res.p_rand, p, k),
                    "p_adjusted": num(res.p_adj, p, k),
                    "significant": bool(res.significant[p, k]),
                    "cohens_d": num(res.effect, p, k),
                    "p_wilcoxon": num(res.p_wilcoxon, p, k),
                    "p_tukey": num(res.p_tukey, p, k),
                }
            )
    return out


def _render(res: _Result, fmt: str) -> str:
    if fmt in ("table", "markdown"):
        return _render_table(res, markdown=fmt == "markdown")
    if fmt == "latex":
        return _render_latex(res)
    records = _records(res)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=_CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in records)
        return buf.getvalue().rstrip("\n")
    runs = [
        {
            "label": _letter(r),
            "name": name,
            "path": res.paths[r],
            "means": {m: float(res.means[r, k]) for k, m in enumerate(res.measures)},
        }
        for r, name in enumerate(res.names)
    ]
    doc = {
        "queries": res.n_queries,
        "measures": res.measures,
        "settings": res.settings,
        "runs": runs,
        "comparisons": records,
    }
    return json.dumps(doc, indent=2)
