"""Shared benchmark plumbing: timing with device synchronisation, and the JSON last line."""

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn: Callable[[], Any], device: torch.device, warmup: int = 3, repeats: int = 20) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs, after ``warmup`` untimed runs."""
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


def emit(result: dict[str, Any]) -> None:
    """Print the benchmark's result as one JSON object, always the last line of output."""
    print(json.dumps(result, sort_keys=True), flush=True)
