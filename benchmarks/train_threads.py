"""Fit time of the training CLI against torch's CPU thread count: the measurement behind its default of one thread
(``torchrank.training.cli.default_threads``; benchmarks/notes/training_threads.md).

Each run is ``python -m torchrank.training fit --config <config> --threads T`` in a fresh subprocess (fresh thread
pools), with ``T`` alternating run by run so that a busy phase of a shared machine falls on every setting; it also
records the test NDCG@5 of each fit's last checkpoint, which shows whether the thread count changes the result.

    python -m benchmarks.train_threads [--config configs/train/neural_ndcg.yaml] [--epochs 40] [--threads 1 2]
        [--repeats 2] [--out benchmarks/results/training_threads_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fit_once(config: str, epochs: int, threads: int, root: Path) -> dict:
    """One fit and test in a subprocess: wall seconds of the fit, the test NDCG@5."""
    common = [
        "--config", config, f"--trainer.default_root_dir={root}", f"--trainer.max_epochs={epochs}",
        f"--threads={threads}", "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
    ]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "torchrank.training", "fit", *common], cwd=ROOT, env=env, check=True,
                   capture_output=True)  # fmt: skip
    seconds = time.perf_counter() - started
    code = (
        "from torchrank.training.cli import main; import sys; "
        "cli = main(['test', *sys.argv[1:], '--ckpt_path=last']); "
        "print(float(cli.trainer.callback_metrics['test_ndcg@5']))"
    )
    done = subprocess.run([sys.executable, "-c", code, *common], cwd=ROOT, env=env, check=True, capture_output=True,
                          text=True)  # fmt: skip
    return {"threads": threads, "fit_seconds": round(seconds, 2), "test_ndcg@5": float(done.stdout.split()[-1])}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "train" / "neural_ndcg.yaml"))
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", help="write the runs and medians to this JSON file")
    args = parser.parse_args(argv)
    runs = []
    load_at_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for threads in args.threads:
                runs.append(fit_once(args.config, args.epochs, threads, Path(tmp) / f"t{threads}_{repeat}"))
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    medians = {t: statistics.median(r["fit_seconds"] for r in runs if r["threads"] == t) for t in args.threads}
    record = {
        "config": os.path.relpath(args.config, ROOT), "epochs": args.epochs, "cpu_count": os.cpu_count(),
        "load_average_at_start": load_at_start, "load_average_at_end": os.getloadavg(),
        "note": "a shared VM: other processes ran on its cores during the runs", "runs": runs,
        "median_fit_seconds": medians,
    }  # fmt: skip
    print("| threads | fit time (median) | test NDCG@5 |")
    print("|---|---|---|")
    for t in args.threads:
        scores = sorted({r["test_ndcg@5"] for r in runs if r["threads"] == t})
        print(f"| {t} | {medians[t]:.1f} s | {', '.join(f'{s:.4f}' for s in scores)} |")
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
