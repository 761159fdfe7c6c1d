"""The trainable example: LETOR data module against the raw files, the configs, the CLI, and a training
smoke test (each differentiable NDCG/ERR surrogate beats random scores on the bundled test split)."""

from __future__ import annotations

import functools
import inspect
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning", reason="the training example needs `lightning`")
pytest.importorskip("jsonargparse", reason="the training CLI needs `jsonargparse[signatures]`")

import lightning as L
import torch
import yaml
from torch.utils.data import TensorDataset

from torchrank import losses
from torchrank.training import (
    EVAL_K,
    LIGHTGBM_LAMBDARANK,
    LetorDataModule,
    MLPRanker,
    ndcg_metric,
    read_letor,
    split_queries,
)
from torchrank.training.cli import main

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs" / "train").glob("*.yaml"))
LOSS_NAMES = ["approx_ndcg", "lambda_loss", "listmle", "listnet", "neural_ndcg", "ranknet", "soft_err"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # tiny matmuls: thread hand-offs cost more than they save, and CI has 2 cores
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def datamodule() -> LetorDataModule:
    dm = LetorDataModule(batch_size=16)
    dm.setup("fit")
    return dm


@functools.cache
def raw_queries(name: str) -> list[list[tuple[float, dict[int, float]]]]:
    """The file parsed by hand: per query (group file order), per line ``(label, {index: value})``."""
    lines = (LIGHTGBM_LAMBDARANK / name).read_text().splitlines()
    sizes = [int(s) for s in (LIGHTGBM_LAMBDARANK / f"{name}.query").read_text().split()]
    assert sum(sizes) == len(lines)
    rows = []
    for line in lines:
        label, *feats = line.split()
        rows.append((float(label), {int(i): float(v) for i, v in (f.split(":") for f in feats)}))
    starts = [sum(sizes[:q]) for q in range(len(sizes))]
    return [rows[s : s + n] for s, n in zip(starts, sizes, strict=True)]


def dense(feats: dict[int, float], num_features: int) -> list[float]:
    row = [0.0] * num_features
    for index, value in feats.items():
        row[index - 1] = value  # 1-based indices
    return row


def assert_matches_raw(data: TensorDataset, queries: list, num_features: int, width: int | None = None) -> None:
    """``data`` holds ``queries`` in order, padded to ``width`` (default: the longest query) with a mask."""
    features, labels, mask = data.tensors
    width = width or max(len(q) for q in queries)
    assert features.shape == (len(queries), width, num_features) and features.dtype == torch.float32
    assert labels.shape == mask.shape == (len(queries), width) and mask.dtype == torch.bool
    for q, rows in enumerate(queries):
        n = len(rows)
        assert mask[q, :n].all() and not mask[q, n:].any()  # real documents first, padding after
        assert not features[q, n:].any() and not labels[q, n:].any()  # padding is zero
        assert labels[q, :n].tolist() == [label for label, _ in rows]
        expected = torch.tensor([dense(feats, num_features) for _, feats in rows])
        torch.testing.assert_close(features[q, :n], expected, rtol=0, atol=0)


def test_read_letor_matches_the_raw_files():
    for name, num_queries, width in [("rank.train", 201, 27), ("rank.test", 50, 24)]:
        data = read_letor(LIGHTGBM_LAMBDARANK / name)
        assert data.tensors[0].shape[:2] == (num_queries, width)
        assert_matches_raw(data, raw_queries(name), 300)


def test_datamodule_splits_batches_and_padding(datamodule):
    train_queries = raw_queries("rank.train")
    train, val = split_queries(201, 0.2, seed=0)
    assert torch.equal(datamodule.val_queries, val) and len(val) == 40
    assert sorted(train.tolist() + val.tolist()) == list(range(201))
    # both splits keep the training file's padded width, 27
    assert_matches_raw(datamodule.val_set, [train_queries[q] for q in val], 300, width=27)
    assert_matches_raw(datamodule.train_set, [train_queries[q] for q in train], 300, width=27)
    assert_matches_raw(datamodule.test_set, raw_queries("rank.test"), 300)

    batches = list(datamodule.train_dataloader())
    assert [len(b[0]) for b in batches] == [16] * 10 + [1] and all(len(b) == 3 for b in batches)
    features, labels, mask = batches[0]
    assert features.shape == (16, 27, 300) and labels.shape == mask.shape == (16, 27)
    assert sum(int(b[2].sum()) for b in datamodule.test_dataloader()) == 768


def test_split_queries_is_seeded():
    train, val = split_queries(50, 0.3, seed=3)
    assert len(val) == 15 and sorted(train.tolist() + val.tolist()) == list(range(50))
    assert torch.equal(split_queries(50, 0.3, seed=3)[1], val)
    assert not torch.equal(split_queries(50, 0.3, seed=4)[1], val)
    assert len(split_queries(50, 0.0, seed=3)[1]) == 0


def test_datamodule_on_qid_files_of_different_widths(tmp_path):
    # LETOR qid: fields, no group files; the test file's highest feature index is below the training file's
    (tmp_path / "train.txt").write_text("2 qid:7 1:0.5 4:1\n0 qid:7 2:0.25\n1 qid:3 3:2\n0 qid:3 1:1\n1 qid:3 2:1\n")
    (tmp_path / "test.txt").write_text("1 qid:1 1:0.5\n0 qid:1 2:1\n")
    dm = LetorDataModule(str(tmp_path), train_file="train.txt", test_file="test.txt", val_fraction=0, batch_size=8)
    assert dm.num_features == 4 and dm.val_dataloader() == []
    features, labels, mask = dm.train_set.tensors
    assert features.shape == (2, 3, 4) and labels.tolist() == [[2, 0, 0], [1, 0, 1]]
    assert mask.tolist() == [[True, True, False], [True, True, True]]
    assert dm.test_set.tensors[0].tolist() == [[[0.5, 0, 0, 0], [0, 1, 0, 0]]]  # zero-padded to 4 features
    with pytest.raises(ValueError, match="val_fraction"):
        LetorDataModule(val_fraction=1)
    with pytest.raises(ValueError, match="batch_size"):
        LetorDataModule(batch_size=0)


def random_ndcg5(labels: torch.Tensor, mask: torch.Tensor, draws: int = 100) -> torch.Tensor:
    """Test NDCG@5 (the same metric) of ``draws`` seeded uniformly random scorings."""
    values = []
    for seed in range(draws):
        metric = ndcg_metric(5)
        metric.update(torch.rand(labels.shape, generator=torch.Generator().manual_seed(seed)), labels, mask=mask)
        values.append(metric.compute())
    return torch.stack(values)


def fit_and_test(loss: torch.nn.Module, datamodule: LetorDataModule, epochs: int) -> dict[str, float]:
    L.seed_everything(0, verbose=False)
    model = MLPRanker(loss, num_features=datamodule.num_features, hidden_sizes=[64], dropout=0.1, lr=3e-3)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        deterministic=True,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(model, datamodule)
    (logged,) = trainer.test(model, datamodule, verbose=False)
    return logged


@pytest.mark.parametrize("loss", ["NeuralNDCGLoss", "ApproxNDCGLoss", "LambdaLoss", "SoftERRLoss"])
def test_training_beats_random_scores(loss, datamodule):
    _, labels, mask = datamodule.test_set.tensors
    chance = random_ndcg5(labels, mask)
    logged = fit_and_test(getattr(losses, loss)(), datamodule, epochs=3)
    assert set(logged) == {f"test_ndcg@{k}" for k in EVAL_K}
    # 3 standard deviations above the mean of random scorings (about 0.47 + 0.08)
    assert logged["test_ndcg@5"] > chance.mean() + 3 * chance.std()


def test_configs_differ_only_in_the_loss():
    assert [p.stem for p in CONFIGS] == LOSS_NAMES
    parsed = {p.stem: yaml.safe_load(p.read_text()) for p in CONFIGS}
    classes = set()
    for cfg in parsed.values():
        classes.add(cfg["model"]["loss"]["class_path"])
        cfg["model"].pop("loss")
    assert len(classes) == len(CONFIGS) and all(c.startswith("torchrank.losses.") for c in classes)
    first = next(iter(parsed.values()))
    assert all(cfg == first for cfg in parsed.values())


def test_configs_parse_and_build_their_loss():
    cli = main(["--config", str(CONFIGS[0])], run=False)  # run=False: no subcommand, classes instantiated
    assert isinstance(cli.model, MLPRanker) and isinstance(cli.datamodule, LetorDataModule)
    assert cli.trainer.max_epochs == 40 and cli.model.hparams.num_features == 300  # linked from the data
    for path in CONFIGS:
        config = cli.parser.parse_args(["--config", str(path)])  # checks types and the loss's init_args
        loss = config.model.loss
        module, name = loss.class_path.rsplit(".", 1)
        assert module == "torchrank.losses"
        assert isinstance(getattr(losses, name)(**vars(loss.get("init_args") or {})), torch.nn.Module)


def test_cli_fit_then_test(tmp_path, capsys):
    config = str(ROOT / "configs" / "train" / "neural_ndcg.yaml")
    short = [f"--trainer.default_root_dir={tmp_path}", "--trainer.max_epochs=1", "--trainer.limit_train_batches=2"]
    short += ["--trainer.enable_progress_bar=false"]
    main(["fit", "--config", config, *short])
    checkpoint = next(tmp_path.rglob("last.ckpt"))
    assert f"last checkpoint: {checkpoint}" in capsys.readouterr().out
    cli = main(["test", "--config", config, *short, f"--ckpt_path={checkpoint}"])
    logged = cli.trainer.callback_metrics
    assert {f"test_ndcg@{k}" for k in EVAL_K} <= set(logged) and 0 < float(logged["test_ndcg@5"]) <= 1


def test_cli_test_takes_the_last_fits_checkpoint(tmp_path, capsys):
    """``--ckpt_path last`` is the newest fit's last.ckpt (version_1 after a second fit), not version_0's."""
    config = str(ROOT / "configs" / "train" / "neural_ndcg.yaml")
    short = [f"--trainer.default_root_dir={tmp_path}", "--trainer.max_epochs=1", "--trainer.limit_train_batches=2"]
    short += ["--trainer.enable_progress_bar=false"]
    main(["fit", "--config", config, *short])
    main(["fit", "--config", config, *short, "--model.lr=0.01"])
    second = tmp_path / "lightning_logs" / "version_1" / "checkpoints" / "last.ckpt"
    assert f"last checkpoint: {second}" in capsys.readouterr().out
    cli = main(["test", "--config", config, *short, "--ckpt_path=last"])
    assert cli.config.test.ckpt_path == str(second)
    by_path = main(["test", "--config", config, *short, f"--ckpt_path={second}"]).trainer.callback_metrics
    assert float(cli.trainer.callback_metrics["test_ndcg@5"]) == float(by_path["test_ndcg@5"])


def test_cli_last_checkpoint_without_a_fit_is_a_clear_error(tmp_path):
    config = str(ROOT / "configs" / "train" / "neural_ndcg.yaml")
    with pytest.raises(FileNotFoundError, match="run `fit` with the same config"):
        main(["test", "--config", config, f"--trainer.default_root_dir={tmp_path}", "--ckpt_path=last"])


def test_module_entry_point(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["torchrank.training", "fit", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("torchrank.training", run_name="__main__")
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--model.loss" in out and "--data.batch_size" in out


# ----------------------------------------------------------------------------------------------- feature scaling
def write_letor(path: Path, rows: list[tuple[int, int, list[float]]]) -> None:
    """``(label, qid, features)`` per line, every feature written (1-based indices)."""
    lines = [f"{y} qid:{q} " + " ".join(f"{i + 1}:{v!r}" for i, v in enumerate(x)) for y, q, x in rows]
    path.write_text("\n".join(lines) + "\n")


def raw_web_files(tmp_path: Path, seed: int = 0) -> Path:
    """A train and a test file with MSLR-like raw features: a heavy-tailed count up to ~1e8, a signed value, a
    constant, and an ordinary [0, 1] feature; 6 queries of 5 documents (2 held out for validation)."""
    g = torch.Generator().manual_seed(seed)
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, queries in (("train.txt", 6), ("test.txt", 3)):
        rows = []
        for q in range(queries):
            for _ in range(5):
                count = float(torch.exp(torch.randn((), generator=g) * 6).round().clamp(max=2e8))
                signed = float(torch.randn((), generator=g) * 50)
                plain = float(torch.rand((), generator=g))
                rows.append((int(torch.randint(0, 5, (), generator=g)), q, [count, signed, 7.0, plain]))
        write_letor(tmp_path / name, rows)
    return tmp_path


def training_docs(dm: LetorDataModule) -> torch.Tensor:
    features, _, mask = dm.train_set.tensors
    return features[mask].double()


def test_zscore_and_log1p_zscore_use_training_statistics_only(tmp_path):
    folder = raw_web_files(tmp_path)
    for normalization in ("zscore", "log1p_zscore"):
        dm = LetorDataModule(
            str(folder), train_file="train.txt", test_file="test.txt", normalization=normalization, val_fraction=0.3
        )
        docs = training_docs(dm)
        if normalization == "log1p_zscore":
            docs = torch.sign(docs) * torch.log(1 + docs.abs())  # sign(x) log(1 + |x|), written out
        mean, std = docs.mean(0), docs.std(0, correction=0)
        std[2] = 1  # the constant feature: centred, not divided
        for split, data in (("train", dm.train_set), ("val", dm.val_set), ("test", dm.test_set)):
            features, _, mask = data.tensors
            raw = features.double()
            if normalization == "log1p_zscore":
                raw = torch.sign(raw) * torch.log(1 + raw.abs())
            expected = torch.where(mask.unsqueeze(-1), (raw - mean) / std, 0)
            torch.testing.assert_close(dm.scaled(split).tensors[0].double(), expected, rtol=1e-5, atol=1e-5)
        scaled = dm.scaled("train").tensors[0][dm.train_set.tensors[2]]
        assert (scaled[:, 2] == 0).all()  # constant on the training split: 0, not NaN
        assert len(dm.val_set) == 2 and not torch.allclose(dm.scaled("val").tensors[0].mean(), torch.tensor(0.0))


def test_quantile_maps_to_the_training_cdf(tmp_path):
    dm = LetorDataModule(
        str(raw_web_files(tmp_path)),
        train_file="train.txt",
        test_file="test.txt",
        normalization="quantile",
        val_fraction=0.3,
    )
    docs = training_docs(dm)
    scaled = dm.scaled("train").tensors[0][dm.train_set.tensors[2]].double()
    assert ((scaled >= 0) & (scaled <= 1)).all()
    # the mid-rank of each value among the training values, up to the stored CDF's resolution (1e-3)
    below = (docs.unsqueeze(0) < docs.unsqueeze(1)).double().mean(1)
    at_or_below = (docs.unsqueeze(0) <= docs.unsqueeze(1)).double().mean(1)
    torch.testing.assert_close(scaled, (below + at_or_below) / 2, atol=2e-3, rtol=0)
    assert (scaled[:, 2] == 0.5).all()  # a constant feature sits at its mid-rank


def test_default_is_log1p_zscore_in_the_module_and_every_config():
    # chosen on MSLR-like data (docs/training.md, "Feature scaling"; benchmarks/results/normalization_cpu.md)
    default = inspect.signature(LetorDataModule).parameters["normalization"].default
    assert default == "log1p_zscore" == LetorDataModule().normalization
    assert {yaml.safe_load(p.read_text())["data"]["normalization"] for p in CONFIGS} == {default}


def test_default_keeps_heavy_tailed_counts_within_a_few_units(tmp_path):
    # a click-count-like column (tied zeros, a heavy tail up to 1e3) and a BM25-like one; the test file holds
    # counts far beyond the training range, up to MSLR-WEB's largest raw value (2.3e8)
    counts = [0, 0, 3, 17, 250, 0, 1, 0, 40, 1000, 0, 0, 0, 2, 9, 5, 0, 120, 0, 0]
    train = [(i % 3, i // 5, [float(c), 0.5 + 1.3 * (i % 7)]) for i, c in enumerate(counts)]
    test = [(d % 3, 0, [c, 2.0 * d]) for d, c in enumerate([0.0, 5.0, 1e3, 1e5, 2.3e8])]
    write_letor(tmp_path / "train.txt", train)
    write_letor(tmp_path / "test.txt", test)
    files = {"train_file": "train.txt", "test_file": "test.txt", "val_fraction": 0.0}
    default = LetorDataModule(str(tmp_path), **files)
    scaled_train = default.scaled("train").tensors[0][default.train_set.tensors[2]]
    scaled_test = default.scaled("test").tensors[0][0]
    assert torch.isfinite(scaled_train).all() and scaled_train.abs().max() < 5
    assert torch.isfinite(scaled_test).all() and scaled_test.abs().max() < 10  # 2.3e8 lands about 8.5
    assert (scaled_test[:, 0].diff() > 0).all()  # the order of the counts is kept
    plain = LetorDataModule(str(tmp_path), **files, normalization="zscore").scaled("test").tensors[0][0]
    assert plain[:, 0].max() > 1e5  # what the default avoids: z-scored, 2.3e8 is ~1e6 standard deviations out


def test_none_warns_on_wide_raw_features_only(tmp_path):
    folder = raw_web_files(tmp_path)
    wide = LetorDataModule(str(folder), train_file="train.txt", test_file="test.txt", normalization="none")
    with pytest.warns(UserWarning, match="log1p_zscore"):
        wide.train_dataloader()
    assert torch.equal(wide.scaled("test").tensors[0], wide.test_set.tensors[0])  # as read
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LetorDataModule(normalization="none").train_dataloader()  # the bundled [0, 1] features
    with pytest.raises(ValueError, match="normalization"):
        LetorDataModule(normalization="minmax")


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_non_finite_features_are_refused_with_file_and_column(tmp_path, bad):
    (tmp_path / "train.txt").write_text(f"1 qid:1 1:0.5 2:{bad}\n0 qid:1 1:1 2:3\n")
    (tmp_path / "test.txt").write_text("1 qid:1 1:0.5\n")
    dm = LetorDataModule(str(tmp_path), train_file="train.txt", test_file="test.txt", val_fraction=0)
    with pytest.raises(ValueError, match=r"train\.txt: feature 2 \(the file's index\) has NaN or inf at 1 documents"):
        dm.setup("fit")


def test_scaling_travels_with_the_checkpoint(tmp_path):
    folder = raw_web_files(tmp_path / "a")
    other = raw_web_files(tmp_path / "b", seed=1)  # another training file: its own fit would differ
    config = str(ROOT / "configs" / "train" / "listnet.yaml")
    short = [f"--trainer.default_root_dir={tmp_path}", "--trainer.max_epochs=1", "--trainer.enable_progress_bar=false"]
    data = ["--data.train_file=train.txt", "--data.test_file=test.txt", "--data.normalization=log1p_zscore"]
    main(["fit", "--config", config, *short, *data, f"--data.data_dir={folder}"])
    checkpoint = next(tmp_path.rglob("last.ckpt"))
    saved = torch.load(checkpoint, weights_only=False)["LetorDataModule"]["scaling"]
    files = {"train_file": "train.txt", "test_file": "test.txt", "normalization": "log1p_zscore"}
    fitted = LetorDataModule(str(folder), **files).state_dict()["scaling"]
    torch.testing.assert_close(saved["mean"], fitted["mean"])
    cli = main(["test", "--config", config, *short, *data, f"--data.data_dir={other}", f"--ckpt_path={checkpoint}"])
    restored = cli.datamodule.state_dict()["scaling"]
    torch.testing.assert_close(restored["mean"], fitted["mean"])  # the checkpoint's, not other's own fit
    own = LetorDataModule(str(other), **files).state_dict()["scaling"]
    assert not torch.allclose(own["mean"], fitted["mean"])
    predictions = cli.trainer.predict(cli.model, cli.datamodule)
    assert torch.isfinite(torch.cat([p[~p.isnan()] for p in predictions])).all()


# ----------------------------------------------------------------------------------------------- dataset layouts
def write_split(path: Path, queries: int, first_feature: float, docid: bool = False) -> None:
    """``queries`` queries of 3 documents; feature 1 is ``first_feature`` everywhere (marks the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    comment = " #docid = GX{q:03d}-{d} inc = 1 prob = 0.5" if docid else ""
    lines = [
        f"{d % 3} qid:{100 + q} 1:{first_feature} 2:{d}" + comment.format(q=q, d=d)
        for q in range(queries)
        for d in range(3)
    ]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("layout", "fold", "files"),
    [
        ("MSLR-WEB10K", 2, ("Fold2/train.txt", "Fold2/vali.txt", "Fold2/test.txt")),
        ("MQ2007", 1, ("Fold1/train.txt", "Fold1/vali.txt", "Fold1/test.txt")),  # LETOR 4.0, docid comments
        ("yahoo", 1, ("set1.train.txt", "set1.valid.txt", "set1.test.txt")),
        ("istella", 1, ("train.txt", None, "test.txt")),
    ],
)
def test_standard_layouts_are_found(tmp_path, layout, fold, files):
    root = tmp_path / layout
    for marker, (queries, name) in enumerate(zip((5, 2, 3), files, strict=True), start=1):
        if name is not None:
            write_split(root / name, queries, float(marker), docid=layout == "MQ2007")
    if layout == "MSLR-WEB10K":  # another fold beside it, which must not be read
        for name in ("train.txt", "vali.txt", "test.txt"):
            write_split(root / "Fold1" / name, 4, 9.0)
    dm = LetorDataModule(str(root), fold=fold, val_fraction=0.4, normalization="none")
    first = {
        name: getattr(dm, f"{name}_set").tensors[0][..., 0][getattr(dm, f"{name}_set").tensors[2]].unique()
        for name in ("train", "val", "test")
    }
    assert first["train"].tolist() == [1.0] and first["test"].tolist() == [3.0]
    if files[1] is not None:  # the split's own validation file, every training query trains
        assert first["val"].tolist() == [2.0] and len(dm.val_set) == 2 and len(dm.train_set) == 5
        assert len(dm.val_queries) == 0
    else:  # none: a seeded share of the training queries
        assert first["val"].tolist() == [1.0] and len(dm.val_set) == 2 and len(dm.train_set) == 3


def test_unknown_layout_names_the_expected_files(tmp_path):
    write_split(tmp_path / "data.txt", 2, 1.0)
    with pytest.raises(FileNotFoundError, match=r"Fold1/train\.txt.*set1\.train\.txt.*train_file"):
        LetorDataModule(str(tmp_path)).setup("fit")
    dm = LetorDataModule(str(tmp_path), train_file="data.txt", test_file="data.txt", val_file="data.txt")
    assert len(dm.val_set) == len(dm.train_set) == 2  # explicit names need no layout


# ----------------------------------------------------------------------------------------------- CLI behaviour
def test_cli_threads_default_to_one_and_follow_the_flag(monkeypatch):
    from torchrank.training.cli import default_threads

    config = str(ROOT / "configs" / "train" / "listnet.yaml")
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert default_threads() == 1
        torch.set_num_threads(2)
        main(["--config", config], run=False)
        assert torch.get_num_threads() == 1
        main(["--config", config, "--threads=2"], run=False)
        assert torch.get_num_threads() == 2
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert default_threads() == 2
        monkeypatch.setenv("OMP_NUM_THREADS", "many")
        assert default_threads() == 1
    finally:
        torch.set_num_threads(1)


def test_cli_drops_lightnings_notices_and_keeps_real_warnings(tmp_path, capfd, recwarn):
    """A fit prints the progress bar, not Lightning's device probes, tips or known-harmless warnings; a warning of
    torchrank's own (raw features without scaling) still shows."""
    from torchrank.training.cli import NOISY_WARNINGS

    folder = raw_web_files(tmp_path / "data")
    config = str(ROOT / "configs" / "train" / "listnet.yaml")
    data = [f"--data.data_dir={folder}", "--data.train_file=train.txt", "--data.test_file=test.txt"]
    cli = main(["fit", "--config", config, f"--trainer.default_root_dir={tmp_path}", "--trainer.max_epochs=1",
                *data, "--data.normalization=none"])  # fmt: skip
    assert cli.trainer.progress_bar_callback is not None  # a progress bar by default
    err = capfd.readouterr().err
    for notice in ("GPU available", "TPU available", "Tip:", "tensorboardX", "LeafSpec"):
        assert notice not in err
    messages = [str(w.message) for w in recwarn]
    assert any("log1p_zscore" in m for m in messages)  # torchrank's own warning is kept
    import re

    assert not [m for m in messages if any(re.match(p, m) for p in NOISY_WARNINGS)]


def test_python_api_drops_the_same_notices_as_the_cli(tmp_path, capfd, recwarn):
    """A script that builds its own Trainer (docs/training.md's Python example) does not print Lightning's device
    probes, tips or the known-harmless warnings either: building the data module and the model hides them."""
    import re

    from torchrank.training.cli import NOISY_WARNINGS

    data = LetorDataModule(batch_size=16)
    model = MLPRanker(losses.ListNetLoss(), num_features=data.num_features, hidden_sizes=[8])
    trainer = L.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1, limit_test_batches=1,
                        default_root_dir=tmp_path, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)  # fmt: skip
    trainer.fit(model, data)
    trainer.test(model, data, verbose=False)
    err = capfd.readouterr().err
    for notice in ("GPU available", "TPU available", "Tip:", "tensorboardX", "LeafSpec"):
        assert notice not in err
    assert not [str(w.message) for w in recwarn if any(re.match(p, str(w.message)) for p in NOISY_WARNINGS)]


def test_import_leaves_the_warning_filters_as_they_were():
    """Only building the training API's classes hides Lightning's notices: a process that imports torchrank.training
    (for read_letor, say) keeps its own warning filters. A fresh process: this one has imported it long ago."""
    code = (
        "import warnings\n"
        "import lightning, torchrank.io, torchrank.metrics\n"  # what it builds on: they set filters of their own
        "before = list(warnings.filters)\n"
        "import torchrank.training\n"
        "from torchrank.training import read_letor\n"
        "print(warnings.filters == before)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
