"""Shared benchmark plumbing: the common options, timing with device synchronisation, CPU peak memory, and the
JSON last line."""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

DEFAULT_OUTPUT_DIR = "outputs/benchmarks"


def benchmark_parser(
    doc: str,
    *,
    seeds: Sequence[int] | None = None,
    seeds_help: str = "one run per seed; the mean and spread over them are reported",
    output_dir: str = DEFAULT_OUTPUT_DIR,
) -> argparse.ArgumentParser:
    """The parser of a benchmark whose module docstring is ``doc`` (shown by ``--help``), with the options every
    benchmark shares: ``--output-dir`` (where the full results and plots go) and, for a benchmark with seeds,
    ``--seeds`` (``seeds`` its default list)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if seeds is not None:
        parser.add_argument(
            "--seeds", type=int, nargs="+", default=list(seeds), help=f"{seeds_help} (default: %(default)s)"
        )
    parser.add_argument(
        "--output-dir", default=output_dir, help="where the full results and plots go (default: %(default)s)"
    )
    return parser


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn: Callable[[], Any], device: torch.device, warmup: int = 3, repeats: int = 20) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs, after ``warmup`` untimed runs.

    Not ``torch.utils.benchmark.Timer``: it times a statement string on one CPU thread unless told
    otherwise and reports means over blocks of calls; here each sample is one call of a closure,
    under torch's own thread settings, so eager baselines run as users run them.
    """
    for _ in range(warmup):
        fn()
    _synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def sample_ms(fn: Callable[[], object], device: torch.device, repeats: int, inner: int) -> list[float]:
    """Milliseconds per call, ``repeats`` samples of ``inner`` back-to-back calls each, after warm-up.

    On CUDA the calls are queued without synchronising in between and timed with events, as
    kernels run inside a model; on CPU with the wall clock.
    """
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / inner)
        else:
            begin = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - begin) * 1e3 / inner)
    return samples


def save_json(output_dir: str, name: str, payload: dict[str, Any]) -> None:
    """Write the benchmark's full results to ``output_dir/name.json`` (the directory is created)."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2))


def emit(result: dict[str, Any]) -> None:
    """Print the benchmark's result as one JSON object, always the last line of output."""
    print(json.dumps(result, sort_keys=True), flush=True)


def _status_bytes(field: str) -> int:
    """A memory figure of this process from ``/proc/self/status`` (``VmRSS``, ``VmHWM``; given in KiB), in bytes."""
    status = Path("/proc/self/status").read_text()
    return 1024 * int(re.search(rf"^{field}:\s+(\d+) kB$", status, flags=re.MULTILINE).group(1))


def current_rss() -> int:
    """This process's resident set size now, in bytes."""
    return _status_bytes("VmRSS")


def peak_rss() -> int:
    """This process's highest resident set size since it started or since :func:`reset_peak_rss`, in bytes."""
    return _status_bytes("VmHWM")


def reset_peak_rss() -> int:
    """Set the high-water mark to the current RSS (``/proc/self/clear_refs``, Linux 4.0 and later); returns it."""
    Path("/proc/self/clear_refs").write_text("5")
    return current_rss()


class PeakRSS:
    """The highest resident set size (RSS) of this process while the context is open, in bytes.

    Read from the kernel's high-water mark, not sampled: entering resets the mark to the current RSS
    (``/proc/self/clear_refs``, Linux 4.0 and later) and leaving reads it (``VmHWM``), so a spike shorter than
    any sampling interval counts and no thread runs beside the measured code. ``start`` is the RSS on entering.
    The mark belongs to the process and counts only pages newly made resident: glibc serves a large request from
    heap space freed earlier that is still resident (never returned, not at the top of the heap), which leaves the
    RSS where it was. So measure in a process of its own (:func:`median_of_isolated_runs`), not one that ran a while.
    """

    def __enter__(self):
        self.start = self.peak = reset_peak_rss()
        return self

    def __exit__(self, *exc):
        self.peak = peak_rss()


def median_of_isolated_runs(script: str, flags: list[str], repeats: int) -> dict[str, Any]:
    """Run ``script flags`` in fresh processes ``repeats`` times; the median of each number of its JSON last line.

    Memory readings need a process of their own, and ``MALLOC_ARENA_MAX=2`` keeps glibc's
    per-thread arenas from adding noise to them. The individual runs are kept under ``"runs"``.
    """
    env = os.environ | {"MALLOC_ARENA_MAX": "2"}
    runs = []
    for _ in range(repeats):
        output = subprocess.run([sys.executable, script, *flags], check=True, capture_output=True, text=True, env=env)
        runs.append(json.loads(output.stdout.strip().splitlines()[-1]))
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]} | {"runs": runs}
