"""LETOR / SVMlight ranking data as padded per-query tensors, and a Lightning DataModule over them."""

from __future__ import annotations

import os
from pathlib import Path

import lightning as L
import torch
from torch import Tensor
from torch.nn import functional as nnf
from torch.utils.data import DataLoader, TensorDataset

from torchrank.io import group_to_dense, read_svmlight
from torchrank.training._notices import hide_lightning_noise
from torchrank.training.scaling import NORMALIZATIONS, FeatureScaler, check_finite

__all__ = ["LAYOUTS", "LIGHTGBM_LAMBDARANK", "LetorDataModule", "find_layout", "read_letor", "split_queries"]

#: LightGBM's ``examples/lambdarank`` data, bundled: ``rank.train`` / ``rank.test`` with ``.query`` group files.
LIGHTGBM_LAMBDARANK = Path(__file__).resolve().parent.parent / "data" / "lightgbm_lambdarank"


def read_letor(path: str | os.PathLike[str], *, n_features: int | None = None) -> TensorDataset:
    """Read an SVMlight / LETOR file into one padded row per query.

    Queries come from ``qid:`` fields or, when ``<path>.query`` exists, from that LightGBM group file.

    Args:
        path: The data file.
        n_features: Number of feature columns; defaults to the largest feature index in the file (up to
            :data:`torchrank.io.svmlight.MAX_INFERRED_FEATURES`; pass it for wider files).

    Returns:
        A ``TensorDataset`` of ``features [Q, N, F]`` (float32), ``labels [Q, N]`` (float32) and
        ``mask [Q, N]`` (bool, True for real documents), queries in file order, padding last and zero.

    Example:
        >>> data = read_letor(LIGHTGBM_LAMBDARANK / "rank.test")
        >>> [tuple(t.shape) for t in data.tensors]
        [(50, 24, 300), (50, 24), (50, 24)]
        >>> int(data.tensors[2].sum())  # documents
        768
    """
    group_file = Path(f"{os.fspath(path)}.query")
    rows = read_svmlight(path, n_features=n_features, group_file=group_file if group_file.is_file() else None)
    features, labels, mask = group_to_dense(rows.features, rows.labels, rows.qid)
    return TensorDataset(features, labels, mask)


def split_queries(num_queries: int, val_fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """A seeded random split of query indices into ``(train, val)``, each in ascending (file) order.

    The validation part holds ``round(val_fraction * num_queries)`` queries.

    Example:
        >>> split_queries(6, 0.5, seed=0)
        (tensor([0, 1, 4]), tensor([2, 3, 5]))
    """
    order = torch.randperm(num_queries, generator=torch.Generator().manual_seed(seed))
    num_val = round(val_fraction * num_queries)
    return order[num_val:].sort().values, order[:num_val].sort().values


#: The folder layouts users have on disk, tried in this order: name -> (train, validation, test) file names, with
#: ``{fold}`` the fold (MSLR-WEB, LETOR 4.0) or set (Yahoo). A layout's validation file is used when present.
LAYOUTS: dict[str, tuple[str, str, str]] = {
    "mslr": ("Fold{fold}/train.txt", "Fold{fold}/vali.txt", "Fold{fold}/test.txt"),  # MSLR-WEB10K/30K, MQ2007/8
    "yahoo": ("set{fold}.train.txt", "set{fold}.valid.txt", "set{fold}.test.txt"),  # Yahoo LTR challenge
    "istella": ("train.txt", "vali.txt", "test.txt"),  # Istella (no validation file) and flat folders
    "lightgbm": ("rank.train", "rank.vali", "rank.test"),  # LightGBM's examples, the bundled data
}


def find_layout(data_dir: str | os.PathLike[str], fold: int = 1) -> tuple[Path, Path | None, Path]:
    """``(train, validation or None, test)`` files of the first :data:`LAYOUTS` entry whose training and test
    files exist in ``data_dir``.

    Example:
        >>> find_layout(LIGHTGBM_LAMBDARANK)[0].name
        'rank.train'
    """
    root = Path(data_dir)
    for train, val, test in LAYOUTS.values():
        paths = [root / name.format(fold=fold) for name in (train, val, test)]
        if paths[0].is_file() and paths[2].is_file():
            return paths[0], paths[1] if paths[1].is_file() else None, paths[2]
    expected = "; ".join(f"{name}: {' '.join(files).format(fold=fold)}" for name, files in LAYOUTS.items())
    raise FileNotFoundError(
        f"No known learning-to-rank layout in {root} (fold {fold}); expected one of {expected}, or pass "
        "`train_file` and `test_file`."
    )


def _widen(data: TensorDataset, n_features: int) -> TensorDataset:
    """Zero-pad the feature dimension (a file whose highest feature index is below another file's)."""
    features, labels, mask = data.tensors
    return TensorDataset(nnf.pad(features, (0, n_features - features.shape[-1])), labels, mask)


class LetorDataModule(L.LightningDataModule):
    """Train / validation / test batches of whole queries from SVMlight / LETOR files.

    A batch is ``(features [B, N, F], labels [B, N], mask [B, N])`` with ``N`` the longest query of the
    file. Validation uses the split's own validation file when there is one (``val_file``, or the layout's),
    else a seeded random ``val_fraction`` of the training file's queries; the test file is used by
    ``trainer.test`` and ``trainer.predict``. Without ``train_file``, the files come from the folder's layout
    (:func:`find_layout`): MSLR-WEB10K/30K and LETOR 4.0 (``Fold1..5/{train,vali,test}.txt``, ``fold``
    chooses), Yahoo LTR (``set1.{train,valid,test}.txt``), Istella (``train.txt``, ``test.txt``), LightGBM's
    ``rank.{train,test}``.

    Features are scaled per column as ``normalization`` says (:mod:`torchrank.training.scaling`), fitted on the
    training split's documents only and applied to every split's batches; the fitted statistics are this
    module's ``state_dict``, which Lightning saves in each checkpoint and restores before validating, testing
    or predicting from one. ``train_set``, ``val_set`` and ``test_set`` hold the features as read.

    Args:
        data_dir: Folder of the files; defaults to the bundled LightGBM lambdarank example
            (:data:`LIGHTGBM_LAMBDARANK`).
        train_file: Training file name inside ``data_dir`` (``<name>.query`` beside it is its group file);
            None: the layout's.
        test_file: Test file name inside ``data_dir``; None: the layout's.
        val_file: Validation file name inside ``data_dir``; None: the layout's when it exists.
        fold: Fold of an MSLR / LETOR 4.0 folder (1-5), set of a Yahoo one (1 or 2).
        val_fraction: Fraction of the training queries held out for validation when there is no validation
            file (0 disables validation).
        batch_size: Queries per batch.
        n_features: Feature columns; defaults to the largest index over the training and test files.
        seed: Seed of the validation split.
        num_workers: ``DataLoader`` worker processes.
        normalization: ``"log1p_zscore"`` (default: ``sign(x) log1p(|x|)`` then z-score; heavy-tailed counts up
            to 1e8 land within a few units, values beyond the training range included, and it trained the best
            rankers on a real MSLR-WEB sample and on MSLR-like synthetic data, see ``docs/training.md``),
            ``"quantile"`` (each feature's training CDF, in [0, 1]), ``"zscore"`` or ``"none"`` (warns when the
            features span more than 1e3). NaN or infinite values are refused.

    Example:
        >>> dm = LetorDataModule(batch_size=8)
        >>> dm.setup("fit")
        >>> dm.num_features, len(dm.train_set), len(dm.val_set)
        (300, 161, 40)
        >>> [tuple(t.shape) for t in next(iter(dm.train_dataloader()))]
        [(8, 27, 300), (8, 27), (8, 27)]
    """

    def __init__(
        self,
        data_dir: str | None = None,
        *,
        train_file: str | None = None,
        test_file: str | None = None,
        val_file: str | None = None,
        fold: int = 1,
        val_fraction: float = 0.2,
        batch_size: int = 16,
        n_features: int | None = None,
        seed: int = 0,
        num_workers: int = 0,
        normalization: str = "log1p_zscore",
    ) -> None:
        super().__init__()
        hide_lightning_noise()  # for a script's own Trainer, as the command line does
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"Argument `normalization` must be one of {NORMALIZATIONS}, got {normalization!r}.")
        if not 0 <= val_fraction < 1:
            raise ValueError(f"Argument `val_fraction` must be in [0, 1), got {val_fraction}.")
        if batch_size < 1:
            raise ValueError(f"Argument `batch_size` must be a positive int, got {batch_size}.")
        self.data_dir = Path(data_dir) if data_dir is not None else LIGHTGBM_LAMBDARANK
        self.train_file, self.test_file, self.val_file, self.fold = train_file, test_file, val_file, fold
        self.val_fraction, self.batch_size, self.n_features = val_fraction, batch_size, n_features
        self.seed, self.num_workers = seed, num_workers
        self.normalization = normalization
        self._scaler = FeatureScaler(normalization)
        self._scaled: dict[str, TensorDataset] = {}
        self._splits: dict[str, TensorDataset] | None = None

    def _files(self) -> tuple[Path, Path | None, Path]:
        """``(train, validation or None, test)``: the given names, the rest from the folder's layout."""
        explicit = self.train_file is not None and self.test_file is not None
        layout = (None, None, None) if explicit else find_layout(self.data_dir, self.fold)
        train = self.data_dir / self.train_file if self.train_file is not None else layout[0]
        test = self.data_dir / self.test_file if self.test_file is not None else layout[2]
        val = self.data_dir / self.val_file if self.val_file is not None else layout[1]
        return train, val, test

    def _load(self) -> dict[str, TensorDataset]:
        """Read the files once; every split gets the same number of feature columns."""
        if self._splits is None:
            train_path, val_path, test_path = self._files()
            read = {"train": train_path, "test": test_path} | ({"val": val_path} if val_path is not None else {})
            data = {name: read_letor(path, n_features=self.n_features) for name, path in read.items()}
            for name, path in read.items():
                check_finite(data[name].tensors[0], data[name].tensors[2], str(path))
            width = max(d.tensors[0].shape[-1] for d in data.values())
            data = {name: _widen(d, width) for name, d in data.items()}
            if "val" in data:  # the split's own validation file: every training query trains
                self._val_queries = torch.zeros(0, dtype=torch.int64)
                self._splits = data
            else:
                train = data["train"]
                train_idx, val_idx = split_queries(len(train), self.val_fraction, self.seed)
                self._val_queries = val_idx
                self._splits = {
                    "train": TensorDataset(*(t[train_idx] for t in train.tensors)),
                    "val": TensorDataset(*(t[val_idx] for t in train.tensors)),
                    "test": data["test"],
                }
        return self._splits

    @property
    def num_features(self) -> int:
        """Feature columns of every split (reads the files on first use)."""
        return self._load()["train"].tensors[0].shape[-1]

    @property
    def val_queries(self) -> Tensor:
        """Indices (in file order) of the training file's queries held out for validation (none with a
        validation file)."""
        self._load()
        return self._val_queries

    @property
    def train_set(self) -> TensorDataset:
        return self._load()["train"]

    @property
    def val_set(self) -> TensorDataset:
        return self._load()["val"]

    @property
    def test_set(self) -> TensorDataset:
        return self._load()["test"]

    def setup(self, stage: str) -> None:
        self._load()

    def scaled(self, split: str) -> TensorDataset:
        """The ``"train"``, ``"val"`` or ``"test"`` split with scaled features, as the dataloaders give it.

        Fits the scaling on the training split first unless it is fitted or was restored from a checkpoint.

        Example:
            >>> dm = LetorDataModule(normalization="zscore")
            >>> features, _, mask = dm.scaled("train").tensors
            >>> round(features[mask].mean().item(), 4), round(features[mask].std().item(), 1)
            (0.0, 1.0)
        """
        if not self._scaler.fitted:
            features, _, mask = self._load()["train"].tensors
            self._scaler.fit(features, mask)
            self._scaled.clear()
        if split not in self._scaled:
            features, labels, mask = self._load()[split].tensors
            self._scaled[split] = TensorDataset(self._scaler(features, mask), labels, mask)
        return self._scaled[split]

    def state_dict(self) -> dict:
        """The fitted feature scaling (fitting it now if needed): what a checkpoint must carry to score new data."""
        self.scaled("train")
        return {"scaling": self._scaler.state_dict()}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the scaling fitted at training time (Lightning calls this when it loads a checkpoint)."""
        if "scaling" in state_dict:
            self._scaler.load_state_dict(state_dict["scaling"])
            self._scaled.clear()

    def _loader(self, data: TensorDataset, shuffle: bool) -> DataLoader:
        return DataLoader(
            data,
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.scaled("train"), shuffle=True)

    def val_dataloader(self) -> DataLoader | list:
        # an empty list tells Lightning to skip validation
        return self._loader(self.scaled("val"), shuffle=False) if len(self.val_set) else []

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.scaled("test"), shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.scaled("test"), shuffle=False)
