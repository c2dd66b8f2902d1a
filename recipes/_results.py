"""Where every recipe puts its numbers: ``results.json`` in the output directory."""

import csv
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def write_results(output_dir: str | Path, results: dict[str, Any]) -> Path:
    """Create ``output_dir`` and write ``results`` to ``results.json`` in it; returns the directory."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return out


def write_rows(path: str | Path, rows: Iterable[dict[str, Any]], fieldnames: Sequence[str] | None = None) -> None:
    """Write ``rows`` as a CSV table with a header: the first row's keys, or ``fieldnames`` (other keys dropped)."""
    rows = list(rows)
    with Path(path).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fieldnames or rows[0]), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
