"""Per-feature scaling of LTR features, fitted on the training documents and applied to every split.

Raw web-search features (counts, PageRank, lengths) span 0 to 1e8 and more: an MLP on them starts with scores
of that size, and every listwise loss then sees a hard sort with no useful gradient (issue 21: test NDCG at
random level with raw MSLR features). The scalers:

- ``"zscore"``: ``(x - mean) / std`` per feature;
- ``"log1p_zscore"``: ``sign(x) log1p(|x|)`` first (tames heavy tails, keeps signs), then z-score;
- ``"quantile"``: the feature's empirical CDF on the training documents, in [0, 1] (ties get their mid-rank);
- ``"none"``: features as read.

Statistics come from the real (unpadded) training documents only. A feature constant there (std 0) is centred
and not divided (it reads 0 on training data, its offset elsewhere). NaN or infinite feature values are refused
by :func:`check_finite`, whatever the scaling.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

__all__ = ["NORMALIZATIONS", "FeatureScaler", "check_finite"]

NORMALIZATIONS = ("none", "zscore", "log1p_zscore", "quantile")

#: points of the stored empirical CDF per feature (``"quantile"``): its resolution is 1 / this
QUANTILE_POINTS = 1001

#: ``"none"`` warns when the training features span more than this (max - min over all features)
SPAN_WARNING = 1e3


def check_finite(features: Tensor, mask: Tensor, where: str) -> None:
    """Refuse NaN or infinite values at real documents, naming the first bad feature (1-based, as in the file).

    Example:
        >>> check_finite(torch.tensor([[[1.0, float("nan")]]]), torch.tensor([[True]]), "rank.train")
        Traceback (most recent call last):
        ...
        ValueError: rank.train: feature 2 (the file's index) has NaN or inf at 1 documents; clean or impute them first.
    """
    bad = ~torch.isfinite(features) & mask.unsqueeze(-1)
    if bool(bad.any()):
        column = int(bad.any(0).any(0).nonzero()[0])
        count = int(bad[..., column].sum())
        raise ValueError(
            f"{where}: feature {column + 1} (the file's index) has NaN or inf at {count} documents; clean or impute "
            "them first."
        )


def signed_log1p(x: Tensor) -> Tensor:
    """``sign(x) log1p(|x|)``: log-compresses both tails and keeps 0 at 0.

    Example:
        >>> signed_log1p(torch.tensor([-99.0, 0.0, 9.0]))
        tensor([-4.6052,  0.0000,  2.3026])
    """
    return torch.sign(x) * torch.log1p(x.abs())


class FeatureScaler:
    """A fitted per-feature scaling (see the module docstring); its state is a dict of tensors for checkpoints.

    Example:
        >>> features = torch.tensor([[[1.0, 5.0], [3.0, 5.0]]])  # one query, two documents, two features
        >>> mask = torch.tensor([[True, True]])
        >>> scaler = FeatureScaler("zscore").fit(features, mask)
        >>> scaler(features, mask)  # the constant second feature is centred, not divided
        tensor([[[-1.,  0.],
                 [ 1.,  0.]]])
    """

    def __init__(self, normalization: str) -> None:
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"Argument `normalization` must be one of {NORMALIZATIONS}, got {normalization!r}.")
        self.normalization = normalization
        self.state: dict[str, Tensor] = {}
        self.fitted = False

    def fit(self, features: Tensor, mask: Tensor) -> FeatureScaler:
        """Fit on the real documents ``features[mask]`` (``[Q, N, F]`` with ``mask [Q, N]``)."""
        docs = features[mask].double()  # [D, F]; float64 sums: millions of documents
        if self.normalization == "none":
            _warn_if_wide(docs)
        elif self.normalization == "quantile":
            self.state = {"quantiles": _quantiles(docs)}
        else:
            if self.normalization == "log1p_zscore":
                docs = signed_log1p(docs)
            std = docs.std(0, correction=0)
            self.state = {"mean": docs.mean(0).float(), "scale": torch.where(std > 0, std, 1).float()}
        self.fitted = True
        return self

    def __call__(self, features: Tensor, mask: Tensor) -> Tensor:
        """Scaled ``features`` (float32), 0 at padded documents."""
        if not self.fitted:
            raise RuntimeError("FeatureScaler: call fit() (or load a fitted state) before scaling.")
        if self.normalization == "none":
            return features
        x = features.float()
        if self.normalization == "quantile":
            x = _cdf(x, self.state["quantiles"])
        else:
            if self.normalization == "log1p_zscore":
                x = signed_log1p(x)
            x = (x - self.state["mean"]) / self.state["scale"]
        return torch.where(mask.unsqueeze(-1), x, 0)

    def state_dict(self) -> dict:
        return {"normalization": self.normalization, **self.state}

    def load_state_dict(self, state: dict) -> None:
        if state.get("normalization") != self.normalization:
            raise ValueError(
                f"The checkpoint's features were scaled with normalization={state.get('normalization')!r}, this "
                f"data module uses {self.normalization!r}: pass --data.normalization {state.get('normalization')}."
            )
        self.state = {name: value for name, value in state.items() if name != "normalization"}
        self.fitted = True


def _warn_if_wide(docs: Tensor) -> None:
    low, high = float(docs.min()), float(docs.max())
    if high - low > SPAN_WARNING:
        warnings.warn(
            f"Training features span [{low:.4g}, {high:.4g}] and normalization='none': an MLP on raw features of this "
            "range starts with scores the losses cannot learn from. Pass normalization='log1p_zscore' "
            "(--data.normalization log1p_zscore) or 'zscore'.",
            UserWarning,
            stacklevel=3,
        )


def _quantiles(docs: Tensor) -> Tensor:
    """The order statistics at probabilities ``(j + 1/2) / QUANTILE_POINTS`` of each feature ``[F, QUANTILE_POINTS]``
    (float32): every document owns an equal share of the points, so a value's mid-rank among them is its mid-rank
    among the training documents to within ``1 / QUANTILE_POINTS``."""
    ordered = docs.sort(0).values  # [D, F]
    probabilities = (torch.arange(QUANTILE_POINTS, dtype=torch.float64) + 0.5) / QUANTILE_POINTS
    at = (probabilities * len(ordered)).long()
    return ordered[at].T.contiguous().float()


def _cdf(x: Tensor, quantiles: Tensor) -> Tensor:
    """Each value's empirical CDF from the stored quantiles: its mid-rank among them, in [0, 1]."""
    shape = x.shape
    values = x.reshape(-1, shape[-1]).T.contiguous()  # [F, M]
    below = torch.searchsorted(quantiles, values, side="left")
    at_or_below = torch.searchsorted(quantiles, values, side="right")
    u = (below + at_or_below).float() / (2 * quantiles.shape[1])
    return u.T.reshape(shape)
