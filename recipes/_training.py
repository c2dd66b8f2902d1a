"""A recipe's ``trainer.train()`` resumed as its ``resume_from_checkpoint`` setting says, under its own settings only.

``resume_from_checkpoint`` is a ``TrainingArguments`` field, so every Trainer recipe lists it, but the
``Trainer`` never reads it: the script must hand it to ``train()``. :func:`train_resumable` does, for every Trainer
recipe: a checkpoint folder, or ``last`` (``true``) for the newest complete checkpoint in the run's own
``output_dir``, where a run killed before its first checkpoint starts over. A recipe that trains several runs,
each in its own folder, takes only ``last``: one checkpoint cannot be every run's.

Every checkpoint holds the recipe's settings (:class:`RecipeSettings`, saved by the Trainer in the checkpoint's
``trainer_state.json``, the file written last), and ``settings.json`` in the recipe's ``output_dir`` records them
beside its results. A resume under other settings is refused, naming each field that differs, but for those a
resume may change as transformers' own resume allows (``RESUME_MAY_CHANGE``); so is a checkpoint whose files are
damaged, naming the file and the newest earlier checkpoint that is intact.

A recipe that compares runs (a variant, an optimizer each) trains each with :func:`train_measured` and ends with
:func:`compare_runs`: each run's line as it ends, then ``results.json`` and the recipe's own reports.
"""

import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from accelerate import PartialState
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, TrainOutput

from hf_ext._files import open_safetensors, read_json
from hf_ext._settings import SettingsError, check_same_settings, store_settings, warn_unchecked_resume
from hf_ext.recipes._results import write_results
from hf_ext.recipes._settings import recipe_settings

Measured = TypeVar("Measured")
LAST = ("last", "true")
# Written by the Trainer after the model, optimizer and random states: a checkpoint without it is incomplete.
TRAINER_STATE = "trainer_state.json"
SETTINGS = "settings.json"
# What a resume may change: where the run is read from and written to; how far it trains (transformers trains on to
# the new end, its learning-rate schedule following the new length); the logging, evaluation and saving cadence
# (transformers keeps the checkpoint's own); where progress is reported; how many runs go at once.
RESUME_MAY_CHANGE = (
    "output_dir",
    "resume_from_checkpoint",
    "max_steps",
    "num_train_epochs",
    "logging_steps",
    "eval_steps",
    "save_steps",
    "save_strategy",
    "save_total_limit",
    "logging_dir",
    "report_to",
    "run_name",
    "disable_tqdm",
    "workers",
)


class RecipeSettings(TrainerCallback, ExportableState):
    """A recipe's settings, saved by the Trainer in each checkpoint's ``trainer_state.json`` (an
    ``ExportableState``): they are in every complete checkpoint, and in none written under other settings."""

    def __init__(self, settings: dict[str, Any]):
        self.settings = settings

    def state(self) -> dict:
        return {"args": {"settings": self.settings}, "attributes": {}}


def _step(checkpoint: Path) -> int | None:
    match = re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)", checkpoint.name)
    return int(match.group(1)) if match else None


def _complete_checkpoints(output_dir: str | Path) -> list[Path]:
    """The checkpoints in ``output_dir`` that were written to the end, newest (latest step) first."""
    found = [path for path in Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*") if _step(path) is not None]
    return sorted((path for path in found if (path / TRAINER_STATE).is_file()), key=_step, reverse=True)


def last_complete_checkpoint(output_dir: str | Path) -> Path | None:
    """The checkpoint of the latest step in ``output_dir`` that was written to the end; None if there is none."""
    return next(iter(_complete_checkpoints(output_dir)), None)


def damage(checkpoint: Path) -> str | None:
    """What is wrong with ``checkpoint``'s trainer state or weights (named by file), or None if both read."""
    try:
        read_json(checkpoint / TRAINER_STATE, "the checkpoint's trainer state")
        for weights in sorted(checkpoint.glob("*.safetensors")):
            with open_safetensors(weights, "the checkpoint's weights"):
                pass  # opening reads the header and checks that it covers the whole file
    except (OSError, ValueError) as error:
        return str(error)
    return None


def check_intact(checkpoint: Path) -> None:
    """Refuse to resume from a damaged ``checkpoint``, naming what is damaged and the newest earlier intact one."""
    if not checkpoint.is_dir():
        raise SettingsError(f"resume_from_checkpoint: {str(checkpoint)!r} is not a checkpoint folder")
    damaged = damage(checkpoint)
    if damaged is None:
        return
    earlier = [path for path in _complete_checkpoints(checkpoint.parent) if _step(path) < (_step(checkpoint) or 0)]
    intact = next((path for path in earlier if damage(path) is None), None)
    instead = f"the newest earlier one that is intact is {intact}: delete {checkpoint.name}, or resume from it"
    if intact is None:
        instead = f"no earlier checkpoint in {checkpoint.parent} is intact: start fresh in another output_dir"
    raise SettingsError(f"resume_from_checkpoint: cannot resume from {checkpoint}, damaged ({damaged}); {instead}")


def check_resumed_settings(checkpoint: Path, settings: dict[str, Any]) -> None:
    """Refuse to resume ``checkpoint`` under ``settings`` other than those it was saved with (see the module doc)."""
    state = read_json(checkpoint / TRAINER_STATE, "the checkpoint's trainer state")
    stored = state.get("stateful_callbacks", {}).get(RecipeSettings.__name__)
    run = f"the checkpoint {checkpoint}"
    if not isinstance(stored, dict):
        warn_unchecked_resume(run, f"the {RecipeSettings.__name__} entry of its {TRAINER_STATE}")
        return
    start_fresh = f"pass another output_dir (a run resumes only from its own checkpoints in {checkpoint.parent})"
    where = checkpoint / TRAINER_STATE
    check_same_settings(stored["args"]["settings"], settings, run, where, start_fresh, RESUME_MAY_CHANGE)


def check_resume(args: TrainingArguments) -> None:
    """Refuse, as soon as a recipe's settings are parsed, a resume that :func:`train_resumable` would refuse: before
    the run loads a model or evaluates anything (and under ``hf-ext run``, before it launches).

    ``last`` is checked against the newest complete checkpoint of ``output_dir`` and of every folder in it that holds
    checkpoints (a recipe of several runs trains each in a folder of its own).
    """
    setting = args.resume_from_checkpoint
    if setting is None or setting is False:
        return
    checkpoints = [Path(setting)]
    if setting is True or str(setting).lower() in LAST:
        folders = {path.parent for path in Path(args.output_dir).rglob(f"{PREFIX_CHECKPOINT_DIR}-*")}
        checkpoints = [checkpoint for folder in sorted(folders) if (checkpoint := last_complete_checkpoint(folder))]
    for checkpoint in checkpoints:
        check_intact(checkpoint)
        check_resumed_settings(checkpoint, recipe_settings(args))


def _checkpoint_to_resume(trainer: Trainer, several_runs: bool) -> Path | None:
    """The checkpoint ``resume_from_checkpoint`` names for this run; None to train from the start."""
    setting = trainer.args.resume_from_checkpoint
    if setting is True or str(setting).lower() in LAST:
        return last_complete_checkpoint(trainer.args.output_dir)
    if several_runs:
        raise ValueError(
            f"resume_from_checkpoint: this recipe trains several runs, each into its own folder under output_dir; "
            f"give one of {list(LAST)} (each run resumes from its own newest checkpoint), not {setting!r}"
        )
    return Path(setting)


def train_resumable(trainer: Trainer, *, several_runs: bool = False) -> TrainOutput:
    """``trainer.train()`` from the checkpoint ``trainer.args.resume_from_checkpoint`` names (None: from the start).

    ``several_runs``: the recipe trains more than one run, each in its own ``output_dir``; a checkpoint folder is
    then refused (``ValueError``) before this run trains, and ``last`` resumes each run from its own. A run whose
    arguments a recipe's parser made (:func:`~hf_ext.recipes._settings.recipe_settings`) resumes only under the
    settings its checkpoint holds (:class:`~hf_ext._settings.SettingsMismatchError` names the others), and saves
    them with each checkpoint and in the recipe's ``output_dir``.
    """
    setting = trainer.args.resume_from_checkpoint
    resuming = setting is not None and setting is not False
    checkpoint = _checkpoint_to_resume(trainer, several_runs) if resuming else None
    settings = recipe_settings(trainer.args)
    if checkpoint is not None:
        check_intact(checkpoint)
        if settings is not None:
            check_resumed_settings(checkpoint, settings)
    if settings is not None:
        trainer.add_callback(RecipeSettings(settings))
        if trainer.is_world_process_zero():
            store_settings(Path(settings["output_dir"]) / SETTINGS, settings)
    if not resuming:
        return trainer.train()
    return trainer.train(resume_from_checkpoint=None if checkpoint is None else str(checkpoint))


def train_measured(trainer: Trainer, measure: Callable[[], Measured]) -> tuple[Measured, Measured, float]:
    """``measure()`` before and after ``trainer`` trains as one of a recipe's several runs (:func:`train_resumable`),
    and the seconds the training took."""
    before = measure()
    start = time.perf_counter()
    train_resumable(trainer, several_runs=True)
    seconds = time.perf_counter() - start
    return before, measure(), seconds


def compare_runs(
    names: Iterable[str],
    run: Callable[[str], dict],
    line: Callable[[str, dict], str],
    output_dir: str | Path,
    write_reports: Callable[[dict[str, dict], Path], list[str]],
) -> dict[str, dict]:
    """The results of ``run(name)`` for each of ``names``, printing ``line(name, result)`` as each run ends; the
    main process then writes them to ``results.json`` in ``output_dir`` and calls ``write_reports(results, out)``,
    which returns the names of the files it added (all are printed)."""
    state = PartialState()
    results = {}
    for name in names:
        results[name] = run(name)
        state.print(line(name, results[name]))
    if state.is_main_process:
        out = write_results(output_dir, results)
        written = ["results.json", *write_reports(results, out)]
        state.print(f"wrote {', '.join(written)} to {out}")
    return results
