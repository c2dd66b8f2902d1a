"""Read a weight-decay sweep's outputs back, print them as one table and plot base loss against downstream."""

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ..plotting import plot_labelled_points

# Row key -> column header: what the base model looked like, then what fine-tuning reached.
COLUMNS = {
    "weight_decay": "weight decay",
    "base_validation_loss": "base val loss",
    "loss_gap": "val - train loss",
    "probe_accuracy": "probe acc (mean over layers)",
    "qk_spectral_norm": "QK spectral norm",
    "attention_entropy": "attention entropy",
    "classification_accuracy": "docstring acc after FT",
    "arithmetic_exact_match": "arithmetic exact after FT",
    "arithmetic_loss": "arithmetic loss after FT",
}
ROW_FILE = "results.json"


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of the sweep's rows (see :data:`COLUMNS`), one per weight decay."""
    lines = ["| " + " | ".join(COLUMNS.values()) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [_cell(row.get(key)) for key in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isfinite(value) and value != 0 and abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def plasticity_report(run_dir: str | Path) -> list[dict[str, Any]]:
    """Print the table of a ``wd_plasticity`` run directory and return its rows, by weight decay.

    Reads every ``wd_*/results.json`` under ``run_dir``, so a sweep that stopped part-way still
    reports the weight decays it finished.
    """
    run_dir = Path(run_dir)
    files = sorted(run_dir.glob(f"wd_*/{ROW_FILE}"))
    if not files:
        raise FileNotFoundError(f"plasticity_report: no wd_*/{ROW_FILE} under {run_dir} (run the wd_plasticity recipe)")
    rows = sorted((json.loads(path.read_text()) for path in files), key=lambda row: row["weight_decay"])
    print(format_table(rows))
    return rows


# Row key -> panel title of the sweep's plot: what fine-tuning reached, against the base loss.
PLOTTED = {
    "classification_accuracy": "docstring accuracy after fine-tuning",
    "arithmetic_loss": "arithmetic loss after fine-tuning",
}


def plot_sweep(runs: Sequence[Sequence[Mapping[str, Any]]], path: str | Path) -> Figure:
    """Base validation loss against each downstream score, one labelled point per weight decay.

    ``runs`` holds one list of rows per seed (same weight decays in the same order); with several
    seeds each point is their mean, with +-1 std error bars.
    """
    panels = {
        title: [
            (f"wd {seeds[0]['weight_decay']:g}", [r["base_validation_loss"] for r in seeds], [r[key] for r in seeds])
            for seeds in zip(*runs, strict=True)
        ]
        for key, title in PLOTTED.items()
    }
    spread = f", mean +- std over {len(runs)} seeds" if len(runs) > 1 else ""
    return plot_labelled_points(
        panels, Path(path), f"Pretraining weight decay: base loss vs downstream{spread}", "base validation loss"
    )
