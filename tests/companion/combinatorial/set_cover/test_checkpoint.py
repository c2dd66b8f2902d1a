import importlib
import json

import pytest
import torch

from hf_ext.companion.combinatorial.set_cover import (
    ColumnDenoiser,
    DenoiserTrainingConfig,
    default_denoiser,
    load_denoiser,
    save_denoiser,
)

checkpoint = importlib.import_module("hf_ext.companion.combinatorial.set_cover.checkpoint")
TINY = DenoiserTrainingConfig(examples=2, epochs=1, region_size=40, instance_columns=300)


def _same(first, second) -> bool:
    pairs = zip(first.state_dict().values(), second.state_dict().values(), strict=True)
    return all(torch.equal(a, b) for a, b in pairs)


def test_save_then_load_round_trips_weights_and_architecture(tmp_path):
    model = ColumnDenoiser(hidden=8, rounds=3)
    save_denoiser(model, tmp_path, TINY)
    loaded = load_denoiser(tmp_path)
    assert (loaded.hidden, loaded.rounds) == (8, 3) and _same(model, loaded)
    assert json.loads((tmp_path / "config.json").read_text())["training"]["examples"] == 2


def test_a_damaged_checkpoint_is_named(tmp_path):
    save_denoiser(ColumnDenoiser(hidden=4), tmp_path, TINY)
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(ValueError, match="model.safetensors"):
        load_denoiser(tmp_path)


def test_default_is_trained_once_then_loaded_and_retrained_for_other_settings(tmp_path, monkeypatch):
    first = default_denoiser(tmp_path, TINY)
    assert (tmp_path / "set_cover_denoiser" / "model.safetensors").exists()
    monkeypatch.setattr(checkpoint, "train_denoiser", lambda config: pytest.fail("retrained a cached default"))
    assert _same(first, default_denoiser(tmp_path, TINY))
    monkeypatch.undo()
    other = default_denoiser(tmp_path, DenoiserTrainingConfig(**{**vars(TINY), "seed": 1}))
    assert not _same(first, other)


def test_default_cached_from_older_training_examples_is_retrained(tmp_path, monkeypatch):
    """The cache key holds the examples' version as well as the settings: when ``training_examples`` changes, the
    same settings no longer give the same denoiser."""
    default_denoiser(tmp_path, TINY)
    retrained = []
    monkeypatch.setattr(checkpoint, "train_denoiser", lambda config: retrained.append(config) or ColumnDenoiser())
    monkeypatch.setattr(checkpoint, "EXAMPLES_VERSION", checkpoint.EXAMPLES_VERSION + 1)
    default_denoiser(tmp_path, TINY)
    assert retrained == [TINY]
    assert json.loads((tmp_path / "set_cover_denoiser" / "config.json").read_text())["examples_version"] == (
        checkpoint.EXAMPLES_VERSION
    )
