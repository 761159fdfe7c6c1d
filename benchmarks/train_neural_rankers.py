"""Train the MLP ranker of ``torchrank.training`` with each ``configs/train/*.yaml`` (40 epochs) and record the
test NDCG@{1,3,5,10} of the last epoch in ``benchmarks/results/training_cpu.json`` (the README's figures).

Each config runs exactly as on the command line:

    python -m torchrank.training fit  --config configs/train/<loss>.yaml
    python -m torchrank.training test --config configs/train/<loss>.yaml --ckpt_path <its last.ckpt>

Usage (from the repository root; about a minute per loss on one CPU thread):

    python -m benchmarks.train_neural_rankers [neural_ndcg approx_ndcg ...] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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


def run(name: str, root: Path) -> dict:
    """fit, then test the last checkpoint, of ``configs/train/<name>.yaml``; the logged figures."""
    config = str(CONFIGS / f"{name}.yaml")
    common = ["--config", config, f"--trainer.default_root_dir={root / name}", "--trainer.enable_progress_bar=false"]
    start = time.perf_counter()
    fitted = cli(["fit", *common])
    seconds = time.perf_counter() - start
    checkpoint = fitted.trainer.checkpoint_callback.last_model_path
    val = {key: float(value) for key, value in fitted.trainer.callback_metrics.items() if key.startswith("val_")}
    tested = cli(["test", *common, f"--ckpt_path={checkpoint}"])
    test = {key: float(value) for key, value in tested.trainer.callback_metrics.items() if key.startswith("test_")}
    return {
        "config": f"configs/train/{name}.yaml",
        "loss": fitted.config.fit.model.loss.class_path,
        "epochs": fitted.trainer.current_epoch,
        "fit_seconds": round(seconds, 1),
        **{key: round(value, 4) for key, value in sorted(test.items())},
        **{key: round(value, 4) for key, value in sorted(val.items())},
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
    parser.add_argument("--runs", default="runs", help="folder for the logs and checkpoints")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "training_cpu.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_at_start = os.getloadavg()[0]
    names = args.names or sorted(p.stem for p in CONFIGS.glob("*.yaml"))
    results = [run(name, Path(args.runs)) for name in names]
    record = {"metadata": {**metadata(args.threads), "load_average_1min_at_start": load_at_start}, "results": results}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print("| config | " + " | ".join(f"test NDCG@{k}" for k in EVAL_K) + " | fit time |")
    print("|---" * (len(EVAL_K) + 2) + "|")
    for r in results:
        cells = " | ".join(f"{r[f'test_ndcg@{k}']:.4f}" for k in EVAL_K)
        print(f"| {r['config']} | {cells} | {r['fit_seconds']:.0f} s |")
    return record


if __name__ == "__main__":
    main()
