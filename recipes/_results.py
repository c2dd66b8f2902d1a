"""Where every recipe puts its numbers: ``results.json`` in the output directory."""

import json
from pathlib import Path
from typing import Any


def write_results(output_dir: str | Path, results: dict[str, Any]) -> Path:
    """Create ``output_dir`` and write ``results`` to ``results.json`` in it; returns the directory."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return out
