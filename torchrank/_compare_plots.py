"""``torchrank compare --plot`` and :func:`torchrank.compare.plot_comparison`: per-query differences as sorted bars
and per-run distributions as box plots (matplotlib, imported when a figure is drawn)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from torchrank._compare_render import _letter, _lower_is_better
from torchrank._extras import require

_DPI = 100
_PANEL = (3.6, 2.4)  # inches per measure (width) and per row of panels (height)
_BETTER, _WORSE, _EVEN = "#2e7d32", "#c62828", "#9e9e9e"


def _figure_class() -> type:
    return require("matplotlib.figure", "Plotting").Figure


def _plot_inputs(scores: Tensor, names: Sequence[str], measures: Sequence[str]) -> Tensor:
    """``scores`` as a float64 CPU tensor ``[R, K, Q]``, checked against the names of runs and measures."""
    scores = torch.as_tensor(scores).detach().to("cpu", torch.float64)
    if scores.dim() != 3:
        raise ValueError(f"`scores` must be [runs, measures, queries], got shape {tuple(scores.shape)}")
    if scores.shape[0] != len(names) or scores.shape[1] != len(measures):
        raise ValueError(
            f"`scores` {tuple(scores.shape)} must have one row per run ({len(names)}) and per measure ({len(measures)})"
        )
    return scores


def _draw_differences(axes, diff: Tensor, measure: str, title: str) -> None:
    """Sorted per-query differences as bars: green where the run is better, red where worse (measure's direction)."""
    lower = _lower_is_better_name(measure)
    ordered = diff.sort(descending=not lower).values
    better = ordered < 0 if lower else ordered > 0
    worse = ordered > 0 if lower else ordered < 0
    colors = [_BETTER if b else _WORSE if w else _EVEN for b, w in zip(better.tolist(), worse.tolist(), strict=True)]
    axes.bar(range(ordered.numel()), ordered.tolist(), width=1.0, color=colors, linewidth=0)
    axes.axhline(0.0, color="black", linewidth=0.6)
    wins, losses = int(better.sum()), int(worse.sum())
    counts = f"mean {float(diff.mean()):+.4f}; better {wins}, worse {losses}, same {diff.numel() - wins - losses}"
    axes.set_title(f"{title}\n{counts}", fontsize=7.5)  # in the title: the bars never hide it
    axes.set_xlim(-0.5, max(ordered.numel(), 1) - 0.5)
    axes.set_xticks([])
    axes.tick_params(labelsize=7)


def _lower_is_better_name(measure: str) -> bool:
    try:
        return _lower_is_better(measure)
    except ValueError:  # a name outside the grammar (a caller's own label): higher is better
        return False


def _draw_distribution(axes, values: Tensor, names: Sequence[str], measure: str) -> None:
    """One box per run (quartiles, whiskers at 1.5 IQR, outliers as dots) and its mean as a diamond."""
    axes.boxplot([v.tolist() for v in values], widths=0.6, flierprops={"markersize": 2})
    axes.scatter(range(1, len(names) + 1), values.mean(-1).tolist(), marker="D", s=14, color="#1565c0", zorder=3)
    axes.set_xticks(range(1, len(names) + 1), [f"({_letter(i)})" for i in range(len(names))], fontsize=7)
    axes.set_title(f"{measure} per query", fontsize=8)
    axes.tick_params(labelsize=7)


def plot_differences(
    scores: Tensor, names: Sequence[str], measures: Sequence[str], *, baseline: int = 0, figure: Any = None
) -> Any:
    """Per-query differences of every run to the baseline, as sorted bar charts: a column per measure, a row per run.

    Each bar is one query's ``run - baseline``, sorted; green where the run is better (in the direction of the
    measure: smaller is better for ``mean_rank`` and ``frp``), red where worse, grey where equal; each panel's
    title gives the mean difference and the counts. Needs matplotlib (``pip install 'torchrank[plot]'``).

    Args:
        scores: Per-query scores ``[runs, measures, queries]`` (as ``compare`` computes them).
        names: Run names, one per row of ``scores``.
        measures: Measure names, one per column of ``scores``.
        baseline: Index of the run the others are compared with.
        figure: A ``matplotlib.figure.Figure`` to draw into (default: a new one sized to the grid).

    Returns:
        The figure; ``figure.savefig(path)`` writes it.

    Example:
        >>> import torch
        >>> scores = torch.rand(3, 2, 20)  # 3 runs, 2 measures, 20 queries
        >>> fig = plot_differences(scores, ["bm25", "dense", "hybrid"], ["map", "ndcg@10"])
        >>> len(fig.axes), [round(float(x), 1) for x in fig.get_size_inches()]
        (4, [7.2, 4.8])
    """
    scores = _plot_inputs(scores, names, measures)
    others = [r for r in range(len(names)) if r != baseline]
    if not 0 <= baseline < len(names) or not others:
        raise ValueError(f"need a baseline among the {len(names)} runs and at least one other run")
    if figure is None:
        figure = _figure_class()(figsize=(_PANEL[0] * len(measures), _PANEL[1] * len(others)), layout="constrained")
    grid = figure.subplots(len(others), len(measures), squeeze=False)
    for row, r in enumerate(others):
        for k, measure in enumerate(measures):
            title = f"{measure}: ({_letter(r)}) {names[r]} - ({_letter(baseline)}) {names[baseline]}"
            _draw_differences(grid[row][k], scores[r, k] - scores[baseline, k], measure, title)
    return figure


def plot_distributions(scores: Tensor, names: Sequence[str], measures: Sequence[str], *, figure: Any = None) -> Any:
    """Each run's per-query values of each measure as box plots (a panel per measure, a box per run, the mean as
    a diamond); runs are labelled ``(a)``, ``(b)``, ... as in ``compare``'s tables.

    Example:
        >>> import torch
        >>> fig = plot_distributions(torch.rand(2, 3, 30), ["bm25", "dense"], ["map", "P@10", "mrr"])
        >>> len(fig.axes)
        3
    """
    scores = _plot_inputs(scores, names, measures)
    if figure is None:
        figure = _figure_class()(figsize=(_PANEL[0] * len(measures), _PANEL[1]), layout="constrained")
    grid = figure.subplots(1, len(measures), squeeze=False)
    for k, measure in enumerate(measures):
        _draw_distribution(grid[0][k], scores[:, k], names, measure)
    return figure


def plot_comparison(scores: Tensor, names: Sequence[str], measures: Sequence[str], *, baseline: int = 0) -> Any:
    """:func:`plot_differences` above :func:`plot_distributions` in one figure (``torchrank compare --plot``).

    The figure is ``3.6`` inches wide per measure and ``2.4`` high per row (one row per compared run, one for the
    distributions), drawn at 100 dpi by ``--plot``: 360 x 240 pixels per panel.

    Example:
        >>> import torch
        >>> fig = plot_comparison(torch.rand(3, 2, 25), ["a", "b", "c"], ["map", "mrr"])
        >>> [round(float(x), 1) for x in fig.get_size_inches()], len(fig.axes)
        ([7.2, 7.2], 6)
    """
    scores = _plot_inputs(scores, names, measures)
    rows = len(names) - 1
    figure = _figure_class()(figsize=(_PANEL[0] * len(measures), _PANEL[1] * (rows + 1)), layout="constrained")
    top, bottom = figure.subfigures(2, 1, height_ratios=[rows, 1])
    plot_differences(scores, names, measures, baseline=baseline, figure=top)
    plot_distributions(scores, names, measures, figure=bottom)
    legend = ", ".join(f"({_letter(i)}) {n}" for i, n in enumerate(names))
    figure.suptitle(f"{scores.shape[-1]} queries; {legend}", fontsize=8)
    return figure
