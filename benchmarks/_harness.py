"""Shared benchmark plumbing: timing with device synchronisation, CPU peak memory, and the JSON last line."""

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import torch


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


class PeakRSS:
    """Highest resident set size seen while the context is open, sampled every millisecond."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._process = psutil.Process()

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            time.sleep(0.001)

    def __enter__(self):
        self.peak = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)


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
