"""The progressive schedule: ``lambda_t`` from the Trainer's step, set on every binarized layer."""

import math

from transformers import TrainerCallback

from .._trainer_logs import add_to_logs
from .._validation import check_count, check_finite
from .convert import binary_layers, set_binarization_mix

SCHEDULES = ("linear", "cosine", "step")


def binarization_mix(step: int, schedule: str, start: int, end: int, num_stages: int = 4) -> float:
    """``lambda`` at optimizer step ``step``: 0 up to ``start``, 1 from ``end`` on, rising in between.

    ``linear`` rises evenly, ``cosine`` slowly at both ends, ``step`` in ``num_stages`` equal jumps.
    """
    if step <= start:
        return 0.0
    if step >= end:
        return 1.0
    progress = (step - start) / (end - start)
    if schedule == "linear":
        return progress
    if schedule == "cosine":
        return (1 - math.cos(math.pi * progress)) / 2
    return math.floor(progress * num_stages) / num_stages


def ramp_length(max_steps: int, binarize_fraction: float = 0.5, ramp_steps: int | None = None) -> int:
    """Steps over which ``lambda`` rises 0 -> 1 in a run of ``max_steps``: ``ramp_steps`` when given, else
    ``binarize_fraction`` of ``max_steps`` (at least 1 step).

    A relative ramp eats half of a short budget; an absolute one leaves the rest binary. Refuses a
    ramp that would not end within the run (the model would never be fully binary).
    """
    for name, value in (("max_steps", max_steps), ("binarize_fraction", binarize_fraction), ("ramp_steps", ramp_steps)):
        check_finite("ramp_length", name, value)
    if max_steps < 1:
        raise ValueError(f"ramp_length: `max_steps` must be >= 1, got {max_steps}")
    if ramp_steps is None:
        if not 0 < binarize_fraction <= 1:
            raise ValueError(f"ramp_length: `binarize_fraction` must be in (0, 1], got {binarize_fraction}")
        return max(1, round(binarize_fraction * max_steps))
    if not 1 <= ramp_steps <= max_steps:
        raise ValueError(
            f"ramp_length: `ramp_steps` must be in [1, max_steps={max_steps}] (a ramp within the run), got {ramp_steps}"
        )
    return ramp_steps


class ProgressiveBinarizationCallback(TrainerCallback):
    """Drives the ``lambda`` of every binarized weight (``ProgressiveBinaryLinear``, ``ProgressiveBinaryWeight``)
    from the Trainer's global step.

    Args:
        schedule: ``"linear"``, ``"cosine"`` or ``"step"``.
        start: the step at which binarization starts (lambda 0 until then).
        end: the step from which the model is fully binary, at most the run's ``max_steps``; ``None``:
            the run's last step.
        num_stages: number of jumps of the ``"step"`` schedule.

    ``lambda`` is set before every step from the step number alone, so a run resumed from a
    checkpoint continues the schedule where it stopped; it is also logged as ``binarization/lambda``.
    """

    def __init__(self, schedule: str = "linear", start: int = 0, end: int | None = None, num_stages: int = 4):
        if schedule not in SCHEDULES:
            raise ValueError(
                f"ProgressiveBinarizationCallback: `schedule` must be one of {list(SCHEDULES)}, got {schedule!r}"
            )
        check_count("ProgressiveBinarizationCallback", "start", start)  # a step: 1.5 or "4" is no step
        if end is not None:
            check_count("ProgressiveBinarizationCallback", "end", end)
        check_count("ProgressiveBinarizationCallback", "num_stages", num_stages, least=1)
        if end is not None and end <= start:
            raise ValueError(f"ProgressiveBinarizationCallback: `end` ({end}) must be after `start` ({start})")
        self.schedule, self.start, self.end, self.num_stages = schedule, start, end, num_stages
        self.mix = 0.0

    def _end(self, state) -> int:
        end = state.max_steps if self.end is None else self.end
        if end <= self.start:
            raise ValueError(
                f"ProgressiveBinarizationCallback: the schedule ends at step {end} (`end`, or the run's "
                f"max_steps), not after `start` ({self.start})"
            )
        if end > state.max_steps:
            raise ValueError(
                f"ProgressiveBinarizationCallback: `end` must be in ({self.start}, max_steps={state.max_steps}]: "
                f"a ramp ending at step {end} leaves the model not fully binary when the run stops"
            )
        return end

    def _apply(self, state, model) -> None:
        self.mix = binarization_mix(state.global_step, self.schedule, self.start, self._end(state), self.num_stages)
        set_binarization_mix(model, self.mix)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not binary_layers(model):
            raise ValueError(
                "ProgressiveBinarizationCallback: the model has no binarized layer; call binarize_model first"
            )
        self._apply(state, model)

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self._apply(state, model)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self._apply(state, model)

    def on_log(self, args, state, control, logs=None, **kwargs):
        add_to_logs(state, logs, {"binarization/lambda": self.mix})
