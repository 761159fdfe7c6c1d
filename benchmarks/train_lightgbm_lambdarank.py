"""LightGBM lambdarank on the bundled example data, scored with torchrank's NDCG: the reference figure for
the neural rankers of ``torchrank.training`` (README, "Training a neural ranker").

Trains with the parameters of LightGBM's ``examples/lambdarank/train.conf`` (100 trees, learning rate 0.1,
31 leaves, bagging 0.9 every iteration, min_data_in_leaf 50, min_sum_hessian_in_leaf 5) on ``rank.train``
and prints test NDCG@{1,3,5,10} with gain 2^y - 1 and NDCG = 1 where the ideal DCG is 0 (LightGBM's
convention), by LightGBM's own evaluation and by torchrank (ties in input order, as LightGBM's stable sort,
and averaged over tie orders; trees give tied scores).

    pip install lightgbm        # for this script only: torchrank does not depend on it
    python -m benchmarks.train_lightgbm_lambdarank [--seed 0] [--out benchmarks/results/lightgbm_lambdarank_cpu.json]
    python -m benchmarks.train_lightgbm_lambdarank --data_dir ~/data/MSLR-WEB10K --fold 1   # a folder of yours

With ``--data_dir`` the files come from the folder's layout (``torchrank.training.find_layout``: MSLR-WEB, Yahoo,
Istella, LETOR 4.0), LightGBM trains on the training file (the validation file is not used) and is scored on the
test file, with the same parameters.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from torchrank.io import group_to_dense, read_svmlight
from torchrank.training import EVAL_K, LIGHTGBM_LAMBDARANK, ndcg_metric
from torchrank.training.data import find_layout

# examples/lambdarank/train.conf of LightGBM
TRAIN_CONF = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "ndcg_eval_at": list(EVAL_K),
    "max_bin": 255,
    "learning_rate": 0.1,
    "num_leaves": 31,
    "feature_fraction": 1.0,
    "bagging_freq": 1,
    "bagging_fraction": 0.9,
    "min_data_in_leaf": 50,
    "min_sum_hessian_in_leaf": 5.0,
}
NUM_TREES = 100


def load(path: Path, n_features: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """Features, labels and query ids (0..Q-1 in file order) of a file, and its group sizes."""
    group_file = Path(f"{path}.query")
    rows = read_svmlight(path, n_features=n_features, group_file=group_file if group_file.is_file() else None)
    return rows.features, rows.labels, rows.qid, torch.bincount(rows.qid).tolist()


def main(argv: list[str] | None = None) -> dict[str, float]:
    import lightgbm as lgb

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data_dir", help="a folder in a standard layout (default: the bundled example data)")
    parser.add_argument("--fold", type=int, default=1, help="the fold (or Yahoo set) of --data_dir")
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    if args.data_dir:
        train_path, _, test_path = find_layout(args.data_dir, args.fold)
        x_train, y_train, _, groups_train = load(train_path)
        x_test, y_test, qid_test, groups_test = load(test_path, n_features=x_train.shape[1])
    else:
        x_train, y_train, _, groups_train = load(LIGHTGBM_LAMBDARANK / "rank.train", n_features=300)
        x_test, y_test, qid_test, groups_test = load(LIGHTGBM_LAMBDARANK / "rank.test", n_features=300)
    params = {**TRAIN_CONF, "seed": args.seed, "deterministic": True, "verbosity": -1}
    train = lgb.Dataset(x_train.numpy(), y_train.numpy(), group=groups_train)
    test = lgb.Dataset(x_test.numpy(), y_test.numpy(), group=groups_test, reference=train)
    evals: dict = {}
    booster = lgb.train(
        params, train, NUM_TREES, valid_sets=[test], valid_names=["test"], callbacks=[lgb.record_evaluation(evals)]
    )

    scores, labels, mask = group_to_dense(torch.from_numpy(booster.predict(x_test.numpy())), y_test, qid_test)
    result = {f"lightgbm_ndcg@{k}": evals["test"][f"ndcg@{k}"][-1] for k in EVAL_K}
    for ties in ("first", "average"):
        metric = ndcg_metric(ties=ties)
        metric.update(scores, labels, mask=mask)
        result |= {f"torchrank_ndcg@{k}_ties_{ties}": float(v) for k, v in zip(EVAL_K, metric.compute(), strict=True)}
    result |= {"lightgbm": lgb.__version__, "seed": args.seed, "trees": NUM_TREES}
    result |= {"data": {"data_dir": args.data_dir, "fold": args.fold} if args.data_dir else "bundled"}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
