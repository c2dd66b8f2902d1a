"""Opening the files our save functions write, so that a missing or damaged one is named with what is wrong.

Left to themselves, safetensors says "header too small" and json a bare ``JSONDecodeError``: neither
names the file, and transformers blames a missing ``config.json`` on its ``model_type`` key.
"""

import json
from pathlib import Path

from safetensors import SafetensorError, safe_open


def _require(path: Path, owner: str) -> None:
    if not path.is_file():
        raise FileNotFoundError(f"{owner}: {str(path)!r} is missing")


def open_safetensors(path: str | Path, owner: str):
    """``safe_open(path)`` (use it in a ``with``); a truncated or foreign file raises ``ValueError`` naming it.

    safetensors checks at opening that the header is complete and covers the whole file, so a
    truncation anywhere is caught here, before any tensor is read.
    """
    path = Path(path)
    _require(path, owner)
    try:
        return safe_open(str(path), framework="pt")
    except SafetensorError as error:
        raise ValueError(f"{owner}: {str(path)!r} is truncated or not a safetensors file ({error})") from error


def read_json(path: str | Path, owner: str):
    """The JSON value at ``path``; a missing file raises ``FileNotFoundError``, an unparsable one ``ValueError``."""
    path = Path(path)
    _require(path, owner)
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{owner}: {str(path)!r} is not valid JSON, truncated or damaged ({error})") from error
