"""Run a :class:`BatchSchedule` in the stock ``Trainer``: the data, its collator and the step-size callback.

The Trainer fixes its gradient accumulation before the first step (the loop's micro-batch counting
and ``skip_first_batches`` on resume assume one value), so the effective batch grows through the
*sampler batch* instead: :class:`PackedStream` is a map-style dataset whose item ``i`` is the
``i``-th micro-batch of the schedule, already packed from the corpus's token stream into rows of
the stage's sequence length (contiguous text, nothing padded, no token dropped). Read in order
(``train_sampling_strategy="sequential"``, one item per device batch), optimizer step ``t`` sees
exactly ``B_t S_t`` tokens, across gradient accumulation and processes; resuming mid-stage is the
Trainer's own skip of the micro-batches already trained. :class:`BatchScheduleCallback` rescales the
learning rate by the stage's factor around each optimizer step (any scheduler keeps working) and
refuses a run whose data, Trainer settings or checkpoint disagree with its schedule.
"""

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from .._trainer_logs import add_to_logs
from .batch_schedule import BatchSchedule


class PackedStream(torch.utils.data.Dataset):
    """Micro-batches of a token stream packed to the schedule's sequence lengths.

    Each stage cuts ``tokens`` into rows of its sequence length and draws them in a seeded random
    order (a new order for each pass over the stream); item ``i`` holds the ``B_k / micro_batches_per_step``
    rows of its share of step ``i // micro_batches_per_step``, as ``input_ids`` of shape ``(rows, S_k)``.
    ``micro_batches_per_step`` is gradient accumulation steps x processes.
    """

    def __init__(self, tokens, schedule: BatchSchedule, micro_batches_per_step: int = 1, seed: int = 0):
        if not isinstance(micro_batches_per_step, int) or micro_batches_per_step < 1:
            raise ValueError(
                f"PackedStream: `micro_batches_per_step` must be a positive integer, got {micro_batches_per_step!r}"
            )
        uneven = [s.batch_size for s in schedule.stages if s.batch_size % micro_batches_per_step]
        if uneven:
            raise ValueError(
                f"PackedStream: batch sizes {uneven} do not split into {micro_batches_per_step} micro-batches; "
                "build the schedule with `multiple` = gradient accumulation steps x processes"
            )
        self.tokens = torch.as_tensor(tokens, dtype=torch.long).flatten()
        longest = max(s.seq_len for s in schedule.stages)
        if len(self.tokens) < longest:
            raise ValueError(f"PackedStream: {len(self.tokens)} tokens cannot fill one row of {longest}")
        self.schedule, self.micro, self.seed = schedule, micro_batches_per_step, seed
        self._orders: dict[tuple[int, int], torch.Tensor] = {}

    def __len__(self) -> int:
        return self.schedule.total_steps * self.micro

    def _row(self, stage_index: int, seq_len: int, position: int) -> torch.Tensor:
        pool = len(self.tokens) // seq_len
        key = (stage_index, position // pool)
        if key not in self._orders:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + key[0] * 1009 + key[1])
            self._orders[key] = torch.randperm(pool, generator=generator)
        start = self._orders[key][position % pool].item() * seq_len
        return self.tokens[start : start + seq_len]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(f"PackedStream: index {index} out of range for {len(self)} micro-batches")
        step, part = divmod(index, self.micro)
        stage = self.schedule.stage_at(step)
        stage_index = self.schedule.stages.index(stage)
        rows = stage.batch_size // self.micro
        first = (step - stage.first_step) * stage.batch_size + part * rows
        return {"input_ids": torch.stack([self._row(stage_index, stage.seq_len, first + r) for r in range(rows)])}


class PackedStreamCollator:
    """Stacks :class:`PackedStream` items (rows of one sequence length) and adds the causal-LM labels.

    Items holding one row each (a held-out set of equal-length blocks) are stacked the same way.
    """

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        rows = [torch.as_tensor(item["input_ids"], dtype=torch.long) for item in items]
        rows = [r.unsqueeze(0) if r.dim() == 1 else r for r in rows]
        lengths = {r.shape[1] for r in rows}
        if len(lengths) != 1:
            raise ValueError(f"PackedStreamCollator: items of different sequence lengths {sorted(lengths)}")
        input_ids = torch.cat(rows)
        return {"input_ids": input_ids, "labels": input_ids.clone()}


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
