"""``torchrun`` as ``hf-ext run`` starts it: a failed rank ends the launch with its exit status, in the ranks' words.

A rank that exits with an error has already said why on stderr (a refused resume is one line, a crash its
traceback); torchrun would add its log lines and a ``ChildFailedError`` traceback around it. Here a failed launch
exits with the first failed rank's status, adding one line only for a rank killed by a signal, which could say
nothing itself. ``python -m hf_ext._torchrun ARGS`` takes torchrun's own arguments.
"""

import logging
import signal
import sys

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main as torchrun


def _signal_name(exitcode: int) -> str:
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def _quiet_launcher_logs() -> None:
    """torchrun's agent logs each rank it stops and each failure (WARNING, ERROR): what a failed rank printed is
    the report; a rank killed by a signal is reported by :func:`main`."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed.elastic") or name == "torch.distributed.run":
            logging.getLogger(name).setLevel(logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    """Run torchrun with ``argv``; 0 when every rank succeeded, else the first failed rank's exit status (1 for a
    rank killed by a signal, after one line naming it)."""
    _quiet_launcher_logs()
    try:
        torchrun(argv)
    except ChildFailedError as error:
        rank, failure = error.get_first_failure()
        if failure.exitcode > 0:
            return failure.exitcode
        killed_by = _signal_name(failure.exitcode)
        print(f"torchrun: rank {rank} (pid {failure.pid}) was killed by {killed_by}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
