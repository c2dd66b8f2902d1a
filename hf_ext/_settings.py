"""A resumable run's settings, stored next to its state, so that it is only ever resumed under the same settings.

Resuming under other settings would append new results to old ones and report the mix as one
run; the check names every differing field with its stored and current values instead.
"""

import json
import os
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

_ABSENT = "<absent>"


class SettingsError(ValueError):
    """A run's settings cannot be honoured as given: the user acts on the message, and no code needs fixing.

    Its message is the one line a user needs (the field, what is wrong, what to do instead): a recipe run as a
    script reports it without a traceback (``hf_ext.recipes._script``).
    """


class SettingsMismatchError(SettingsError):
    """A run's state was made under other settings than the current ones, so resuming it is refused.

    The message names the differing fields and says how to resume or start fresh.
    """


def _flatten(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat |= _flatten(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _to_json(settings: dict[str, Any]) -> str:
    return json.dumps(settings, indent=2, default=repr)  # repr: a user's adversary may hold any object


def as_json(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` as they read back from JSON (tuples as lists, other objects as their ``repr``)."""
    return json.loads(_to_json(settings))


def settings_differences(
    stored: dict[str, Any], current: dict[str, Any], may_change: Collection[str] = ()
) -> list[str]:
    """``"name: stored X, now Y"`` for every (dotted) field whose value differs, but those named in ``may_change``;
    ``current`` is compared as JSON."""
    old, new = _flatten(stored), _flatten(as_json(current))
    return [
        f"{name}: stored {old.get(name, _ABSENT)!r}, now {new.get(name, _ABSENT)!r}"
        for name in dict.fromkeys([*new, *old])
        if name not in may_change and old.get(name, _ABSENT) != new.get(name, _ABSENT)
    ]


def read_settings(path: Path) -> dict[str, Any]:
    """The settings stored at ``path``; a file that is not a JSON object is an error naming it."""
    try:
        stored = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} (a run's stored settings) is not valid JSON: {error}") from error
    if not isinstance(stored, dict):
        raise ValueError(f"{path} (a run's stored settings) must hold a JSON object, got {type(stored).__name__}")
    return stored


def check_same_settings(
    stored: dict[str, Any],
    settings: dict[str, Any],
    run: str,
    where: Path,
    start_fresh: str,
    may_change: Collection[str] = (),
) -> None:
    """Raise :class:`SettingsMismatchError` if ``settings`` differ from ``stored`` (read from ``where``) in any field
    but those in ``may_change``, naming each with both values and saying how to resume or ``start_fresh``."""
    differences = settings_differences(stored, settings, may_change)
    if differences:
        raise SettingsMismatchError(
            f"cannot resume {run} under other settings than those stored in {where}: {'; '.join(differences)}. "
            f"Rerun with the stored settings to resume, or start fresh: {start_fresh}."
        )


def warn_unchecked_resume(run: str, missing: str, storing: bool = False) -> None:
    """Warn that ``run`` resumes without a check of its settings, as ``missing`` (where they would be) is missing."""
    warnings.warn(
        f"{run} has no stored settings ({missing} is missing: it predates them), so resuming it cannot check "
        "that it was made under the current settings" + ("; storing them now" if storing else ""),
        stacklevel=3,
    )


def store_settings(path: Path, settings: dict[str, Any]) -> None:
    """Write ``settings`` to ``path`` as JSON, whole or not at all (also with two writers at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(_to_json(settings) + "\n")
    os.replace(partial, path)  # a killed writer leaves the old file or the new one, never half of one


def check_and_store_settings(path: Path, settings: dict[str, Any], resuming: bool, run: str, start_fresh: str) -> None:
    """Refuse to resume ``run`` under settings other than those stored at ``path``; store ``settings`` there.

    Args:
        path: the JSON file next to the run's state.
        settings: what decides the run's results (JSON-serialisable).
        resuming: whether the run's state exists; settings left by a run whose state is gone are replaced.
        run: names the state in messages (``"the history h.jsonl"``).
        start_fresh: how to start a new run instead (``"pass another history_file"``).
    """
    if resuming and path.is_file():
        check_same_settings(read_settings(path), settings, run, path, start_fresh)
        return
    if resuming:
        warn_unchecked_resume(run, str(path), storing=True)
    store_settings(path, settings)
