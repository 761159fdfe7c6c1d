"""What importing torchrank costs: time and peak memory of each import over what it builds on, in fresh processes.

Run from the repository root::

    python -m benchmarks.bench_import            # best of 5 fresh processes per row
    python -m benchmarks.bench_import --against ../old   # and another source tree, in the same rounds
    python -m benchmarks.bench_import --rounds 3 --smoke

Each row runs in its own fresh interpreter (``PYTHONPATH`` = the tree measured), ``rounds`` times, the rows (and
the trees) taking turns round by round so that a slow moment of a shared machine hits every row alike; a row's
figure is its best round (the least disturbed one). Rows:

- imports: the seconds the ``import`` statement takes in the child (``time.perf_counter`` around it) and the
  child's peak resident memory after it (``VmHWM``, the interpreter included; Linux); whether ``torch._dynamo`` and
  ``triton`` were imported. A torchrank import's cost over what it builds on (``torchrank.functional`` over
  ``import torch``, ``torchrank.metrics`` over ``import torch, torchmetrics``) is measured in one process: the base
  imported first, then the import timed alone, its peak RSS less the base's (on a loaded machine the difference of
  two separately timed totals is mostly noise).
- commands: the wall time of ``python -m torchrank compare --help`` and ``evaluate --help`` (process start to
  exit, as a user waits for them).
- the NeuralNDCG loss case of ``benchmarks.bench_losses`` (50 Sinkhorn iterations, B = 8, N = 1024, forward +
  backward, one timed call): the process's absolute peak RSS, the ``peak_rss_mb`` of that benchmark.

The promises of issue 30: each torchrank import adds at most 0.25 s and 40 MB over its base and imports neither
``torch._dynamo`` nor triton; ``compare --help`` under 0.5 s; the NeuralNDCG case's peak RSS under 400 MB. Writes
``benchmarks/results/import_cpu.json`` and ``.md`` (``--smoke``: ``import_cpu_smoke.*``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks._records import REPO_ROOT, load_average, metadata

RESULTS = Path(__file__).resolve().parent / "results"
# row name -> (statement, the row it builds on)
IMPORTS: dict[str, tuple[str, str | None]] = {
    "torch": ("import torch", None),
    "torchrank.functional": ("import torchrank.functional", "torch"),
    "torchrank.losses": ("import torchrank.losses", "torch"),
    "torch, torchmetrics": ("import torch, torchmetrics", None),
    "torchrank.metrics": ("import torchrank.metrics", "torch, torchmetrics"),
    "torchrank": ("import torchrank", None),
    "torchrank.cli": ("import torchrank.cli", None),
}
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "torchrank compare --help": ["-m", "torchrank", "compare", "--help"],
    "torchrank evaluate --help": ["-m", "torchrank", "evaluate", "--help"],
}
NEURAL_NDCG_CASE = {
    "library": "torchrank",
    "call": "neural_ndcg(sinkhorn_iterations=50)",
    "n": 1024,
    "batch_size": 8,
    "num_labels": 5,
    "seed": 0,
    "threads": 1,
    "device": "cpu",
    "timing": {"min_run_time": 0.0, "repeats": 1, "slow_repeats": 1},
}
TARGETS = {"import_s": 0.25, "import_mb": 40.0, "compare_help_s": 0.5, "neural_ndcg_peak_rss_mb": 400.0}
# the base's import, then the row's, each timed; VmHWM after each (not ru_maxrss: Linux carries it over from the
# parent through fork and exec)
_CHILD = """\
import json, re, sys, time
def peak():
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\\s+(\\d+) kB", f.read()).group(1)) / 1024
start = time.perf_counter()
exec({base!r})
base_seconds, base_peak = time.perf_counter() - start, peak()
start = time.perf_counter()
exec({statement!r})
seconds = time.perf_counter() - start
print(json.dumps({{"base_seconds": base_seconds, "seconds": seconds, "base_peak_rss_mb": base_peak,
                  "peak_rss_mb": peak(), "dynamo": "torch._dynamo" in sys.modules, "triton": "triton" in sys.modules}}))
"""


def _run(args: list[str], tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{args} in {tree} failed:\n{done.stderr[-2000:]}")
    return done


def import_once(statement: str, tree: Path = REPO_ROOT, base: str = "pass") -> dict[str, Any]:
    """``base`` imported, then ``statement``, in a fresh process: each one's seconds and the peak RSS after each."""
    child = _CHILD.format(base=base, statement=statement)
    return json.loads(_run(["-c", child], tree).stdout.strip().splitlines()[-1])


def command_once(args: list[str], tree: Path = REPO_ROOT) -> float:
    start = time.perf_counter()
    _run(args, tree)
    return time.perf_counter() - start


def neural_ndcg_once(tree: Path = REPO_ROOT) -> float:
    done = _run(["-m", "benchmarks.bench_losses", "--case", json.dumps(NEURAL_NDCG_CASE)], tree)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_mb"]


def measure(rounds: int, with_loss: bool, trees: dict[str, Path]) -> dict[str, Any]:
    """Every row for every source tree (``{label: path}``), the trees and rows taking turns in each round."""
    imports = {t: {name: [] for name in IMPORTS} for t in trees}
    commands: dict[str, dict[str, list[float]]] = {t: {name: [] for name in COMMANDS} for t in trees}
    loss: dict[str, list[float]] = {t: [] for t in trees}
    for _ in range(rounds):  # round robin: a slow moment of the machine hits every row and tree alike
        for name, (statement, base) in IMPORTS.items():
            for t, tree in trees.items():
                imports[t][name].append(import_once(statement, tree, IMPORTS[base][0] if base else "pass"))
        for name, args in COMMANDS.items():
            for t, tree in trees.items():
                commands[t][name].append(command_once(args, tree))
        if with_loss:
            for t, tree in trees.items():
                loss[t].append(neural_ndcg_once(tree))
    return {
        "rounds": rounds,
        "trees": {t: _best(imports[t], commands[t], loss[t]) | {"path": str(tree)} for t, tree in trees.items()},
        "targets": TARGETS,
    }


def _best(imports: dict[str, list[dict[str, Any]]], commands: dict[str, list[float]], loss: list[float]) -> dict:
    """Each row's best round; each import's cost over its base."""
    best = {
        name: {
            "seconds": min(r["base_seconds"] + r["seconds"] for r in runs),
            "peak_rss_mb": min(r["peak_rss_mb"] for r in runs),
            "imports_dynamo": any(r["dynamo"] for r in runs),
            "imports_triton": any(r["triton"] for r in runs),
            "runs_s": [round(r["base_seconds"] + r["seconds"], 4) for r in runs],
        }
        for name, runs in imports.items()
    }
    for name, (_, base) in IMPORTS.items():
        if base is not None:  # measured after the base in the same process: not a difference of two noisy totals
            runs = imports[name]
            best[name]["base"] = base
            best[name]["added_s"] = min(r["seconds"] for r in runs)
            best[name]["added_mb"] = min(r["peak_rss_mb"] - r["base_peak_rss_mb"] for r in runs)
            best[name]["added_runs_s"] = [round(r["seconds"], 4) for r in runs]
    return {
        "imports": best,
        "commands": {name: {"seconds": min(t), "runs_s": [round(x, 4) for x in t]} for name, t in commands.items()},
        "neural_ndcg": {"case": NEURAL_NDCG_CASE, "peak_rss_mb": min(loss), "runs_mb": loss} if loss else None,
    }


def _markdown(record: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        f"# Import cost: best of {record['rounds']} fresh processes",
        "",
        f"`python -m benchmarks.bench_import`, commit {(meta['git_commit'] or '?')[:10]}"
        f"{' (torchrank modified)' if meta['torchrank_dirty'] else ''}, torch {meta['versions']['torch']}, "
        f"{meta['cpu_count']} CPUs, load average at start and end {meta['load_average']}. Targets (issue 30): each "
        f"torchrank import <= +{TARGETS['import_s']} s and +{TARGETS['import_mb']:.0f} MB over its base, no "
        f"torch._dynamo or triton; `compare --help` < {TARGETS['compare_help_s']} s; the NeuralNDCG case's peak RSS "
        f"< {TARGETS['neural_ndcg_peak_rss_mb']:.0f} MB.",
    ]
    for label, tree in record["trees"].items():
        lines += [
            "",
            f"## {label} (`{tree['path']}`)",
            "",
            "| import | seconds | peak RSS (MB) | over | + seconds | + MB | torch._dynamo | triton |",
            "|---|---:|---:|---|---:|---:|---|---|",
        ]
        for name, r in tree["imports"].items():
            added = f"| {r['base']} | {r['added_s']:+.3f} | {r['added_mb']:+.0f} " if "base" in r else "| | | "
            lines.append(
                f"| `{IMPORTS[name][0]}` | {r['seconds']:.3f} | {r['peak_rss_mb']:.0f} {added}"
                f"| {'yes' if r['imports_dynamo'] else 'no'} | {'yes' if r['imports_triton'] else 'no'} |"
            )
        lines += ["", "| command (whole process) | seconds |", "|---|---:|"]
        lines += [f"| `{name}` | {r['seconds']:.3f} |" for name, r in tree["commands"].items()]
        if tree["neural_ndcg"]:
            case = tree["neural_ndcg"]["case"]
            lines += [
                "",
                f"NeuralNDCG loss case (`benchmarks.bench_losses`, {case['call']}, B={case['batch_size']}, "
                f"N={case['n']}): peak RSS {tree['neural_ndcg']['peak_rss_mb']:.0f} MB.",
            ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="no NeuralNDCG case; results with a _smoke suffix")
    parser.add_argument(
        "--against", type=Path, metavar="DIR",
        help="another source tree (e.g. `git worktree add DIR COMMIT`) measured in the same rounds",
    )  # fmt: skip
    parser.add_argument("--against-name", default="--against", help="what to call that tree in the results")
    args = parser.parse_args(argv)
    trees = {"this tree": REPO_ROOT} | ({args.against_name: args.against.resolve()} if args.against else {})
    load_start = load_average()
    record = measure(args.rounds, not args.smoke, trees)
    meta = metadata(torch.device("cpu"), torch.get_num_threads())
    meta["load_average"] = [load_start, load_average()]
    stem = "import_cpu_smoke" if args.smoke else "import_cpu"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "record": record}, indent=1) + "\n")
    (RESULTS / f"{stem}.md").write_text(_markdown(record, meta))
    print(_markdown(record, meta))


if __name__ == "__main__":
    main()
