"""Objectives for tests/companion/test_executors.py, imported as a top-level module (its folder on sys.path, and on
PYTHONPATH for Ray's workers), so that the worker processes of Dask and Ray can import them by name."""

import os
import signal
import time

from botorch.test_functions import Branin

BRANIN = Branin(negate=True)


class Sleepy:
    """Branin after ``seconds`` of sleep; each call appends its process id to ``log`` (a file) when given."""

    def __init__(self, seconds: float = 0.05, log: str | None = None):
        self.seconds, self.log, self.dim = seconds, log, 2

    def __call__(self, x):
        if self.log is not None:
            with open(self.log, "a") as handle:
                handle.write(f"{os.getpid()}\n")
        time.sleep(self.seconds)
        return BRANIN(x)


class KillsItsWorker(Sleepy):
    """Kills its own process (SIGKILL) at the first call, or at every call at ``point``; else as Sleepy."""

    def __init__(self, marker: str, log: str, point: list[float] | None = None):
        super().__init__(0.05, log)
        self.marker, self.point = marker, point

    def __call__(self, x):
        if self.point is None:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))  # one call wins, even two at once
                first = True
            except FileExistsError:
                first = False
        if (self.point is None and first) or (self.point is not None and x.flatten().tolist() == self.point):
            with open(self.log, "a") as handle:
                handle.write(f"killed {os.getpid()}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(x)
