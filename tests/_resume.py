"""SIGKILL a run at a point and resume it in a new process: the check that a resumed run ends as the whole one.

Nothing a process holds may decide a resumed run's numbers (a model's warm start, the global random
generators' state), so each part runs in a process of its own: the whole run into one folder; the
same run into another, SIGKILLed (with every process it started) once ``killed_when(folder)``
holds; the resume in a third process. The two folders must then hold the same bytes, but for their
own path and the JSON keys or CSV columns a caller names (timings, counts of what this invocation did), and
the files it names as drawn from timings (a plot against wall-clock seconds), which need only exist in both.
"""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TIMEOUT = 600
ENV = os.environ | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def module_command(module: str, *args: str) -> Callable[[Path], list[str]]:
    """``python -m module *args --output_dir FOLDER`` for a folder: a recipe or benchmark run as its own process."""
    return lambda folder: [sys.executable, "-m", module, *args, "--output_dir", str(folder)]


def _run(command: list[str], cwd: Path) -> None:
    result = subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def _run_until_killed(command: list[str], cwd: Path, killed_when: Callable[[], bool]) -> None:
    log = cwd / "killed_run.log"  # a file, not a pipe: a progress bar would fill a pipe nobody reads and stall the run
    with log.open("w") as stderr:
        process = subprocess.Popen(
            command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
        )
    deadline = time.monotonic() + TIMEOUT
    while process.poll() is None and time.monotonic() < deadline:
        if killed_when():
            os.killpg(process.pid, signal.SIGKILL)  # the run and any worker it started, as a scheduler kills a job
            process.wait()
            return
        time.sleep(0.005)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    raise AssertionError(f"{command} ended (or timed out) before the point to kill it at:\n{log.read_text()[-3000:]}")


def _without(value, keys: set[str]):
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def _without_columns(data: bytes, columns: set[str]) -> bytes:
    rows = list(csv.DictReader(io.StringIO(data.decode())))
    assert rows and columns <= rows[0].keys(), f"no columns {columns - rows[0].keys() if rows else columns} to ignore"
    kept = io.StringIO()
    writer = csv.DictWriter(kept, [name for name in rows[0] if name not in columns], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return kept.getvalue().encode()


def outputs(
    folder: Path, ignored_keys: dict[str, set[str]] | None = None, timed_files: frozenset[str] = frozenset()
) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path: its bytes with ``folder`` itself written as ``<output_dir>``;
    a JSON or JSON-lines file named in ``ignored_keys`` is compared without those keys (at any depth), a CSV file
    without those columns, and a file in ``timed_files`` by its presence only (empty bytes)."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = str(path.relative_to(folder))
        data = path.read_bytes().replace(str(folder).encode(), b"<output_dir>")
        if name in timed_files:
            data = b""
        elif name in (ignored_keys or {}) and path.suffix == ".csv":
            data = _without_columns(data, ignored_keys[name])
        elif name in (ignored_keys or {}):
            documents = data.splitlines() if path.suffix == ".jsonl" else [data]
            records = [json.loads(document) for document in documents]
            data = b"\n".join(json.dumps(_without(record, ignored_keys[name])).encode() for record in records)
        files[name] = data
    return files


def assert_resumes_identically(
    command: Callable[[Path], list[str]],
    killed_when: Callable[[Path], bool],
    tmp_path: Path,
    ignored_keys: dict[str, set[str]] | None = None,
    timed_files: frozenset[str] = frozenset(),
) -> dict[str, bytes]:
    """Run ``command(folder)`` whole; run it again, SIGKILLed once ``killed_when(folder)`` holds, then resume it in a
    new process; assert both folders hold the same :func:`outputs`, and return them."""
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    _run(command(whole), tmp_path)
    _run_until_killed(command(resumed), tmp_path, lambda: killed_when(resumed))
    _run(command(resumed), tmp_path)
    expected, got = outputs(whole, ignored_keys, timed_files), outputs(resumed, ignored_keys, timed_files)
    assert got.keys() == expected.keys()
    differing = [name for name in expected if got[name] != expected[name]]
    assert not differing, f"the resumed run's files differ from the uninterrupted run's: {differing}"
    return expected


def lines(path: Path) -> int:
    """Complete lines in ``path`` so far (0 while it does not exist): how far an append-only history got."""
    return path.read_bytes().count(b"\n") if path.is_file() else 0
