"""The benchmark entry point: run a grid of ``configs/bench/`` and record it under ``benchmarks/results/``.

    python -m benchmarks.run --config configs/bench/kernels.yaml            # one grid, on the config's device
    python -m benchmarks.run --config configs/bench/all.yaml --device cuda  # every grid on a GPU
    python -m benchmarks.run --config configs/bench/smoke.yaml              # every workload kind, tiny (CI)
    python -m benchmarks.run --config configs/bench/kernels.yaml --smoke    # that grid's own tiny variant

A config lists ``workloads``; each has a ``kind`` naming the module that measures it (``kernels``:
``benchmarks.bench_functional``, ``metrics``: ``benchmarks.bench_metrics``, ``losses``: ``benchmarks.bench_losses``,
``cli``: ``benchmarks.bench_cli``). A module exposes ``measure(config: dict) -> list[dict]`` and gets its
section merged over the run's ``device``, ``threads``, ``seed`` and ``smoke``; it returns records
(``benchmarks/_records.py``). The run writes ``<out>/<config name>_<device>.json`` (metadata, resolved config,
records) and regenerates ``SUMMARY.md``, ``summary.png`` and per-file tables from every results file in ``<out>``.

``--smoke`` merges each section's ``smoke:`` overrides (tiny sizes, short timing) and writes
``<config>_<device>_smoke.json`` to a temporary folder unless ``--out`` is given; the summary ignores smoke files.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import summary
from benchmarks._records import (
    REPO_ROOT,
    RESULTS_DIR,
    load_average,
    metadata,
    normalize,
    results_path,
    validate_records,
    write_json,
)

CONFIG_DIR = REPO_ROOT / "configs" / "bench"
KINDS = {
    "kernels": "benchmarks.bench_functional",
    "metrics": "benchmarks.bench_metrics",
    "losses": "benchmarks.bench_losses",
    "training_epoch": "benchmarks.bench_training_epoch",
    "cli": "benchmarks.bench_cli",
    "ids": "benchmarks.bench_ids",
    "recommenders": "benchmarks.bench_recommenders",
    "search": "benchmarks.bench_search",
}
GLOBAL_KEYS = ("device", "threads", "seed")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- config
def load_config(path: Path) -> dict[str, Any]:
    """Read a YAML config (PyYAML: the ``bench`` extra) and check its shape."""
    try:
        import yaml
    except ImportError as e:
        raise SystemExit("benchmarks need PyYAML to read configs/bench/*.yaml: pip install 'torchrank[bench]'") from e
    if not path.exists():
        raise SystemExit(f"config {path} not found; the grids are in {_display(CONFIG_DIR)}/")
    with open(path) as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config.get("workloads"), list) or not config["workloads"]:
        raise SystemExit(f"{path}: expected a non-empty list under 'workloads'")
    config["workloads"] = _expand_includes(config["workloads"], path)
    for i, section in enumerate(config["workloads"]):
        if not isinstance(section, dict) or (section.get("kind") not in KINDS and "module" not in section):
            raise SystemExit(f"{path}: workloads[{i}] needs a 'kind' in {sorted(KINDS)} (or a 'module')")
    config.setdefault("name", path.stem)
    return config


def _expand_includes(workloads: list[Any], path: Path) -> list[Any]:
    """``- include: kernels.yaml`` stands for that config's workloads (path relative to ``path``'s folder), so that
    ``all.yaml`` cannot drift from the grids it combines."""
    out = []
    for section in workloads:
        if isinstance(section, dict) and "include" in section:
            included = load_config(path.parent / section["include"])
            out += included["workloads"]
        else:
            out.append(section)
    return out


def resolve_sections(config: dict[str, Any], device: str, threads: int, smoke: bool) -> list[dict[str, Any]]:
    """Each workload section as its module receives it: the run's globals, the section, and with ``smoke`` the
    section's ``smoke:`` overrides (``timing`` merged key by key)."""
    sections = []
    for raw in config["workloads"]:
        section = copy.deepcopy(raw)
        own = section.pop("smoke", None)
        overrides = dict(own) if isinstance(own, dict) else {}
        # the smoke flag the module sees: a section's `smoke: false` (or `smoke: {smoke: false, ...}`) gives it
        # explicit tiny settings instead of letting the module apply its own tiny variant
        module_smoke = smoke and own is not False
        if smoke:
            if isinstance(overrides.get("smoke"), bool):
                module_smoke = overrides.pop("smoke")
            timing = {**(section.get("timing") or {}), **(overrides.pop("timing", None) or {})}
            section.update(overrides)
            section["timing"] = timing
        seed = int(section.get("seed", config.get("seed", 0)))
        section.update(device=device, threads=threads, seed=seed, smoke=module_smoke)
        sections.append(section)
    return sections


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


# ----------------------------------------------------------------------------------------------- running
def run_section(section: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Import the section's module and call its ``measure``; a module that does not exist yet is skipped with a
    note (any other failure, a correctness guard included, aborts the run)."""
    kind = section.get("kind", "custom")
    module_name = section.pop("module", None) or KINDS[kind]
    started = time.perf_counter()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        note = {"kind": kind, "module": module_name, "skipped": f"{module_name} not found"}
        log(f"{kind}: skipped ({module_name} not found)")
        return [], note
    log(f"{kind}: {module_name}.measure")
    roles = section.pop("roles", None)  # for modules whose records carry no role (see _records.normalize)
    measure_config = {k: v for k, v in section.items() if k != "kind"}
    records = normalize(module.measure(measure_config), kind, roles)
    validate_records([r for r in records if "skipped" not in r], module_name)
    wall = time.perf_counter() - started
    log(f"{kind}: {len(records)} records in {wall:.0f} s")
    return records, {"kind": kind, "module": module_name, "wall_s": wall, "records": len(records)}


def pick_device(requested: str | None, config: dict[str, Any]) -> torch.device:
    device = torch.device(requested or config.get("device") or "cpu")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available here")
    return device


def run_one_config(config_name: str, argv: list[str]) -> int:
    """A workload module's own entry point: ``configs/bench/<config_name>.yaml`` through :func:`main` without
    regenerating the other results' summaries, then that results file's own table (``<config>_<device>.md``)."""
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    device = torch.device(argv[argv.index("--device") + 1] if "--device" in argv else "cpu")
    smoke = "--smoke" in argv
    code = main(["--config", str(CONFIG_DIR / f"{config_name}.yaml"), "--no-summary", *argv])
    folder = out or (Path(tempfile.gettempdir()) / "torchrank-bench-smoke" if smoke else RESULTS_DIR)
    path = results_path(folder, config_name, device, smoke)
    if code == 0 and path.exists():
        path.with_suffix(".md").write_text(summary.detail_markdown(path, json.loads(path.read_text())) + "\n")
        log(f"wrote {path.with_suffix('.md')}")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=CONFIG_DIR / "smoke.yaml", help="a grid of configs/bench/")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="override the config's device")
    parser.add_argument("--smoke", action="store_true", help="the config's tiny variant (its 'smoke:' overrides)")
    parser.add_argument("--out", type=Path, help="results folder (default benchmarks/results; --smoke: a temp dir)")
    parser.add_argument("--threads", type=int, help="override the config's threads")
    parser.add_argument("--only", action="append", choices=sorted(KINDS), help="run only these kinds (repeatable)")
    parser.add_argument("--no-summary", action="store_true", help="do not regenerate SUMMARY.md / summary.png")
    args = parser.parse_args(argv)

    config = load_config(args.config)
    smoke = args.smoke or bool(config.get("smoke", False))
    device = pick_device(args.device, config)
    threads = int(args.threads or config.get("threads") or 1)
    torch.set_num_threads(threads)  # torch.utils.benchmark.Timer gets the same count (its default is 1)
    out_dir = args.out or (Path(tempfile.gettempdir()) / "torchrank-bench-smoke" if smoke else RESULTS_DIR)
    sections = resolve_sections(config, device.type, threads, smoke)
    if args.only:
        sections = [s for s in sections if s["kind"] in args.only]

    payload: dict[str, Any] = {
        "config": config["name"],
        "config_path": _display(args.config),
        "smoke": smoke,
        "device": device.type,
        "metadata": metadata(device, threads),
        "notes": list(config.get("notes") or []),
        "sections": sections,
        "load_average": {"start": load_average()},
    }
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    runs = []
    for section in sections:
        found, info = run_section(dict(section))
        records += found
        runs.append(info)
    payload.update(runs=runs, total_wall_s=time.perf_counter() - started, records=records)
    payload["load_average"]["end"] = load_average()
    path = results_path(out_dir, config["name"], device, smoke)
    write_json(path, payload)
    log(f"wrote {_display(path)} ({payload['total_wall_s']:.0f} s)")
    if not args.no_summary:
        for written in summary.write_all(out_dir, include_smoke=smoke, details=[path]):
            log(f"wrote {_display(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
