from pathlib import Path
from types import SimpleNamespace

import pytest

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
    trainer = _trainer(tmp_path, str(tmp_path / "checkpoint-7"))
    train_resumable(trainer)
    unset = _trainer(tmp_path, None)
    train_resumable(unset)
    assert trainer.calls == [{"resume_from_checkpoint": str(tmp_path / "checkpoint-7")}] and unset.calls == [{}]


def test_a_recipe_of_several_runs_refuses_one_checkpoint_folder_for_all(tmp_path):
    trainer = _trainer(tmp_path, str(tmp_path / "checkpoint-7"))
    with pytest.raises(ValueError, match=r"resume_from_checkpoint: .*several runs.*\['last', 'true'\]"):
        train_resumable(trainer, several_runs=True)
    assert trainer.calls == []
