"""A resumable run's settings, stored next to its state, so that it is only ever resumed under the same settings.

Resuming under other settings would append new results to old ones and report the mix as one
run; the check names every differing field with its stored and current values instead.
"""

import json
import os
import warnings
from pathlib import Path
from typing import Any

_ABSENT = "<absent>"


class SettingsMismatchError(ValueError):
    """A run's state was made under other settings than the current ones, so resuming it is refused.

    Its message is the one line a user needs (the differing fields, how to resume or start fresh): a
    recipe run as a script reports it without a traceback (``hf_ext.recipes._script``).
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


def settings_differences(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``"name: stored X, now Y"`` for every (dotted) field whose value differs; ``current`` is compared as JSON."""
    old, new = _flatten(stored), _flatten(json.loads(_to_json(current)))
    return [
        f"{name}: stored {old.get(name, _ABSENT)!r}, now {new.get(name, _ABSENT)!r}"
        for name in dict.fromkeys([*new, *old])
        if old.get(name, _ABSENT) != new.get(name, _ABSENT)
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
        differences = settings_differences(read_settings(path), settings)
        if differences:
            raise SettingsMismatchError(
                f"cannot resume {run} under other settings than those stored in {path}: {'; '.join(differences)}. "
                f"Rerun with the stored settings to resume, or start fresh: {start_fresh}."
            )
        return
    if resuming:
        warnings.warn(
            f"{run} has no stored settings ({path} is missing: it predates them), so resuming it cannot check "
            "that it was made under the current settings; storing them now",
            stacklevel=3,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(_to_json(settings) + "\n")
    os.replace(partial, path)  # a killed writer leaves the old file or the new one, never half of one
