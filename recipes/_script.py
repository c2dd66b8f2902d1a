"""A recipe run as a script (``hf-ext run``, ``accelerate launch``, ``python -m``): a refused setting is one line.

A refused resume, a damaged checkpoint to resume from, a setting the launch cannot honour: the refusal is for the
user to act on (rerun with the stored settings, start fresh, pick another checkpoint), not a bug: a traceback,
and the launcher's second one around it, would bury the line that says so. ``main(argv)`` itself still raises, for
callers in Python.
"""

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hf_ext._settings import SettingsError

# How long a rank other than the first waits, after refusing, for the first to print the refusal and exit: the
# launcher stops the waiting ranks as soon as one rank fails, and a rank that failed first would have them stop the
# first rank before it printed anything.
OTHER_RANKS_GRACE_SECONDS = 60


def run_as_script(main: Callable[[], object]) -> None:
    """Call a recipe's ``main``; a :class:`~hf_ext._settings.SettingsError` (a refused resume among them) goes to
    stderr as one line, with exit status 2.

    Under a launcher every rank refuses the same way; only the first (``RANK`` 0) prints the line, and the others
    wait for the launcher to stop them once it has (see ``OTHER_RANKS_GRACE_SECONDS``).
    """
    try:
        main()
    except SettingsError as error:
        if os.environ.get("RANK", "0") == "0":
            print(f"{Path(sys.argv[0]).stem}: {error}", file=sys.stderr)
        else:
            time.sleep(OTHER_RANKS_GRACE_SECONDS)
        sys.exit(2)
