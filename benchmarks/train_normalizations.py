"""Which feature scaling should ``LetorDataModule`` default to: NeuralNDCG with the configs' MLP trained under
each ``normalization`` on MSLR-like synthetic data and on the bundled LightGBM data, several seeds each, with
LightGBM lambdarank (default parameters) beside them when it is installed. Writes
``benchmarks/results/normalization_cpu.{json,md}``: test NDCG@5 and @10, mean, sd and range over the seeds.

Each fit runs ``configs/train/neural_ndcg.yaml`` exactly as ``benchmarks.train_neural_rankers`` does (the CLI's
fit, then test of its ``last.ckpt``), with ``--data.normalization`` and ``--trainer.max_epochs`` set. Datasets:

- ``synthetic``: per seed, a fresh draw of :mod:`benchmarks.synthetic_letor` (136 raw MSLR-WEB-like features:
  heavy-tailed counts with many tied zeros, BM25 / LM / tf-idf scores, PageRank and clicks up to ~1e8) in
  MSLR-WEB's ``Fold1`` layout, sized like issue 30's real MSLR-WEB sample (43 training queries) with 20
  validation and 100 test queries; seed ``s`` draws the data with ``s`` and trains with ``s``, so the spread
  covers both the data and the initialisation;
- ``synthetic_large``: the same with 300 training and 60 validation queries (7 times the optimiser steps per
  epoch): whether a scaling's deficit is only slow training;
- ``bundled``: LightGBM's ``examples/lambdarank`` (300 features already in [0, 1]; 161 training, 40 validation,
  50 test queries), the training seed only varying.

Usage (from the repository root; 10-20 s per fit on one CPU thread, about a minute on synthetic_large):

    python -m benchmarks.train_normalizations [--seeds 0 1 2 3 4] [--large_seeds 0 1 2] [--epochs 30]
    python -m benchmarks.train_normalizations --datasets synthetic bundled --normalizations quantile log1p_zscore
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import torch

from benchmarks.synthetic_letor import write_fold
from benchmarks.train_lightgbm_lambdarank import load
from benchmarks.train_neural_rankers import ROOT, metadata, run
from torchrank.io import group_to_dense
from torchrank.training import LIGHTGBM_LAMBDARANK, ndcg_metric
from torchrank.training.data import find_layout
from torchrank.training.scaling import NORMALIZATIONS

RESULTS = ROOT / "benchmarks" / "results"
REPORTED_K = (5, 10)
#: dataset -> (train, validation, test) queries of its synthetic draw; None: the bundled files
DATASETS: dict[str, tuple[int, int, int] | None] = {
    "synthetic": (43, 20, 100),
    "synthetic_large": (300, 60, 100),
    "bundled": None,
}


def dataset_dir(dataset: str, seed: int, runs: Path) -> Path:
    """The data folder of ``dataset`` for ``seed`` (a synthetic one is drawn now, into ``runs``)."""
    sizes = DATASETS[dataset]
    if sizes is None:
        return LIGHTGBM_LAMBDARANK
    return write_fold(runs / "data" / f"{dataset}_seed{seed}", seed, *sizes)


def lightgbm_defaults(data_dir: Path, seed: int) -> dict[str, float]:
    """LightGBM lambdarank with its default parameters (100 trees, learning rate 0.1, 31 leaves), trained on the
    training file, scored on the test file by torchrank's NDCG (ties averaged)."""
    import lightgbm as lgb

    train_path, _, test_path = find_layout(data_dir)
    width = 300 if data_dir == LIGHTGBM_LAMBDARANK else None
    x_train, y_train, _, groups_train = load(train_path, n_features=width)
    x_test, y_test, qid_test, _ = load(test_path, n_features=x_train.shape[1])
    params = {"objective": "lambdarank", "seed": seed, "deterministic": True, "verbosity": -1, "num_threads": 1}
    booster = lgb.train(params, lgb.Dataset(x_train.numpy(), y_train.numpy(), group=groups_train))
    scores, labels, mask = group_to_dense(torch.from_numpy(booster.predict(x_test.numpy())), y_test, qid_test)
    metric = ndcg_metric(REPORTED_K, ties="average")
    metric.update(scores, labels, mask=mask)
    at_k = zip(REPORTED_K, metric.compute().tolist(), strict=True)
    return {f"test_ndcg@{k}": round(v, 4) for k, v in at_k} | {"lightgbm": lgb.__version__}


def lightgbm_installed() -> bool:
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        return False
    return True


def summarize(values: list[float]) -> dict[str, float]:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": round(statistics.mean(values), 4), "sd": round(sd, 4), "min": min(values), "max": max(values)}


def summary(results: list[dict], reference: list[dict]) -> dict:
    """dataset -> model -> ``test_ndcg@k`` -> mean, sd, min, max over the seeds."""
    out: dict = {}
    rows = [(r["dataset"], r["normalization"], r) for r in results]
    rows += [(r["dataset"], "lightgbm", r) for r in reference]
    for dataset in dict.fromkeys(d for d, _, _ in rows):
        out[dataset] = {}
        for model in dict.fromkeys(m for d, m, _ in rows if d == dataset):
            runs = [r for d, m, r in rows if d == dataset and m == model]
            out[dataset][model] = {f"test_ndcg@{k}": summarize([r[f"test_ndcg@{k}"] for r in runs]) for k in REPORTED_K}
    return out


def markdown(table: dict, meta: dict) -> str:
    lines = []
    for dataset, models in table.items():
        header = "| model | test NDCG@5, mean +- sd | range | test NDCG@10, mean +- sd | range |"
        lines += [f"### {dataset}", "", header, "|---|---|---|---|---|"]
        for model, at in models.items():
            name = "LightGBM lambdarank (defaults)" if model == "lightgbm" else f"NeuralNDCG MLP, `{model}`"
            cells = [f"{s['mean']:.4f} +- {s['sd']:.4f} | {s['min']:.4f}-{s['max']:.4f}" for s in at.values()]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    seeds = f"seeds {meta['seeds']}"
    seeds += f", synthetic_large {meta['synthetic_large_seeds']}" if "synthetic_large" in table else ""
    lines.append(f"({seeds}; {meta['epochs']} epochs; sd: over the seeds)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--large_seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of synthetic_large")
    parser.add_argument("--epochs", type=int, default=30, help="max_epochs of every fit (default 30, as issue 30)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--normalizations", nargs="+", default=list(NORMALIZATIONS), choices=NORMALIZATIONS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", default="runs/normalization", help="folder for the data, logs and checkpoints")
    parser.add_argument("--out", default=str(RESULTS / "normalization_cpu.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    meta = {**metadata(args.threads), "seeds": args.seeds}  # the commit the fits run, not the one they end at
    runs, results, reference = Path(args.runs), [], []
    for dataset in args.datasets:
        for seed in args.large_seeds if dataset == "synthetic_large" else args.seeds:
            data_dir = dataset_dir(dataset, seed, runs)
            for normalization in args.normalizations:
                data = [f"--data.data_dir={data_dir}", f"--data.normalization={normalization}"]
                data += [f"--trainer.max_epochs={args.epochs}"]
                record = run("neural_ndcg", runs / dataset / normalization, seed, args.threads, data)
                results.append({"dataset": dataset, "normalization": normalization, **record})
            if lightgbm_installed():
                reference.append({"dataset": dataset, "seed": seed, **lightgbm_defaults(data_dir, seed)})
    meta |= {"load_average_1min_at_end": os.getloadavg()[0], "synthetic_large_seeds": args.large_seeds}
    meta |= {"epochs": args.epochs, "datasets": {name: DATASETS[name] or "bundled" for name in args.datasets}}
    meta["lightgbm"] = "lambdarank, default parameters, training file only" if reference else "not installed"
    table = summary(results, reference)
    record = {"metadata": meta, "summary": table, "results": results, "lightgbm": reference}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    text = markdown(table, meta)
    Path(args.out).with_suffix(".md").write_text(text + "\n")
    print(text)
    return record


if __name__ == "__main__":
    main()
