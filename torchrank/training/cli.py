"""``python -m torchrank.training {fit,validate,test}``: LightningCLI over :class:`MLPRanker` and
:class:`LetorDataModule`, configured by ``configs/train/<loss>.yaml``."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from torchrank.training._notices import NOISY_NOTICES, NOISY_WARNINGS, hide_lightning_noise
from torchrank.training.data import LetorDataModule
from torchrank.training.model import MLPRanker

__all__ = [
    "NOISY_NOTICES",
    "NOISY_WARNINGS",
    "RankingCLI",
    "default_threads",
    "hide_lightning_noise",
    "last_checkpoint",
    "main",
]


class RankingCLI(LightningCLI):
    """LightningCLI with the model's input width taken from the data, and one run folder per config file.

    Runs go to ``runs/<config file stem>/`` (``runs/neural_ndcg/lightning_logs/version_0/...``) unless
    ``--trainer.default_root_dir`` is given, so configs for different losses never share a folder. ``validate``,
    ``test`` and ``predict`` take ``--ckpt_path last``: the ``last.ckpt`` of the newest run in that folder (the last
    ``fit``), found before anything runs, so a second fit never leaves a stale checkpoint under ``version_0``.
    """

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.num_features", "model.num_features", apply_on="instantiate")
        parser.add_argument(
            "--threads",
            type=int | None,
            default=None,
            help="torch CPU threads (torch.set_num_threads); default: 1, or OMP_NUM_THREADS when set "
            "(see default_threads)",
        )

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        threads = config.get("threads")
        torch.set_num_threads(threads if threads is not None else default_threads())
        configs = config.get("config") or []
        if config.trainer.get("default_root_dir") is None and configs:
            config.trainer.default_root_dir = str(Path("runs") / Path(str(configs[-1])).stem)
        if self.subcommand in ("validate", "test", "predict") and config.get("ckpt_path") == "last":
            config.ckpt_path = str(last_checkpoint(Path(config.trainer.get("default_root_dir") or ".")))

    def after_fit(self) -> None:
        path = self.trainer.checkpoint_callback.last_model_path if self.trainer.checkpoint_callback else ""
        if path and self.trainer.is_global_zero:
            print(f"last checkpoint: {path}")


def default_threads() -> int:
    """CPU threads the CLI gives torch unless ``--threads`` says otherwise: ``OMP_NUM_THREADS`` when it is set, else 1.

    One thread, because the ranker's work comes in small pieces (a 300-128-64-1 MLP on 16 queries of 27 documents,
    a ``[B, N, N]`` NeuralSort matrix per batch) that extra threads split at more cost than they save: on the
    2-core VM of benchmarks/notes/training_threads.md (its figures), 10 epochs on the bundled data took longer with
    torch's default (one thread per core) than with one thread, with the same result; on a busy machine waiting
    threads also queue behind other processes. Larger models or batches may gain from more: ``--threads``.

    Example:
        >>> default_threads() == int(os.environ.get("OMP_NUM_THREADS", 1))
        True
    """
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def last_checkpoint(root: Path) -> Path:
    """``last.ckpt`` of the newest run under ``root`` (``lightning_logs/version_<n>/checkpoints/``, highest ``n``).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for n in (0, 2, 10):
        ...     (root / f"lightning_logs/version_{n}/checkpoints").mkdir(parents=True)
        ...     _ = (root / f"lightning_logs/version_{n}/checkpoints/last.ckpt").write_bytes(b"")
        >>> last_checkpoint(root).parent.parent.name
        'version_10'
    """
    found = []
    for path in root.glob("lightning_logs/version_*/checkpoints/last.ckpt"):
        version = path.parent.parent.name.removeprefix("version_")
        if version.isdigit():
            found.append((int(version), path))
    if not found:
        raise FileNotFoundError(
            f"--ckpt_path last: no lightning_logs/version_*/checkpoints/last.ckpt under {root}; run `fit` with the "
            "same config (and --trainer.default_root_dir) first, or pass the checkpoint's path."
        )
    return max(found)[1]


def main(args: list[str] | None = None, *, run: bool = True) -> RankingCLI:
    """Run the command line (``args`` as ``sys.argv[1:]``; None reads ``sys.argv``).

    With ``run=False`` nothing runs and ``args`` take no subcommand: the returned CLI holds the instantiated
    ``model``, ``datamodule`` and ``trainer``. Sets torch's CPU threads (``--threads``, :func:`default_threads`)
    and hides Lightning's :data:`NOISY_NOTICES` and :data:`NOISY_WARNINGS` (:func:`hide_lightning_noise`, as
    building a :class:`LetorDataModule` or :class:`MLPRanker` does for the Python API).
    """
    hide_lightning_noise()
    return RankingCLI(
        MLPRanker,
        LetorDataModule,
        subclass_mode_model=False,
        seed_everything_default=0,
        args=args,
        run=run,
        save_config_kwargs={"overwrite": True},
    )
