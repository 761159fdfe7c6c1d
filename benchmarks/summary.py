"""The generated summary of every results file: ``SUMMARY.md``, ``summary.png`` and one table per file.

    python -m benchmarks.summary [--results benchmarks/results]

(``python -m benchmarks.run`` calls it after each run.) For each workload of each results JSON (CPU and GPU
files alike), torchrank's time is its ``primary`` record and the best incumbent is the fastest ``incumbent``
record; the ratio is ``best incumbent / torchrank``: above 1 torchrank is that many times faster, below 1 it is
slower (a loss, published beside the wins). Conversions (tensors -> another library's input) are left out of
the best incumbent: the comparison is evaluation against evaluation, the view least favourable to torchrank.
Records without roles (other modules' workloads): torchrank's fastest record against the fastest other library.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._records import REPO_ROOT, RESULTS_DIR, normalize

SUMMARY_MD = "SUMMARY.md"
SUMMARY_PNG = "summary.png"


@dataclass
class Comparison:
    """torchrank against the best incumbent on one workload of one results file."""

    kind: str
    workload: str
    group: str
    device: str
    params: dict[str, Any]
    torchrank: dict[str, Any]
    best: dict[str, Any] | None

    @property
    def ratio(self) -> float | None:
        return None if self.best is None else self.best["median_s"] / self.torchrank["median_s"]


# ----------------------------------------------------------------------------------------------- reading
def load_results(folder: Path, include_smoke: bool = False) -> list[tuple[Path, dict[str, Any]]]:
    """Every results JSON of ``folder`` (files without ``records`` are other formats and left out)."""
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            payload = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("records"), list):
            continue
        if payload.get("smoke") and not include_smoke:
            continue
        _fill_in(path, payload)
        found.append((path, payload))
    return found


def _fill_in(path: Path, payload: dict[str, Any]) -> None:
    """Files written by a module's own ``main`` rather than by ``benchmarks.run`` (e.g. ``bench_cli``): the config
    name and device from the file name (``cli_cpu.json``), the records brought to the harness's format."""
    stem, _, device = path.stem.partition("_")
    payload.setdefault("config", stem)
    payload.setdefault("metadata", {})
    payload.setdefault("device", payload["metadata"].get("device") or ("cuda" if device.startswith(("cuda", "gpu"))
                                                                        else "cpu"))
    normalize(payload["records"], stem, config_roles(stem))


def config_roles(name: str) -> dict[str, str]:
    """The ``roles`` mappings of ``configs/bench/<name>.yaml`` (for records written without roles); {} without
    that config or PyYAML."""
    path = REPO_ROOT / "configs" / "bench" / f"{name}.yaml"
    try:
        import yaml

        config = yaml.safe_load(path.read_text()) or {}
    except (ImportError, OSError):
        return {}
    roles: dict[str, str] = {}
    for section in config.get("workloads") or []:
        if isinstance(section, dict):
            roles.update(section.get("roles") or {})
    return roles


def _timed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if "skipped" not in r and r.get("median_s")]


def pick_torchrank(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    ours = [r for r in records if r["library"] == "torchrank"]
    primary = [r for r in ours if r.get("role") == "primary"]
    if primary:
        return primary[0]
    unroled = [r for r in ours if r.get("role") is None]
    return min(unroled, key=lambda r: r["median_s"]) if unroled else None


def pick_best_incumbent(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    theirs = [r for r in records if r["library"] != "torchrank" and r.get("role") in ("incumbent", None)]
    return min(theirs, key=lambda r: r["median_s"]) if theirs else None


def comparisons(payload: dict[str, Any]) -> list[Comparison]:
    """One comparison per workload with a torchrank record, in the order the workloads were run."""
    by_workload: dict[str, list[dict[str, Any]]] = {}
    for r in _timed(payload["records"]):
        by_workload.setdefault(r["workload"], []).append(r)
    out = []
    for workload, records in by_workload.items():
        ours = pick_torchrank(records)
        if ours is None:
            continue
        out.append(Comparison(ours.get("kind", "?"), workload, ours.get("group") or workload,
                              payload.get("device") or payload["metadata"].get("device", "?"), ours.get("params", {}),
                              ours, pick_best_incumbent(records)))
    return out


# ----------------------------------------------------------------------------------------------- formatting
def fmt_s(x: float | None) -> str:
    """Seconds with units that keep 3 significant digits readable."""
    if x is None:
        return "n/a"
    if x < 1e-3:
        return f"{x * 1e6:.3g} µs"
    return f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.3g} s"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "n/a"
    text = _fmt_relative(ratio)
    return text if ratio >= 1 else f"**{text} (slower)**"


def _fmt_relative(ratio: float) -> str:
    return f"{ratio:.3g}x" if ratio < 100 else f"{ratio:,.0f}x"


def fmt_extra(extra: dict[str, Any] | None) -> str:
    """A record's ``extra`` (state sizes, collectives, ...) as ``key: value`` pairs, nested dicts flattened."""
    if not extra:
        return ""
    parts = []
    for key, value in extra.items():
        if isinstance(value, dict):
            parts += [f"{key}.{k}: {v:,}" if isinstance(v, int) else f"{key}.{k}: {v}" for k, v in value.items()]
        elif value is not None:
            parts.append(f"{key}: {value}")
    return "; ".join(parts)


def _scaled_note(r: dict[str, Any]) -> str:
    s = r.get("scaled")
    return f" (timed on {s['measured_queries']} queries, scaled x{s['factor']:.3g})" if s else ""


def _machine(payload: dict[str, Any]) -> str:
    meta = payload["metadata"]  # files written by a module's own main name some fields differently
    name = meta.get("device_name") or meta.get("cpu_model") or "machine not recorded"
    threads = meta.get("threads") or meta.get("torch_threads") or "?"
    return f"{payload.get('device', meta.get('device'))}: {name}, {threads} thread(s), torch " + str(
        meta.get("versions", {}).get("torch"))


def _provenance(payload: dict[str, Any]) -> str:
    meta = payload["metadata"]
    commit = (meta.get("git_commit") or meta.get("commit") or "?")[:12]
    dirty = " (torchrank with uncommitted changes)" if meta.get("torchrank_dirty") else ""
    return f"commit `{commit}`{dirty}, {meta.get('date')}"


def summary_markdown(files: list[tuple[Path, dict[str, Any]]]) -> str:
    lines = [
        "# Benchmark summary",
        "",
        "Generated by `python -m benchmarks.summary` from the results files below; do not edit by hand. "
        "**ratio** = best incumbent's median time / torchrank's: above 1 torchrank is that many times faster, "
        "**below 1 it is slower** (shown in bold). torchrank's time is its headline call (dense input, default "
        "ties); the best incumbent is the fastest other library's evaluation of the same measures on the same data "
        "(conversion to its input format not counted). Every incumbent's values were checked against torchrank's "
        "before it was timed. Spreads, every contender and every variant: the per-file tables.",
        "",
        f"![ratio to the best incumbent per workload]({SUMMARY_PNG})",
        "",
    ]
    for path, payload in files:
        comps = comparisons(payload)
        wins = sum(1 for c in comps if c.ratio is not None and c.ratio >= 1)
        losses = [c for c in comps if c.ratio is not None and c.ratio < 1]
        lines += [
            f"## {payload['config']} on {payload.get('device')} ([{path.stem}.md]({path.stem}.md))",
            "",
            f"{_machine(payload)}; {_provenance(payload)}. {len(comps)} workloads: torchrank faster on {wins}, "
            f"slower on {len(losses)}.",
            "",
            "| workload | torchrank | time | best incumbent | time | ratio |",
            "|---|---|---|---|---|---|",
        ]
        for c in comps:
            best = c.best
            lines.append(
                f"| {c.workload} | {c.torchrank['name']} | {fmt_s(c.torchrank['median_s'])} | "
                + (f"{best['library']} {best['name']} | {fmt_s(best['median_s'])}{_scaled_note(best)} | "
                   if best else "none ran | n/a | ")
                + f"{fmt_ratio(c.ratio)} |"
            )
        lines.append("")
    if not files:
        lines += ["No results files yet: run `python -m benchmarks.run --config configs/bench/<grid>.yaml`.", ""]
    return "\n".join(lines)


def detail_markdown(path: Path, payload: dict[str, Any]) -> str:
    """Every record of one results file, by workload: the full story behind the summary's rows."""
    meta = payload["metadata"]
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items() if v)
    lines = [
        f"# {payload['config']} on {payload.get('device')}" + (" (smoke run: not meaningful figures)"
                                                               if payload.get("smoke") else ""),
        "",
        f"Generated from `{path.name}` by `python -m benchmarks.summary`.",
        "",
        f"- {_machine(payload)}; CPU {meta.get('cpu_model')} ({meta.get('cpu_count')} logical cores)",
        f"- {_provenance(payload)}; torchrank {meta.get('torchrank')}, python {meta.get('python')}",
        f"- {versions}",
        f"- load average at start / end: {payload.get('load_average', {}).get('start')} / "
        f"{payload.get('load_average', {}).get('end')}; wall time {payload.get('total_wall_s', 0):.0f} s",
        "",
        "Median and IQR per call; `scaled`: a per-query loop timed on the first queries and scaled linearly; "
        "`guard`: the largest distance of the contender's values outside torchrank's tie bounds (0 = agrees).",
        "",
    ]
    lines += [f"> {note}" for note in payload.get("notes", [])]
    by_workload: dict[str, list[dict[str, Any]]] = {}
    for r in payload["records"]:
        by_workload.setdefault(r["workload"], []).append(r)
    for workload, records in by_workload.items():
        lines += [f"## {workload}", "",
                  "| contender | library | role | median | IQR | repeats | method | guard | extra |",
                  "|---|---|---|---|---|---|---|---|---|"]
        ours = pick_torchrank(_timed(records))
        for r in records:
            if "skipped" in r:
                lines.append(f"| {r['name']} | {r['library']} | skipped | {r['skipped']} | | | | | |")
                continue
            guard = r.get("guard")
            guard_text = "n/a" if not guard else f"{guard.get('max_outside', 0):.1e}"
            ratio = "" if ours is None or r is ours else f" ({_fmt_relative(r['median_s'] / ours['median_s'])})"
            lines.append(
                f"| {r['name']} | {r['library']} | {r.get('role') or ''} | {fmt_s(r['median_s'])}{ratio} | "
                f"{fmt_s(r.get('iqr_s'))} | {r.get('repeats', '')} | {r.get('method', '')}{_scaled_note(r)} | "
                f"{guard_text} | {fmt_extra(r.get('extra'))} |"
            )
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- plot
def plot(files: list[tuple[Path, dict[str, Any]]], out: Path) -> bool:
    """Ratio to the best incumbent per workload, log scale: one row per workload group (its k / dtype / labels
    variants are the points of the row), colour by score dtype, marker by device. False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    points = [c for _, payload in files for c in comparisons(payload) if c.ratio is not None]
    rows: list[str] = []
    for c in points:
        row = f"{c.kind}: {c.group}"
        if row not in rows:
            rows.append(row)
    fig, ax = plt.subplots(figsize=(10.5, 1.2 + 0.32 * max(len(rows), 1)))
    colours = {"float32": "tab:blue", "bfloat16": "tab:orange", "float16": "tab:green"}
    markers = {"cpu": "o", "cuda": "^"}
    seen = set()
    for c in points:
        dtype = c.params.get("dtype")
        label = f"{c.device}" + (f", {dtype}" if dtype else "")
        y = len(rows) - 1 - rows.index(f"{c.kind}: {c.group}")
        ax.scatter(c.ratio, y, color=colours.get(dtype, "tab:gray"), marker=markers.get(c.device, "s"),
                   alpha=0.75, s=28, label=None if label in seen else label, zorder=3)
        seen.add(label)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.axvspan(ax.get_xlim()[0] if points else 0.1, 1.0, color="tab:red", alpha=0.06, zorder=0)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)), list(reversed(rows)), fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("best incumbent time / torchrank time (log; > 1: torchrank faster; shaded: slower)")
    ax.set_title("torchrank against the best incumbent, per workload")
    ax.grid(axis="x", which="both", alpha=0.3)
    if seen:  # outside the axes: inside, it would hide the points of the last rows
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------------- main
def write_all(folder: Path = RESULTS_DIR, include_smoke: bool = False, details: list[Path] | None = None) -> list[Path]:
    """Regenerate ``SUMMARY.md`` and ``summary.png`` from every results file in ``folder``, and the per-file table
    ``<results>.md`` of each file in ``details`` (None: of every file); the paths written."""
    files = load_results(folder, include_smoke)
    written = []
    for path, payload in files:
        if details is not None and path.resolve() not in {d.resolve() for d in details}:
            continue  # a run rewrites its own table only, never another grid's
        detail = path.with_suffix(".md")
        detail.write_text(detail_markdown(path, payload))
        written.append(detail)
    md = folder / SUMMARY_MD
    md.write_text(summary_markdown(files))
    written.append(md)
    if plot(files, folder / SUMMARY_PNG):
        written.append(folder / SUMMARY_PNG)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.summary", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of results JSON files")
    parser.add_argument("--include-smoke", action="store_true", help="also summarise smoke runs")
    args = parser.parse_args(argv)
    for path in write_all(args.results, args.include_smoke):
        try:
            shown = path.resolve().relative_to(REPO_ROOT)
        except ValueError:
            shown = path
        print(f"wrote {shown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
