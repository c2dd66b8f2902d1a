import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from hf_ext._settings import SettingsError
from hf_ext.recipes import _training as training
from hf_ext.recipes import available_recipes, load_recipe, recipe_script, shipped_config
from hf_ext.recipes._settings import recipe_settings
from hf_ext.recipes._training import last_complete_checkpoint, train_resumable


def _checkpoint(output_dir: Path, step: int, complete: bool = True) -> Path:
    folder = output_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    if complete:
        (folder / "trainer_state.json").write_text("{}")
    return folder


def _trainer(output_dir: Path, setting):
    """A stand-in with the Trainer's ``args`` and ``train``, recording what ``train`` was given."""
    calls = []
    args = SimpleNamespace(output_dir=str(output_dir), resume_from_checkpoint=setting)
    return SimpleNamespace(args=args, train=lambda **kwargs: calls.append(kwargs) or "trained", calls=calls)


def test_the_newest_checkpoint_written_to_the_end_is_the_last_one(tmp_path):
    assert last_complete_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, 2)
    newest = _checkpoint(tmp_path, 10)  # numerically, not alphabetically, after 2
    _checkpoint(tmp_path, 12, complete=False)  # killed while saving: no trainer_state.json yet
    (tmp_path / "checkpoint-final").mkdir()
    assert last_complete_checkpoint(tmp_path) == newest


@pytest.mark.parametrize("setting", ["last", "TRUE", True])
def test_last_resumes_from_the_runs_own_newest_checkpoint_or_starts_over(tmp_path, setting):
    trainer = _trainer(tmp_path, setting)
    assert train_resumable(trainer, several_runs=True) == "trained"
    _checkpoint(tmp_path, 3)
    train_resumable(trainer)
    newest = str(tmp_path / "checkpoint-3")
    assert trainer.calls == [{"resume_from_checkpoint": None}, {"resume_from_checkpoint": newest}]


def test_a_checkpoint_folder_is_handed_over_and_no_setting_trains_from_the_start(tmp_path):
    trainer = _trainer(tmp_path, str(_checkpoint(tmp_path, 7)))
    train_resumable(trainer)
    unset = _trainer(tmp_path, None)
    train_resumable(unset)
    assert trainer.calls == [{"resume_from_checkpoint": str(tmp_path / "checkpoint-7")}] and unset.calls == [{}]


def test_a_recipe_of_several_runs_refuses_one_checkpoint_folder_for_all(tmp_path):
    trainer = _trainer(tmp_path, str(tmp_path / "checkpoint-7"))
    with pytest.raises(ValueError, match=r"resume_from_checkpoint: .*several runs.*\['last', 'true'\]"):
        train_resumable(trainer, several_runs=True)
    assert trainer.calls == []


def test_a_damaged_checkpoint_is_refused_naming_its_file_and_the_newest_intact_one(tmp_path):
    """Issue 72: a checkpoint whose weights were cut short failed inside transformers with `SafetensorError: header
    too large`, naming no file and no way out."""
    for step in (2, 4):
        save_file({"weight": torch.zeros(2)}, _checkpoint(tmp_path, step) / "model.safetensors")
    damaged = _checkpoint(tmp_path, 6) / "model.safetensors"
    damaged.write_bytes(struct.pack("<Q", 2**40) + b"{}")  # a header length beyond the file: "header too large"
    (tmp_path / "checkpoint-4" / "trainer_state.json").write_text("{")
    trainer = _trainer(tmp_path, "last")
    with pytest.raises(SettingsError, match=r"resume_from_checkpoint: cannot resume from .*checkpoint-6, dam") as error:
        train_resumable(trainer)
    intact = tmp_path / "checkpoint-2"  # checkpoint-4's trainer state is torn
    assert str(damaged) in str(error.value) and f"the newest earlier one that is intact is {intact}" in str(error.value)
    assert trainer.calls == []


# Every Trainer recipe at tiny sizes (its config, and overrides), run up to its first `train_resumable`; the slow ones
# spend half a minute or more before it (agzo_finetune evaluates MiniLM, symmetry_curvature measures curvatures).
FIRST_RUNS = {
    "agzo_finetune": ("agzo_finetune", ["--max_steps", "1", "--methods", "agzo", "--workers", "1"]),
    "binarize_progressive": ("binarize_progressive", ["--model", "tiny", "--max_files", "4", "--block_size", "16"]),
    "dpo_regularized": ("dpo_regularized", ["--model", "tiny", "--num_train", "8", "--num_eval", "4"]),
    "dsgd": ("dsgd_quick", ["--problem", "lm", "--topologies", "ring", "--seeds", "0", "--compare_ddp", "false"]),
    "grpo_sgd": ("grpo_sgd", ["--model", "tiny", "--num_train", "8", "--num_eval", "4", "--max_new_tokens", "4"]),
    "rep3d": ("rep3d_quick", []),
    "scion_batch": ("scion_batch_quick", []),
    "sft_arithmetic": ("sft_arithmetic", ["--model", "tiny", "--num_train", "8", "--num_eval", "2"]),
    "symmetry_curvature": ("symmetry_curvature_quick", []),
    "wd_plasticity": ("wd_plasticity_quick", []),
}


def test_the_table_holds_every_trainer_recipe():
    trains = ("train_resumable(", "train_measured(")  # the second trains through the first
    trainer_recipes = {
        name for name in available_recipes() if any(call in recipe_script(name).read_text() for call in trains)
    }
    assert trainer_recipes == set(FIRST_RUNS)


class _Trained(Exception):
    """Raised in place of training: what the recipe handed to `train_resumable` is all this test needs."""


SLOW_FIRST_RUNS = ("agzo_finetune", "symmetry_curvature")


@pytest.mark.parametrize(
    "recipe", [pytest.param(name, marks=[pytest.mark.slow] * (name in SLOW_FIRST_RUNS)) for name in sorted(FIRST_RUNS)]
)
def test_every_trainer_recipe_trains_under_the_settings_it_parsed(recipe, tmp_path, monkeypatch):
    """Issue 72: a Trainer recipe's resume is checked against the settings stored with its checkpoint, so each run's
    arguments must carry the recipe's settings to `train_resumable` (a `dataclasses.replace` lost them)."""
    module = load_recipe(recipe)

    def first_run(trainer, **kwargs):
        raise _Trained(recipe_settings(trainer.args))

    monkeypatch.setattr(training, "train_resumable", first_run)  # train_measured's
    if hasattr(module, "train_resumable"):
        monkeypatch.setattr(module, "train_resumable", first_run)
    config, overrides = FIRST_RUNS[recipe]
    with pytest.raises(_Trained) as trained:
        module.main(["--config", str(shipped_config(config)), *overrides, "--output_dir", str(tmp_path)])
    settings = trained.value.args[0]
    assert settings["output_dir"] == str(tmp_path) and settings["resume_from_checkpoint"] is None
