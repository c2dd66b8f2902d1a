"""Denoiser checkpoints as a directory of ``config.json`` and ``model.safetensors`` (save_pretrained's layout), and
the cached default that ``hf-ext run set_cover_denoiser`` with its shipped settings also builds."""

import json
from dataclasses import asdict
from pathlib import Path

from safetensors.torch import save_file

from hf_ext._cache import cache_root
from hf_ext._files import open_safetensors, read_json

from .diffusion import ColumnDenoiser
from .training import EXAMPLES_VERSION, DenoiserTrainingConfig, train_denoiser


def save_denoiser(model: ColumnDenoiser, directory: str | Path, training: DenoiserTrainingConfig) -> Path:
    """Write the weights and a config.json holding the architecture, the training settings and the version of the
    training examples' construction (``EXAMPLES_VERSION``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(model.state_dict(), str(directory / "model.safetensors"))
    config = {
        "hidden": model.hidden,
        "rounds": model.rounds,
        "training": asdict(training),
        "examples_version": EXAMPLES_VERSION,
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    return directory


def load_denoiser(directory: str | Path) -> ColumnDenoiser:
    """A denoiser saved by ``save_denoiser``; a missing or damaged file raises naming it."""
    directory = Path(directory)
    config = read_json(directory / "config.json", "load_denoiser")
    model = ColumnDenoiser(hidden=config["hidden"], rounds=config["rounds"])
    with open_safetensors(directory / "model.safetensors", "load_denoiser") as handle:
        model.load_state_dict({key: handle.get_tensor(key) for key in handle.keys()})
    return model.eval()


def default_denoiser(cache: str | Path | None = None, training: DenoiserTrainingConfig | None = None) -> ColumnDenoiser:
    """The denoiser trained with ``training`` (the defaults, as the recipe's shipped config), built once and cached
    in ``cache`` (``$HF_EXT_CACHE`` or ``~/.cache/hf_ext``); a later call with the same settings and the same
    ``EXAMPLES_VERSION`` only loads it."""
    training = training or DenoiserTrainingConfig()
    directory = Path(cache or cache_root()) / "set_cover_denoiser"
    config = directory / "config.json"
    cached = read_json(config, "default_denoiser") if config.exists() else {}
    if cached.get("training") != asdict(training) or cached.get("examples_version") != EXAMPLES_VERSION:
        save_denoiser(train_denoiser(training), directory, training)
    return load_denoiser(directory)
