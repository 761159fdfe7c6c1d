"""``python -m torchrank.training {fit,validate,test}``: LightningCLI over :class:`MLPRanker` and
:class:`LetorDataModule`, configured by ``configs/train/<loss>.yaml``."""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from torchrank.training.data import LetorDataModule
from torchrank.training.model import MLPRanker

__all__ = [
    "NOISY_NOTICES",
    "NOISY_WARNINGS",
    "RankingCLI",
    "default_threads",
    "last_checkpoint",
    "main",
    "quiet_lightning",
]

#: Lightning's info lines that the CLI drops (message prefixes): device probes that say nothing on a CPU run, and
#: advertisements for Lightning's cloud services.
NOISY_NOTICES = ("GPU available:", "TPU available:", "HPU available:", "💡 Tip:")
#: Lightning's warnings that the CLI drops (regular expressions matched at the message's start), each harmless here:
#: the CSV logger is the intended one; a deprecation inside Lightning itself; a test of a fit's checkpoint writes
#: to a new run folder; the data are tensors in memory, so loader worker processes would only add start-up time.
NOISY_WARNINGS = (
    r"Starting from v1\.9\.0, `tensorboardX` has been removed",
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    r"The dirpath has changed from",
    r"The '\w+_dataloader' does not have many workers",
)


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
    2-core VM of benchmarks/notes/training_threads.md, 10 epochs on the bundled data took 5.8x longer with torch's
    default (one thread per core) than with one thread (11x in issue 21), with the same result; on a busy machine
    waiting threads also queue behind other processes. Larger models or batches may gain from more: ``--threads``.

    Example:
        >>> default_threads() == int(os.environ.get("OMP_NUM_THREADS", 1))
        True
    """
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Within it, Lightning's :data:`NOISY_NOTICES` and :data:`NOISY_WARNINGS` are not shown; its other messages,
    and every warning of torchrank, torch or the user's code, are.

    Example:
        >>> with quiet_lightning():
        ...     logging.getLogger("lightning.pytorch.utilities.rank_zero").info("GPU available: False, used: False")
    """
    loggers = [logging.getLogger(f"lightning.{part}.utilities.rank_zero") for part in ("pytorch", "fabric")]
    drop = _DropNotices()
    for logger in loggers:
        logger.addFilter(drop)
    try:
        with warnings.catch_warnings():
            for pattern in NOISY_WARNINGS:
                warnings.filterwarnings("ignore", message=pattern)
            yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)


class _DropNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(NOISY_NOTICES)


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
    and hides Lightning's :data:`NOISY_NOTICES` and :data:`NOISY_WARNINGS` while it runs (:func:`quiet_lightning`).
    """
    with quiet_lightning():
        return RankingCLI(
            MLPRanker,
            LetorDataModule,
            subclass_mode_model=False,
            seed_everything_default=0,
            args=args,
            run=run,
            save_config_kwargs={"overwrite": True},
        )
