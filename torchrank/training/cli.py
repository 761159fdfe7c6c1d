"""``python -m torchrank.training {fit,validate,test}``: LightningCLI over :class:`MLPRanker` and
:class:`LetorDataModule`, configured by ``configs/train/<loss>.yaml``."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from torchrank.training.data import LetorDataModule
from torchrank.training.model import MLPRanker

__all__ = ["RankingCLI", "main"]


class RankingCLI(LightningCLI):
    """LightningCLI with the model's input width taken from the data, and one run folder per config file.

    Runs go to ``runs/<config file stem>/`` (``runs/neural_ndcg/lightning_logs/version_0/...``) unless
    ``--trainer.default_root_dir`` is given, so configs for different losses never share a folder.
    """

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.num_features", "model.num_features", apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        configs = config.get("config") or []
        if config.trainer.get("default_root_dir") is None and configs:
            config.trainer.default_root_dir = str(Path("runs") / Path(str(configs[-1])).stem)

    def after_fit(self) -> None:
        path = self.trainer.checkpoint_callback.last_model_path if self.trainer.checkpoint_callback else ""
        if path and self.trainer.is_global_zero:
            print(f"last checkpoint: {path}")


def main(args: list[str] | None = None, *, run: bool = True) -> RankingCLI:
    """Run the command line (``args`` as ``sys.argv[1:]``; None reads ``sys.argv``).

    With ``run=False`` nothing runs and ``args`` take no subcommand: the returned CLI holds the instantiated
    ``model``, ``datamodule`` and ``trainer``.
    """
    return RankingCLI(
        MLPRanker,
        LetorDataModule,
        subclass_mode_model=False,
        seed_everything_default=0,
        args=args,
        run=run,
        save_config_kwargs={"overwrite": True},
    )
