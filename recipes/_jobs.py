"""A recipe's finished jobs, one JSON file each under ``output_dir/jobs/``, so that a rerun resumes instead of redoing.

A recipe made of independent jobs (cam's (problem, seed) pairs, set_cover's instances) stores each job's result as
it finishes; a rerun into the same ``output_dir`` reads the stored ones and runs only the rest, and its report is
built from the files alone, so a run killed at any point and resumed reports what the uninterrupted one would. A
rerun is refused unless it has the settings the stored jobs were made under (``settings.json``).
"""

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hf_ext._files import read_json
from hf_ext._settings import check_and_store_settings

JOBS = "jobs"
SETTINGS = "settings.json"


def check_job_settings(output_dir: str | Path, settings: dict[str, Any], recipe: str) -> None:
    """Refuse to add jobs to ``output_dir`` under settings other than its stored jobs'; store ``settings`` there."""
    out = Path(output_dir)
    check_and_store_settings(
        out / SETTINGS,
        settings,
        resuming=any((out / JOBS).glob("*.json")),
        run=f"the {recipe} jobs in {out}",
        start_fresh=f"pass another output_dir, or delete {out}",
    )


def stored_or_run(output_dir: str | Path, name: str, run: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Job ``name``'s stored result, or ``run(*args)``'s, stored first (written whole or not at all).

    Either way the result is what the file holds (JSON: tuples come back as lists), so a job read back and one
    just run give the same report.
    """
    path = Path(output_dir) / JOBS / f"{name}.json"
    if path.is_file():
        return read_json(path, f"the stored job {name!r}")
    text = json.dumps(run(*args))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text + "\n")
    os.replace(partial, path)  # a run killed while writing leaves no file, and the job is redone
    return json.loads(text)
