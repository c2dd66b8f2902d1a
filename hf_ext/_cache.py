"""Where hf-ext keeps what it derives once and reuses: converted models, tokenizers, trained helpers, help pages.

Importing nothing heavy, so that the command line can read a cached page without importing torch.
"""

import hashlib
import importlib.metadata
import os
from collections.abc import Callable, Iterable
from pathlib import Path

# The libraries whose dataclasses a recipe's settings are made of: a new version may add or change fields.
_SETTINGS_LIBRARIES = ("transformers", "trl", "accelerate", "peft", "torch")


def cache_root() -> Path:
    """``$HF_EXT_CACHE``, default ``~/.cache/hf_ext``."""
    return Path(os.environ.get("HF_EXT_CACHE", Path.home() / ".cache" / "hf_ext")).expanduser()


def installed_version(distribution: str) -> str:
    """``distribution``'s installed version, or ``"not installed"``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def source_stamp(folders: Iterable[Path]) -> str:
    """A digest of every ``.py`` file under ``folders`` (path, size, modification time) and of the versions of
    the libraries settings come from: it changes whenever a cached help page could."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            stat = path.stat()
            digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    for library in _SETTINGS_LIBRARIES:
        digest.update(f"{library}={installed_version(library)}\n".encode())
    return digest.hexdigest()


def cached_text(namespace: str, key: Iterable[str | bytes], compute: Callable[[], str]) -> str:
    """``compute()``, stored under ``cache_root()/namespace`` by a digest of ``key`` and read from there next time.

    A cache that cannot be written (a read-only home) only costs the recomputation.
    """
    digest = hashlib.sha256()
    for part in key:
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    path = cache_root() / namespace / f"{digest.hexdigest()[:32]}.txt"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    text = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)  # whole or absent, also with two help pages asked at once
    except OSError:
        pass
    return text
