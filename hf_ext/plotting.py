"""Plots of results that people compare, written as PNG next to the numbers, all in one style.

The style, so that every plot reads the same way:

- step and round axes show integer ticks only;
- numeric x ticks are few and show their plain values (no "1e-6+7.61966" offset text colliding with the
  axis label), so that labels never overlap; categorical ones are rotated;
- a grid of panels is never wider than its panels (one panel is one panel wide), and a log y axis is set before
  the layout is computed, so that its tick labels and the axis label fit;
- series are drawn under the names the caller passes (``names={"mezo": "MeZO"}``), else under their keys: the
  methods' spellings belong to the code that runs them (the recipes'), not to this module;
- wherever several seeds exist, the spread is drawn: a +-1 std band around a mean curve, or
  +-1 std error bars around a mean point (sample std, as the benchmarks report it).

Every ``plot_*`` function saves its PNG and returns the :class:`~matplotlib.figure.Figure`, so that
callers and tests can read back what was drawn. Figures are built without ``pyplot``: nothing is
kept in a global figure registry, and no display backend is needed.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

# At most this many intervals between numeric x ticks: labels of up to 9 characters then fit a 4-inch axis.
MAX_NUMERIC_TICKS = 4
DPI = 120


def _shown(key: str, names: Mapping[str, str] | None) -> str:
    """How ``key`` is written in a plot: the caller's ``names[key]``, or ``key`` itself if it has none."""
    return key if names is None else names.get(key, key)


def mean_and_std(runs: Sequence[Sequence[float]] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over the first axis (seeds) and the sample standard deviation (0 for a single seed)."""
    values = np.asarray(runs, dtype=float)
    std = values.std(0, ddof=1) if len(values) > 1 else np.zeros(values.shape[1:])
    return values.mean(0), std


def loss_curve(log_history: Sequence[Mapping[str, Any]], key: str = "loss") -> list[tuple[int, float]]:
    """(step, value) pairs of ``key`` from a ``Trainer``'s ``state.log_history``."""
    return [(int(entry["step"]), float(entry[key])) for entry in log_history if key in entry]


def _figure(nrows: int = 1, ncols: int = 1, panel_size: tuple[float, float] = (6, 4)) -> tuple[Figure, np.ndarray]:
    figure = Figure(figsize=(panel_size[0] * ncols, panel_size[1] * nrows))
    FigureCanvasAgg(figure)
    return figure, figure.subplots(nrows, ncols, squeeze=False)


def _panel_grid(count: int, ncols: int, panel_size: tuple[float, float] = (4.5, 3.5)) -> tuple[Figure, list[Axes]]:
    """A figure of ``count`` panels, ``ncols`` to a row (fewer when there are fewer panels); the panels' axes, in
    order. The grid's cells left over in the last row are hidden."""
    ncols = max(1, min(ncols, count))
    figure, axes = _figure(-(-count // ncols), ncols, panel_size)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return figure, list(axes.flat[:count])


def _log_y(ax: Axes) -> None:
    """A log y axis labelled with plain numbers (1, 10, 100; not 10^0 and 9x10^-1). Data within one decade gets a
    few evenly spaced ticks (0.9, 1, 1.1, ...), where a log axis would label one or two."""
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    if high / low < 10:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=MAX_NUMERIC_TICKS + 1))
        ax.yaxis.set_minor_locator(NullLocator())
    else:
        ax.yaxis.set_major_locator(LogLocator())
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(plain)


def _integer_steps(ax: Axes) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _plain_numeric_ticks(ax: Axes) -> None:
    """Few x ticks, labelled with their values: no "1e-6+7.61966" offset text that collides with the axis label."""
    ax.xaxis.set_major_locator(MaxNLocator(nbins=MAX_NUMERIC_TICKS))
    ax.ticklabel_format(axis="x", useOffset=False)
    if ax.get_yscale() == "linear":
        ax.ticklabel_format(axis="y", useOffset=False)


def _label(ax: Axes, xlabel: str, ylabel: str, title: str = "") -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)


def _mean_band(ax: Axes, steps: Sequence[int], runs: Sequence[Sequence[float]], label: str) -> None:
    mean, std = mean_and_std(runs)
    ax.plot(steps, mean, label=label)
    ax.fill_between(steps, mean - std, mean + std, alpha=0.2)


def _save(figure: Figure, path: str | Path) -> Figure:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    return figure


def _save_step_axes(figure: Figure, ax, title: str, ylabel: str, path: str | Path) -> Figure:
    """Finish one panel of curves over training steps (integer step axis, labels, title, legend) and save it."""
    _integer_steps(ax)
    _label(ax, "step", ylabel)
    ax.set_title(title)
    ax.legend()
    return _save(figure, path)


def plot_curves(
    curves: Mapping[str, Sequence[tuple[int, float]]],
    path: str | Path,
    title: str,
    ylabel: str = "training loss",
    *,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """One line per named curve of (step, value) pairs on an integer step axis, saved as a PNG at ``path``."""
    figure, axes = _figure()
    ax = axes[0, 0]
    for name, points in curves.items():
        if points:
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, label=_shown(name, names), marker="." if len(points) < 30 else None)
    return _save_step_axes(figure, ax, title, ylabel, path)


def plot_seed_curves(
    curves: Mapping[str, Sequence[Sequence[tuple[int, float]]]],
    path: str | Path,
    title: str,
    ylabel: str = "training loss",
    *,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """Per named series, its runs (one curve of (step, value) pairs per seed, logged at the same steps) as a
    mean line with a +-1 std band on an integer step axis, saved as a PNG at ``path``."""
    figure, axes = _figure()
    ax = axes[0, 0]
    for name, runs in curves.items():
        steps = [step for step, _ in runs[0]]
        if any([step for step, _ in run] != steps for run in runs):
            raise ValueError(f"plot_seed_curves: the runs of {name!r} must be logged at the same steps")
        _mean_band(ax, steps, [[value for _, value in run] for run in runs], _shown(name, names))
    return _save_step_axes(figure, ax, title, ylabel, path)


def plot_grouped_bars(
    groups: Mapping[str, Mapping[str, float]],
    path: str | Path,
    title: str,
    ylabel: str,
    log_scale: bool = False,
    *,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """Bars of ``groups[series][category]`` side by side per category, saved as a PNG at ``path``."""
    categories = list(dict.fromkeys(c for values in groups.values() for c in values))
    width = 0.8 / max(1, len(groups))
    figure, axes = _figure(panel_size=(max(6, 0.7 * len(categories) + 2), 4))
    ax = axes[0, 0]
    for i, (series, values) in enumerate(groups.items()):
        positions = [j + i * width for j in range(len(categories))]
        ax.bar(positions, [values.get(c, 0.0) for c in categories], width=width, label=_shown(series, names))
    ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(categories))])
    ax.set_xticklabels(categories, rotation=30, ha="right", fontsize=8)
    if log_scale:
        ax.set_yscale("log")
    _label(ax, "", ylabel)
    ax.set_title(title)
    ax.legend()
    return _save(figure, path)


def plot_histograms(
    samples: Mapping[str, Sequence[float]],
    path: str | Path,
    title: str,
    xlabel: str,
    bins: int = 80,
    *,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """Overlaid histograms of named samples on shared bins, log-scaled counts so that tails show."""
    values = [v for sample in samples.values() for v in sample]
    edges = np.linspace(min(values), max(values), bins + 1) if values else bins
    figure, axes = _figure()
    ax = axes[0, 0]
    for name, sample in samples.items():
        ax.hist(sample, bins=edges, histtype="step", linewidth=1.5, label=_shown(name, names))
    ax.set_yscale("log")
    _plain_numeric_ticks(ax)
    _label(ax, xlabel, "count")
    ax.set_title(title)
    ax.legend()
    return _save(figure, path)


def plot_labelled_points(
    panels: Mapping[str, Sequence[tuple[str, Sequence[float], Sequence[float]]]],
    path: str | Path,
    title: str,
    xlabel: str,
) -> Figure:
    """One panel per y quantity of labelled points ``(label, x per seed, y per seed)`` joined in order.

    For trade-offs such as base-model loss vs downstream score, one point per setting, told apart by
    colour and a legend (text next to nearby points would overlap): drawn at the mean over seeds, with
    +-1 std error bars in x and y when there are several seeds.
    """
    figure, axes = _figure(1, len(panels), panel_size=(4.5, 4))
    for ax, (ylabel, points) in zip(axes[0], panels.items(), strict=True):
        several_seeds = any(len(x) > 1 for _, x, _ in points)
        means = []
        for label, x, y in points:
            (x_mean, y_mean), (x_std, y_std) = mean_and_std(np.column_stack([x, y]))
            err = {"xerr": x_std, "yerr": y_std} if several_seeds else {}
            ax.errorbar([x_mean], [y_mean], **err, marker="o", capsize=3, label=label, zorder=2)
            means.append((x_mean, y_mean))
        ax.plot(*zip(*means, strict=True), color="0.6", linewidth=1, zorder=1)
        _plain_numeric_ticks(ax)
        _label(ax, xlabel, ylabel)
        ax.legend(fontsize=8)
    figure.suptitle(title)
    return _save(figure, path)


def plot_bands(
    panels: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    path: str | Path,
    title: str,
    xlabel: str,
    ylabel: str,
    ncols: int = 3,
    log_y: bool = False,
    *,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """A grid of panels; in each, every series' runs (one list per seed, indexed by round from 1) as a mean
    line with a +-1 std band; on a log y axis with ``log_y`` (wealth, which compounds)."""
    figure, axes = _panel_grid(len(panels), ncols)
    for ax, (panel, series) in zip(axes, panels.items(), strict=True):
        for name, runs in series.items():
            _mean_band(ax, np.arange(1, len(runs[0]) + 1), runs, _shown(name, names))
        _integer_steps(ax)
        if log_y:
            _log_y(ax)
        _label(ax, xlabel, ylabel, panel)
    axes[0].legend(fontsize=7)
    figure.suptitle(title)
    return _save(figure, path)


def plot_line_panels(
    panels: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]],
    path: str | Path,
    title: str,
    xlabel: str,
    ylabel: str,
    ncols: int = 2,
    *,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """A grid of panels; in each, one line with point markers per series of (x, y) pairs (NaN y not drawn)."""
    figure, axes = _panel_grid(len(panels), ncols)
    for ax, (panel, series) in zip(axes, panels.items(), strict=True):
        for name, points in series.items():
            x, y = zip(*points, strict=True) if points else ((), ())
            ax.plot(x, y, marker="o", label=_shown(name, names))
        _label(ax, xlabel, ylabel, panel)
    axes[0].legend(fontsize=7)
    figure.suptitle(title)
    return _save(figure, path)


def plot_log_sweeps(
    panels: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    x: Sequence[float],
    path: str | Path,
    title: str,
    xlabel: str,
    ylabels: Mapping[str, str],
    ncols: int = 2,
    *,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """A grid of panels on log-log axes; in each, every series' runs (one list of values over ``x`` per seed)
    as a mean line with a +-1 std band. A point where any seed is NaN or infinite (diverged) is not drawn."""
    figure, axes = _panel_grid(len(panels), ncols)
    for ax, (panel, series) in zip(axes, panels.items(), strict=True):
        for name, runs in series.items():
            with np.errstate(invalid="ignore"):  # inf - inf in the std of a diverged point
                mean, std = mean_and_std(runs)
            mean[~np.isfinite(mean)] = np.nan
            ax.plot(x, mean, marker=".", label=_shown(name, names))
            ax.fill_between(x, np.clip(mean - std, mean / 10, None), mean + std, alpha=0.15)
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Over about a decade matplotlib labels the minor ticks too (3x10^1, 4x10^1, ...), and they overlap.
        ax.xaxis.set_minor_formatter(NullFormatter())
        _label(ax, xlabel, ylabels[panel], panel)
    axes[0].legend(fontsize=7)
    figure.suptitle(title)
    return _save(figure, path)


def plot_label_slices(
    image: np.ndarray,
    label_maps: Mapping[str, np.ndarray],
    path: str | Path,
    title: str,
    *,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """A 2D ``image`` slice (grey) next to label maps of the same slice (truth, predictions), one panel each,
    one colour per class (up to 10 classes, the same colours in every panel)."""
    figure, axes = _figure(1, 1 + len(label_maps), panel_size=(3, 3.2))
    axes[0, 0].imshow(np.asarray(image), cmap="gray")
    axes[0, 0].set_title("image", fontsize=9)
    for ax, (name, labels) in zip(axes[0, 1:], label_maps.items(), strict=True):
        ax.imshow(np.asarray(labels), cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
        ax.set_title(_shown(name, names), fontsize=9)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    figure.suptitle(title, fontsize=10)
    return _save(figure, path)
