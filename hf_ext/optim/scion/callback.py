"""Run a :class:`BatchSchedule` in the stock ``Trainer``: the step-size callback that checks the data and settings.

The Trainer fixes its gradient accumulation before the first step (the loop's micro-batch counting
and ``skip_first_batches`` on resume assume one value), so the effective batch grows through the
*sampler batch* instead: :class:`~hf_ext.data.PackedStream` is a map-style dataset whose item ``i`` is the
``i``-th micro-batch of the schedule, already packed from the corpus's token stream into rows of
the stage's sequence length (contiguous text, nothing padded, no token dropped). Read in order
(``train_sampling_strategy="sequential"``, one item per device batch), optimizer step ``t`` sees
exactly ``B_t S_t`` tokens, across gradient accumulation and processes; resuming mid-stage is the
Trainer's own skip of the micro-batches already trained. :class:`BatchScheduleCallback` rescales the
learning rate by the stage's factor around each optimizer step (any scheduler keeps working) and
refuses a run whose data, Trainer settings or checkpoint disagree with its schedule.
"""

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from ..._trainer_logs import add_to_logs
from ...data.packed_stream import PackedStream
from .batch_schedule import BatchSchedule


class BatchScheduleCallback(TrainerCallback, ExportableState):
    """Multiplies the learning rate by the current stage's ``lr_factor`` for each optimizer step and logs the stage.

    Takes :class:`BatchSchedule`'s keyword arguments (``callback.schedule`` is the schedule; build the
    :class:`PackedStream` from it). At the start of training it checks the Trainer's settings
    (sequential sampling, one item per device batch, ``max_steps`` = the schedule's steps,
    micro-batches per step = gradient accumulation x processes) and, when resuming, that the
    checkpoint was written under the same schedule.
    """

    def __init__(self, **schedule_kwargs):
        self.schedule = BatchSchedule(**schedule_kwargs)
        self._lrs: list[float] | None = None

    def state(self) -> dict:
        return {"args": self.schedule.settings, "attributes": {}}

    def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
        settings = self.schedule.settings
        saved = state.stateful_callbacks.get(type(self).__name__, {})
        saved = (saved[0] if isinstance(saved, list) else saved).get("args") if saved else None
        if saved is not None and saved != settings:
            differ = sorted(k for k in settings.keys() | saved.keys() if settings.get(k) != saved.get(k))
            raise ValueError(f"BatchScheduleCallback: the checkpoint was trained under another schedule ({differ})")
        problems = []
        if args.train_sampling_strategy != "sequential":
            problems.append(f"train_sampling_strategy='sequential' (got {args.train_sampling_strategy!r})")
        if args.per_device_train_batch_size != 1:
            problems.append(f"per_device_train_batch_size=1 (got {args.per_device_train_batch_size})")
        if args.max_steps != self.schedule.total_steps:
            problems.append(f"max_steps={self.schedule.total_steps} (got {args.max_steps})")
        dataset = getattr(train_dataloader, "dataset", None)
        if not isinstance(dataset, PackedStream) or dataset.schedule.settings != settings:
            problems.append("train_dataset=PackedStream(tokens, callback.schedule, ...)")
        elif dataset.micro != args.gradient_accumulation_steps * args.world_size:
            problems.append(
                f"micro_batches_per_step={args.gradient_accumulation_steps * args.world_size} (gradient "
                f"accumulation x processes; the PackedStream has {dataset.micro})"
            )
        if problems:
            raise ValueError("BatchScheduleCallback: the run needs " + "; ".join(problems))

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        factor = self.schedule.stage_at(state.global_step).lr_factor
        self._lrs = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * factor

    def on_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        for group, lr in zip(optimizer.param_groups, self._lrs, strict=True):
            group["lr"] = lr  # the scheduler's own value back, exactly

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return  # an evaluation or the end-of-training summary
        step = max(state.global_step - 1, 0)  # the step just taken
        stage = self.schedule.stage_at(step)
        add_to_logs(
            state,
            logs,
            {
                "schedule/stage": self.schedule.stages.index(stage),
                "schedule/batch_size": stage.batch_size,
                "schedule/seq_len": stage.seq_len,
                "schedule/lr_factor": stage.lr_factor,
                "schedule/tokens": self.schedule.tokens_before(state.global_step),
            },
        )
