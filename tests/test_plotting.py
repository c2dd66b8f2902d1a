"""The house plot style: integer step axes, tick labels that do not overlap, display names, seed spread."""

import itertools

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.container import ErrorbarContainer

from hf_ext import plotting
from hf_ext.plasticity import plot_sweep
from hf_ext.plotting import plot_bands, plot_curves, plot_line_panels, plot_log_sweeps, plot_seed_curves
from hf_ext.recipes import _plotting
from hf_ext.recipes.agzo_finetune import plot_losses


def _legend(ax) -> list[str]:
    return [text.get_text() for text in ax.get_legend().get_texts()]


def _integer_ticks(ax) -> bool:
    low, high = ax.get_xlim()
    ticks = [tick for tick in ax.get_xticks() if low <= tick <= high]
    return len(ticks) >= 2 and np.allclose(ticks, np.round(ticks))


def _overlapping_x_texts(figure) -> list[tuple[str, str]]:
    """Pairs of x-axis texts (tick labels, axis label, offset text) whose drawn boxes overlap."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    overlaps = []
    for ax in figure.axes:
        texts = [*ax.get_xticklabels(), ax.xaxis.label, ax.xaxis.get_offset_text()]
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text()]
        overlaps += [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]
    return overlaps


def _row(weight_decay: float, base_loss: float, accuracy: float, arithmetic_loss: float) -> dict:
    return {
        "weight_decay": weight_decay,
        "base_validation_loss": base_loss,
        "classification_accuracy": accuracy,
        "arithmetic_loss": arithmetic_loss,
    }


def test_agzo_loss_plot_names_the_methods_as_the_papers_do_on_an_integer_step_axis(tmp_path):
    curves = [(1, 1.39), (2, 1.38), (3, 1.385)]
    runs = {"runs": {0: {"loss": curves}}}
    figure = plot_losses({"agzo": runs, "mezo": runs}, tmp_path / "loss.png")
    (ax,) = figure.axes
    assert _legend(ax) == ["AGZO", "MeZO"]
    assert _integer_ticks(ax), ax.get_xticks()
    assert (tmp_path / "loss.png").stat().st_size > 1000


def test_curves_use_the_names_the_caller_passes_and_keep_unknown_names_verbatim(tmp_path):
    points = [(5, 0.1), (10, 0.2)]
    curves = {"sgd": points, "adamw": points, "KL(teacher || student)": points}
    figure = plot_curves(curves, tmp_path / "c.png", "t", names={"sgd": "SGD", "adamw": "AdamW"})
    assert _legend(figure.axes[0]) == ["SGD", "AdamW", "KL(teacher || student)"]
    assert _legend(plot_curves(curves, tmp_path / "c.png", "t").axes[0]) == list(curves)  # the core names no method


def test_the_recipes_plots_spell_the_methods_as_the_papers_do(tmp_path):
    points = [(5, 0.1), (10, 0.2)]
    figure = _plotting.plot_curves({"sgd": points, "KL(teacher || student)": points}, tmp_path / "c.png", "t")
    assert _legend(figure.axes[0]) == ["SGD", "KL(teacher || student)"]
    assert _plotting.display_name("simpo") == "SimPO" and _plotting.display_name("vanilla") == "vanilla"
    for name in ("plot_bands", "plot_curves", "plot_grouped_bars", "plot_histograms", "plot_label_slices"):
        assert getattr(_plotting, name).func is getattr(plotting, name)  # the core's plot, the recipes' names
    assert not hasattr(plotting, "DISPLAY_NAMES")


def test_quick_mode_sweep_plot_has_readable_x_labels(tmp_path):
    # A quick-mode sweep (`wd_plasticity quick=true`): base losses differ in the 7th digit. The default
    # formatter wrote them as "3.2 ... 4.2" plus an offset text "1e-6+7.61966" on top of the axis label.
    measured = [(0.0, 7.619664192, 7.506775856), (0.1, 7.619663715, 7.506777763), (1.0, 7.619663238, 7.506785393)]
    rows = [_row(wd, base_loss, 0.5, arithmetic_loss) for wd, base_loss, arithmetic_loss in measured]
    figure = plot_sweep([rows], tmp_path / "plasticity.png")
    assert not _overlapping_x_texts(figure)
    for ax in figure.axes:
        assert not ax.xaxis.get_offset_text().get_text() and not ax.yaxis.get_offset_text().get_text()
        assert _legend(ax) == ["wd 0", "wd 0.1", "wd 1"]  # not text beside points that sit on top of each other


def _error_bars(ax) -> list[ErrorbarContainer]:
    return [container for container in ax.containers if isinstance(container, ErrorbarContainer)]


def test_sweep_plot_over_seeds_draws_mean_points_with_their_spread(tmp_path):
    seed_0 = [_row(0.0, 3.84, 0.85, 0.40), _row(1.0, 3.88, 0.87, 0.34)]
    seed_1 = [_row(0.0, 3.86, 0.87, 0.36), _row(1.0, 3.87, 0.86, 0.35)]
    figure = plot_sweep([seed_0, seed_1], tmp_path / "plasticity.png")
    for ax in figure.axes:
        points = _error_bars(ax)
        assert len(points) == 2 and all(bars.has_xerr and bars.has_yerr for bars in points)
        assert [bars.lines[0].get_xdata()[0] for bars in points] == pytest.approx([3.85, 3.875])
    assert "2 seeds" in figure.texts[0].get_text()


def test_single_seed_sweep_plot_draws_no_error_bars(tmp_path):
    figure = plot_sweep([[_row(0.0, 3.84, 0.85, 0.40), _row(1.0, 3.88, 0.87, 0.34)]], tmp_path / "p.png")
    for ax in figure.axes:
        assert not any(bars.has_xerr or bars.has_yerr for bars in _error_bars(ax))


def test_bands_over_seeds_on_an_integer_round_axis(tmp_path):
    runs = [[1.0, 2.0, 2.5], [1.2, 2.2, 3.5]]
    figure = _plotting.plot_bands({"branin": {"gp_ucb": runs}}, tmp_path / "b.png", "t", "round", "regret", ncols=1)
    ax = figure.axes[0]
    assert any(isinstance(c, PolyCollection) for c in ax.collections)
    assert _integer_ticks(ax), ax.get_xticks()
    assert _legend(ax) == ["GP-UCB"]


def test_seed_curves_draw_the_spread_and_refuse_runs_logged_at_different_steps(tmp_path):
    runs = [[(10, 5.0), (20, 4.0)], [(10, 5.4), (20, 4.6)]]
    figure = plot_seed_curves({"adamw": runs}, tmp_path / "s.png", "t")
    ax = figure.axes[0]
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    extents = band.get_paths()[0].get_extents()
    spread = np.std([5.0, 5.4], ddof=1), np.std([4.0, 4.6], ddof=1)  # sample std, as the benchmarks report
    assert (extents.y0, extents.y1) == pytest.approx((4.3 - spread[1], 5.2 + spread[0]))
    assert _integer_ticks(ax) and _legend(ax) == ["adamw"]  # the key: the caller passes no names
    with pytest.raises(ValueError, match="the runs of 'adamw' must be logged at the same steps"):
        plot_seed_curves({"adamw": [runs[0], [(10, 5.0), (30, 4.0)]]}, tmp_path / "s.png", "t")


def test_log_sweep_over_about_a_decade_labels_no_overlapping_minor_ticks(tmp_path):
    x = [32, 64, 128, 256, 512]
    panels = {"joint": {"he1": [[7.0, 8.0, 8.0, 11.0, 13.0]]}}
    figure = plot_log_sweeps(panels, x, tmp_path / "s.png", "t", "dimension d", {"joint": "iterations"})
    figure.canvas.draw()
    ax = figure.axes[0]  # the second is the hidden spare of the 2-column grid
    assert not [label.get_text() for label in ax.get_xticklabels(minor=True) if label.get_text()]
    assert not _overlapping_x_texts(figure)


def test_line_panels_draw_each_series_at_its_x_values(tmp_path):
    panels = {"100D": {"vs sep_cma": [(0.05, 0.4), (0.15, float("nan")), (0.3, 0.7)]}, "1000D": {"vs pycma": []}}
    figure = plot_line_panels(panels, tmp_path / "w.png", "t", "misranking", "win rate")
    (line,) = figure.axes[0].lines
    np.testing.assert_array_equal(line.get_xdata(), [0.05, 0.15, 0.3])
    assert [ax.get_title() for ax in figure.axes] == ["100D", "1000D"]
    assert (tmp_path / "w.png").stat().st_size > 1000


def _inside_the_figure(figure, texts) -> bool:
    renderer = figure.canvas.get_renderer()
    bounds = figure.bbox
    return all(
        bounds.x0 <= box.x0 and box.x1 <= bounds.x1 and bounds.y0 <= box.y0 and box.y1 <= bounds.y1
        for box in (text.get_window_extent(renderer) for text in texts if text.get_visible() and text.get_text())
    )


@pytest.mark.parametrize("spread", [1.5, 1000.0])  # within one decade (the quick portfolio run), and over three
def test_one_log_panel_is_one_panel_wide_with_its_y_label_and_every_tick_label_inside(tmp_path, spread):
    """Issue 37: the portfolio wealth plot was one panel on a three-panel-wide canvas, with its log y axis set after
    the layout: the y label and a tick label ("9x10^-1") fell off the figure."""
    runs = [list(np.geomspace(0.85, 0.85 * spread, 80))]
    figure = plot_bands({"djia": {"tco1": runs}}, tmp_path / "w.png", "t", "period", "wealth", log_y=True)
    (ax,) = figure.axes
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "wealth"
    assert figure.get_figwidth() == pytest.approx(4.5)
    low, high = ax.get_ylim()
    ticks = ax.yaxis.get_major_ticks() + ax.yaxis.get_minor_ticks()
    labels = [tick.label1 for tick in ticks if low <= tick.get_loc() <= high]  # those drawn
    shown = [label.get_text() for label in labels if label.get_visible() and label.get_text()]
    assert len(shown) >= 2 and all("times" not in text and "^" not in text for text in shown), shown
    assert _inside_the_figure(figure, [ax.yaxis.label, *labels])


def test_a_grid_of_panels_is_as_wide_as_its_panels(tmp_path):
    two = {f"p{i}": {"a": [(1, 1.0)]} for i in range(2)}
    assert plot_line_panels(two, tmp_path / "l.png", "t", "x", "y", ncols=4).get_figwidth() == pytest.approx(2 * 4.5)
    three = {f"p{i}": {"gp_ucb": [[1.0, 2.0]]} for i in range(3)}
    figure = plot_bands(three, tmp_path / "b.png", "t", "x", "y", ncols=2)
    assert figure.get_figwidth() == pytest.approx(2 * 4.5) and sum(ax.get_visible() for ax in figure.axes) == 3
