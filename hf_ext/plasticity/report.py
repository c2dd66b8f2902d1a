"""Read a weight-decay sweep's outputs back and print them as one table."""

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
