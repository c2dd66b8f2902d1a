"""A recipe's ``trainer.train()`` resumed as its ``resume_from_checkpoint`` setting says.

``resume_from_checkpoint`` is a ``TrainingArguments`` field, so every Trainer recipe lists it, but the
``Trainer`` never reads it: the script must hand it to ``train()``. :func:`train_resumable` does, for every Trainer
recipe: a checkpoint folder, or ``last`` (``true``) for the newest complete checkpoint in the run's own
``output_dir``, where a run killed before its first checkpoint starts over. A recipe that trains several runs,
each in its own folder, takes only ``last``: one checkpoint cannot be every run's.
"""

import re
from pathlib import Path

from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, TrainOutput

LAST = ("last", "true")
# Written by the Trainer after the model, optimizer and random states: a checkpoint without it is incomplete.
TRAINER_STATE = "trainer_state.json"


def last_complete_checkpoint(output_dir: str | Path) -> Path | None:
    """The checkpoint of the latest step in ``output_dir`` that was written to the end; None if there is none."""
    pattern = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")
    folder = Path(output_dir)
    found = [path for path in folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*") if pattern.match(path.name)]
    complete = [path for path in found if (path / TRAINER_STATE).is_file()]
    return max(complete, key=lambda path: int(pattern.match(path.name).group(1)), default=None)


def train_resumable(trainer: Trainer, *, several_runs: bool = False) -> TrainOutput:
    """``trainer.train()`` from the checkpoint ``trainer.args.resume_from_checkpoint`` names (None: from the start).

    ``several_runs``: the recipe trains more than one run, each in its own ``output_dir``; a checkpoint folder is
    then refused (``ValueError``) before this run trains, and ``last`` resumes each run from its own.
    """
    setting = trainer.args.resume_from_checkpoint
    if setting is None or setting is False:
        return trainer.train()
    if setting is True or str(setting).lower() in LAST:
        checkpoint = last_complete_checkpoint(trainer.args.output_dir)
        return trainer.train(resume_from_checkpoint=None if checkpoint is None else str(checkpoint))
    if several_runs:
        raise ValueError(
            f"resume_from_checkpoint: this recipe trains several runs, each into its own folder under output_dir; "
            f"give one of {list(LAST)} (each run resumes from its own newest checkpoint), not {setting!r}"
        )
    return trainer.train(resume_from_checkpoint=str(setting))
