"""A token stream packed into the micro-batches of a staged batch-size schedule, for the stock ``Trainer``.

Item ``i`` is the ``i``-th micro-batch of the schedule, already packed from the token stream into
rows of its stage's sequence length (contiguous text, nothing padded, no token dropped); read in
order, optimizer step ``t`` sees exactly the schedule's tokens. It lives in ``hf_ext.data`` because
it is data: any schedule with stages works (``hf_ext.optim.BatchSchedule`` is the one we ship).
"""

from typing import Protocol

import torch


class Stage(Protocol):
    batch_size: int
    seq_len: int
    first_step: int


class StagedSchedule(Protocol):
    """What :class:`PackedStream` reads of a schedule (``hf_ext.optim.BatchSchedule`` has it)."""

    stages: list
    total_steps: int

    def stage_at(self, step: int) -> Stage: ...


class PackedStream(torch.utils.data.Dataset):
    """Micro-batches of a token stream packed to the schedule's sequence lengths.

    Each stage cuts ``tokens`` into rows of its sequence length and draws them in a seeded random
    order (a new order for each pass over the stream); item ``i`` holds the ``B_k / micro_batches_per_step``
    rows of its share of step ``i // micro_batches_per_step``, as ``input_ids`` of shape ``(rows, S_k)``.
    ``micro_batches_per_step`` is gradient accumulation steps x processes.
    """

    def __init__(self, tokens, schedule: StagedSchedule, micro_batches_per_step: int = 1, seed: int = 0):
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
