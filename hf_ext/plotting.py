"""Plots of results that people compare, written as PNG next to the numbers."""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _finish(fig, ax, path: Path, title: str, xlabel: str, ylabel: str) -> Path:
    """Label, grid and legend the axes, save the figure as a PNG at ``path`` and free it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def loss_curve(log_history: Sequence[Mapping[str, Any]], key: str = "loss") -> list[tuple[int, float]]:
    """(step, value) pairs of ``key`` from a ``Trainer``'s ``state.log_history``."""
    return [(int(entry["step"]), float(entry[key])) for entry in log_history if key in entry]


def plot_curves(
    curves: Mapping[str, Sequence[tuple[int, float]]], path: str | Path, title: str, ylabel: str = "training loss"
) -> Path:
    """One line per named curve of (step, value) pairs, saved as a PNG at ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, points in curves.items():
        if points:
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, label=name, marker="." if len(points) < 30 else None)
    return _finish(fig, ax, path, title, "step", ylabel)


def plot_grouped_bars(
    groups: Mapping[str, Mapping[str, float]], path: str | Path, title: str, ylabel: str, log_scale: bool = False
) -> Path:
    """Bars of ``groups[series][category]`` side by side per category, saved as a PNG at ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    categories = list(dict.fromkeys(c for values in groups.values() for c in values))
    width = 0.8 / max(1, len(groups))
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(categories) + 2), 4))
    for i, (series, values) in enumerate(groups.items()):
        positions = [j + i * width for j in range(len(categories))]
        ax.bar(positions, [values.get(c, 0.0) for c in categories], width=width, label=series)
    ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(categories))])
    ax.set_xticklabels(categories, rotation=30, ha="right", fontsize=8)
    if log_scale:
        ax.set_yscale("log")
    return _finish(fig, ax, path, title, "", ylabel)


def plot_histograms(
    samples: Mapping[str, Sequence[float]], path: str | Path, title: str, xlabel: str, bins: int = 80
) -> Path:
    """Overlaid histograms of named samples on shared bins, log-scaled counts so that tails show."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    values = [v for sample in samples.values() for v in sample]
    edges = np.linspace(min(values), max(values), bins + 1) if values else bins
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, sample in samples.items():
        ax.hist(sample, bins=edges, histtype="step", linewidth=1.5, label=name)
    ax.set_yscale("log")
    return _finish(fig, ax, path, title, xlabel, "count")


def plot_labelled_points(
    panels: Mapping[str, Sequence[tuple[float, float, str]]], path: str | Path, title: str, xlabel: str
) -> Path:
    """One panel per y quantity of labelled ``(x, y, label)`` points joined in order, saved as a PNG.

    For trade-offs such as base-model loss vs downstream score, one point per setting.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, (ylabel, points) in zip(axes[0], panels.items(), strict=True):
        xs, ys, labels = zip(*points, strict=True) if points else ((), (), ())
        ax.plot(xs, ys, marker="o", color="tab:blue")
        for x, y, label in zip(xs, ys, labels, strict=True):
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_bands(
    panels: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    path: str | Path,
    title: str,
    xlabel: str,
    ylabel: str,
    ncols: int = 3,
) -> Path:
    """A grid of panels; in each, every series' runs (one list per seed) as a mean line with a +-1 std band."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.5 * nrows), squeeze=False)
    for ax, (panel, series) in zip(axes.flat[: len(panels)], panels.items(), strict=True):
        for name, runs in series.items():
            values = np.asarray(runs, dtype=float)
            mean, std = values.mean(0), values.std(0)
            steps = np.arange(1, values.shape[1] + 1)
            ax.plot(steps, mean, label=name)
            ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
