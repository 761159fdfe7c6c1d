"""Train the MLP ranker of ``torchrank.training`` with each ``configs/train/*.yaml`` (40 epochs) and record the
test NDCG@{1,3,5,10} of the last epoch in ``benchmarks/results/training_cpu.json``: the figures of the README and
docs/training.md, regenerated.

Each config runs exactly as on the command line, once per seed:

    python -m torchrank.training fit  --config configs/train/<loss>.yaml --seed_everything <seed> --threads 1
    python -m torchrank.training test --config configs/train/<loss>.yaml ... --ckpt_path <its last.ckpt>

Usage (from the repository root; 10-40 s per fit on one CPU thread):

    python -m benchmarks.train_neural_rankers [neural_ndcg approx_ndcg ...] [--seeds 0 1 2] [--threads 1]
    python -m benchmarks.train_neural_rankers --data_dir ~/data/MSLR-WEB10K --fold 1 --out mslr.json  # your folder
    python -m benchmarks.train_neural_rankers --normalization quantile  # another feature scaling than the configs'

On the same machine, torch build and thread count a seed's figures repeat exactly; another CPU (another BLAS
code path) or thread count changes the rounding, which 40 epochs of training carry into the figures (see
docs/training.md, "Reproducibility").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import lightning
import torch
import torchmetrics

from torchrank.training import EVAL_K
from torchrank.training.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs" / "train"


def run(name: str, root: Path, seed: int, threads: int, data: list[str]) -> dict:
    """fit, then test the last checkpoint, of ``configs/train/<name>.yaml``; the logged figures (test, validation
    and the last epoch's training loss)."""
    config = str(CONFIGS / f"{name}.yaml")
    common = ["--config", config, f"--trainer.default_root_dir={root / name / f'seed{seed}'}", *data]
    common += [f"--seed_everything={seed}", f"--threads={threads}", "--trainer.enable_progress_bar=false"]
    start = time.perf_counter()
    fitted = cli(["fit", *common])
    seconds = time.perf_counter() - start
    checkpoint = fitted.trainer.checkpoint_callback.last_model_path
    logged = fitted.trainer.callback_metrics
    fit = {key: float(value) for key, value in logged.items() if key.startswith("val_") or key == "train_loss"}
    tested = cli(["test", *common, f"--ckpt_path={checkpoint}"])
    test = {key: float(value) for key, value in tested.trainer.callback_metrics.items() if key.startswith("test_")}
    return {
        "config": f"configs/train/{name}.yaml",
        "seed": seed,
        "loss": fitted.config.fit.model.loss.class_path,
        "epochs": fitted.trainer.current_epoch,
        "fit_seconds": round(seconds, 1),
        **{key: round(value, 4) for key, value in sorted(test.items())},
        **{key: round(value, 4) for key, value in sorted(fit.items())},
    }


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def metadata(threads: int) -> dict:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "torchrank", "configs/train"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    return {
        "commit": commit, "uncommitted_changes": bool(dirty.strip()), "date": datetime.now(timezone.utc).isoformat(),
        "torch": torch.__version__, "lightning": lightning.__version__, "torchmetrics": torchmetrics.__version__,
        "python": platform.python_version(), "threads": threads, "device": "cpu", "cpu": cpu_model(),
        "cpu_count": os.cpu_count(), "load_average_1min": os.getloadavg()[0],
        "metric": "NDCG@k, gain 2^y-1, log2 discount, 1 where the ideal DCG is 0, ties averaged (ndcg_metric)",
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="config names (default: every configs/train/*.yaml)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: a tiny MLP)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (--seed_everything), default 0")
    parser.add_argument("--data_dir", help="a folder in a standard layout (MSLR-WEB, Yahoo, Istella, LETOR 4.0)")
    parser.add_argument("--fold", type=int, default=1, help="the fold (or Yahoo set) of --data_dir")
    parser.add_argument("--epochs", type=int, help="override the configs' max_epochs (40), e.g. for a quick check")
    parser.add_argument("--normalization", help="override the configs' feature scaling (--data.normalization)")
    parser.add_argument("--runs", default="runs", help="folder for the logs and checkpoints")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "training_cpu.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_at_start = os.getloadavg()[0]
    names = args.names or sorted(p.stem for p in CONFIGS.glob("*.yaml"))
    data = [f"--data.data_dir={args.data_dir}", f"--data.fold={args.fold}"] if args.data_dir else []
    data += [f"--trainer.max_epochs={args.epochs}"] if args.epochs else []
    data += [f"--data.normalization={args.normalization}"] if args.normalization else []
    results = [run(name, Path(args.runs), seed, args.threads, data) for name in names for seed in args.seeds]
    meta = {**metadata(args.threads), "load_average_1min_at_start": load_at_start, "seeds": args.seeds}
    meta["data"] = {"data_dir": args.data_dir, "fold": args.fold} if args.data_dir else "the bundled LightGBM data"
    meta["epochs"] = args.epochs or "the configs' (40)"
    meta["normalization"] = args.normalization or "the configs'"
    record = {"metadata": meta, "results": results}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(markdown(results, args.seeds))
    return record


def markdown(results: list[dict], seeds: list[int]) -> str:
    """Per config: the first seed's test NDCG@k, and NDCG@5's mean and standard deviation over the seeds."""
    header = "| config | " + " | ".join(f"test NDCG@{k}" for k in EVAL_K) + " | NDCG@5 over seeds | fit time |"
    lines = [header, "|---" * (len(EVAL_K) + 3) + "|"]
    for config in dict.fromkeys(r["config"] for r in results):
        runs = [r for r in results if r["config"] == config]
        first = runs[0]
        cells = " | ".join(f"{first[f'test_ndcg@{k}']:.4f}" for k in EVAL_K)
        at5 = [r["test_ndcg@5"] for r in runs]
        spread = f"{statistics.mean(at5):.4f} +- {statistics.stdev(at5):.4f}" if len(at5) > 1 else ""
        lines.append(f"| {config} | {cells} | {spread} | {first['fit_seconds']:.0f} s |")
    return "\n".join(lines) + f"\n\n(first columns: seed {seeds[0]}; spread: mean +- sd over seeds {seeds})"


if __name__ == "__main__":
    main()
