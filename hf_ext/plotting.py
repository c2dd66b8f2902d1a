"""Plots of results that people compare, written as PNG next to the numbers."""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
