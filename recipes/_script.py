"""A recipe run as a script (``hf-ext run``, ``accelerate launch``, ``python -m``): a refused resume is one line.

The refusal is for the user to act on (rerun with the stored settings, or start fresh), not a bug: a traceback,
and the launcher's second one around it, would bury the line that says so. ``main(argv)`` itself still raises, for
callers in Python.
"""

import sys
from collections.abc import Callable
from pathlib import Path

from hf_ext._settings import SettingsMismatchError


def run_as_script(main: Callable[[], object]) -> None:
    """Call a recipe's ``main``; a :class:`SettingsMismatchError` goes to stderr as one line, with exit status 2."""
    try:
        main()
    except SettingsMismatchError as error:
        print(f"{Path(sys.argv[0]).stem}: {error}", file=sys.stderr)
        sys.exit(2)
