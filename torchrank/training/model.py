"""A neural ranker: an MLP scoring each document, trained with any torchrank loss."""

from __future__ import annotations

from collections.abc import Sequence

import lightning as L
import torch
from torch import Tensor, nn

from torchrank.metrics import NDCG
from torchrank.training._notices import hide_lightning_noise

__all__ = ["EVAL_K", "MLPRanker", "ndcg_metric"]

#: Cut-offs of the logged NDCG (``val_ndcg@5``, ``test_ndcg@5``, ...).
EVAL_K = (1, 3, 5, 10)

Batch = tuple[Tensor, Tensor, Tensor]


def ndcg_metric(k: int | Sequence[int] = EVAL_K, *, ties: str = "average") -> NDCG:
    """NDCG@k as LightGBM counts it: gain ``2^y - 1``, log2 discount, 1 for a query whose ideal DCG is 0.

    Tied scores count with their expected value over the orders of the tie (``ties="average"``);
    ``ties="first"`` keeps input order, as LightGBM's stable sort does.

    Example:
        >>> metric = ndcg_metric(5)
        >>> metric.update(torch.tensor([[0.2, 0.9, 0.1]]), torch.tensor([[2.0, 1.0, 0.0]]))
        >>> metric.update(torch.tensor([[0.5, 0.4]]), torch.tensor([[0.0, 0.0]]))  # no relevant document: 1
        >>> metric.compute()
        tensor(0.8984)
    """
    k = list(k) if isinstance(k, Sequence) else k
    return NDCG(k=k, gain="exponential", empty_target_action="pos", ties=ties)


def mlp(num_features: int, hidden_sizes: Sequence[int], dropout: float) -> nn.Sequential:
    """``Linear -> ReLU -> Dropout`` per hidden size, then a linear score."""
    layers: list[nn.Module] = []
    width = num_features
    for size in hidden_sizes:
        layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
        width = size
    layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


class MLPRanker(L.LightningModule):
    """Scores each document with an MLP over its features; trains on whole queries with a listwise loss.

    Validation and test log NDCG@{1,3,5,10} of :func:`ndcg_metric` over every query of the split
    (``val_ndcg@5``, ``test_ndcg@5``, ...); training logs ``train_loss``.

    Args:
        loss: A ranking loss module, called as ``loss(scores [B, N], labels [B, N], mask [B, N])``, e.g.
            ``torchrank.losses.NeuralNDCGLoss()``.
        num_features: Input features per document (the LightningCLI links it to the data's).
        hidden_sizes: Widths of the hidden layers.
        dropout: Dropout after each hidden layer.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.

    Example:
        >>> class Pointwise(nn.Module):  # any loss(scores, labels, mask) -> scalar
        ...     def forward(self, scores, labels, mask):
        ...         return ((scores - labels)[mask] ** 2).mean()
        >>> _ = torch.manual_seed(0)
        >>> model = MLPRanker(Pointwise(), num_features=3, hidden_sizes=[8])
        >>> model(torch.rand(2, 4, 3)).shape  # [queries, documents] scores
        torch.Size([2, 4])
    """

    def __init__(
        self,
        loss: nn.Module,
        *,
        num_features: int,
        hidden_sizes: Sequence[int] = (128, 64),
        dropout: float = 0.1,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__()
        hide_lightning_noise()  # for a script's own Trainer, as the command line does
        # the loss is a module (saved in the state dict); the CLI config records its class and arguments
        self.save_hyperparameters(ignore=["loss"])
        self.loss = loss
        self.net = mlp(num_features, hidden_sizes, dropout)
        self.val_ndcg = ndcg_metric()
        self.test_ndcg = ndcg_metric()

    def forward(self, features: Tensor) -> Tensor:
        """Scores ``[..., N]`` of documents ``[..., N, num_features]``."""
        return self.net(features).squeeze(-1)

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        features, labels, mask = batch
        loss = self.loss(self(features), labels, mask)
        self.log("train_loss", loss, prog_bar=True, on_step=False, on_epoch=True, batch_size=len(labels))
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        features, labels, mask = batch
        self.val_ndcg.update(self(features), labels, mask=mask)

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        features, labels, mask = batch
        self.test_ndcg.update(self(features), labels, mask=mask)

    def predict_step(self, batch: Batch, batch_idx: int) -> Tensor:
        """Scores ``[B, N]`` of a batch's documents, NaN at padding (``trainer.predict``)."""
        features, _, mask = batch
        return self(features).masked_fill(~mask, float("nan"))

    def _log_ndcg(self, prefix: str, metric: NDCG) -> None:
        values = metric.compute()  # over all queries of the epoch (synced across processes)
        for k, value in zip(EVAL_K, values, strict=True):  # the progress bar shows val_ndcg@5 and train_loss
            self.log(f"{prefix}_ndcg@{k}", value, prog_bar=prefix == "val" and k == 5)
        metric.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_ndcg("val", self.val_ndcg)

    def on_test_epoch_end(self) -> None:
        self._log_ndcg("test", self.test_ndcg)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
