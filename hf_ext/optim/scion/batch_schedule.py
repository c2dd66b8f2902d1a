"""The batch-size and sequence-length schedule of stochastic conditional gradient: stages by token budget.

The critical tokens per step grow as ``T^(2/3)`` and the step size shrinks as ``T^(-1/3)`` with the token
budget ``T`` (:func:`hf_ext.optim.critical_batch_size`; the powers are :func:`critical_scaling`'s), so when
training continues from budget ``T_{k-1}`` to ``T_k``, the stage up to ``T_k`` runs at

    B_k S_k = B_0 S_0 (T_k / T_0)^(2/3),      lr_k = lr_0 (T_0 / T_k)^(1/3)

with the growth of ``B S`` split between the sequence length (share ``seq_share``, in multiples of
``S_0``) and the batch size (multiples of ``multiple``: the micro-batches of one optimizer step).
Stage ``k`` takes as many whole steps as come nearest its ``T_k - T_{k-1}`` tokens; the realized
budgets (``Stage.end_tokens``) are what the data pipeline delivers, to the token. :meth:`BatchSchedule.ending_at`
runs the rule backwards: the stages that end at a batch found best for the whole budget.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..._validation import check_field_type, check_finite, check_finite_number
from .critical_batch import critical_scaling


@dataclass(frozen=True)
class Stage:
    """One stage: ``steps`` optimizer steps of ``batch_size`` sequences of ``seq_len`` tokens at ``lr_factor``."""

    budget: int  # the nominal cumulative token budget T_k this stage trains up to
    batch_size: int
    seq_len: int
    steps: int
    lr_factor: float
    first_step: int  # global optimizer steps before this stage
    start_tokens: int  # tokens trained before this stage

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def end_tokens(self) -> int:
        return self.start_tokens + self.steps * self.tokens_per_step


class BatchSchedule:
    """Stages for the cumulative token ``budgets`` ``T_0 < T_1 < ...`` starting from ``batch_size`` x ``seq_len``.

    Args:
        budgets: increasing cumulative token budgets; one budget is a fixed schedule.
        batch_size: ``B_0``, the batch size of the first stage.
        seq_len: ``S_0``, the sequence length of the first stage.
        seq_share: the share of the growth of ``B S`` that goes to the sequence length, in [0, 1].
        max_seq_len: the model's context; a stage beyond it is refused.
        multiple: every batch size is a multiple of it (gradient accumulation steps x processes).
    """

    def __init__(
        self,
        budgets: Sequence[int],
        batch_size: int,
        seq_len: int,
        seq_share: float = 0.5,
        max_seq_len: int | None = None,
        multiple: int = 1,
    ):
        if isinstance(budgets, str) or not isinstance(budgets, Iterable):
            raise TypeError(f"BatchSchedule: `budgets` must be a list of token counts, got {budgets!r}")
        for budget in budgets:
            check_finite_number("BatchSchedule", "budgets", budget)
        check_finite_number("BatchSchedule", "seq_share", seq_share)
        check_field_type("BatchSchedule", "max_seq_len", max_seq_len, int, allow_none=True)
        for name, value in (("batch_size", batch_size), ("seq_len", seq_len), ("multiple", multiple)):
            check_field_type("BatchSchedule", name, value, int)
            if value < 1:
                raise ValueError(f"BatchSchedule: `{name}` must be a positive integer, got {value!r}")
        if not budgets or any(not b > 0 for b in budgets):
            raise ValueError(
                f"BatchSchedule: `budgets` must be a non-empty list of positive token counts, got {budgets}"
            )
        if any(later <= earlier for earlier, later in zip(budgets, budgets[1:], strict=False)):
            raise ValueError(f"BatchSchedule: `budgets` must be strictly increasing, got {list(budgets)}")
        if not 0 <= seq_share <= 1:
            raise ValueError(f"BatchSchedule: `seq_share` must be in [0, 1], got {seq_share}")
        if batch_size % multiple:
            raise ValueError(
                f"BatchSchedule: `batch_size` ({batch_size}) must be a multiple of `multiple` ({multiple})"
            )
        self.settings = {
            "budgets": [int(b) for b in budgets],
            "batch_size": batch_size,
            "seq_len": seq_len,
            "seq_share": seq_share,
            "max_seq_len": max_seq_len,
            "multiple": multiple,
        }
        self.stages = self._stages(max_seq_len)

    def _stages(self, max_seq_len: int | None) -> list[Stage]:
        s = self.settings
        stages, step, tokens = [], 0, 0
        for index, budget in enumerate(s["budgets"]):
            growth, factor = critical_scaling(budget, s["budgets"][0])
            seq_len = s["seq_len"] * max(1, round(growth ** s["seq_share"]))
            if max_seq_len is not None and seq_len > max_seq_len:
                raise ValueError(
                    f"BatchSchedule: stage {index} (budget {budget}) needs sequences of {seq_len} tokens, above "
                    f"`max_seq_len` ({max_seq_len}, the model's context); lower `seq_share` or the budgets"
                )
            batch = s["batch_size"] * s["seq_len"] * growth / seq_len
            batch_size = s["multiple"] * max(1, round(batch / s["multiple"]))
            steps = max(1, round((budget - tokens) / (batch_size * seq_len)))
            stages.append(Stage(budget, batch_size, seq_len, steps, factor, step, tokens))
            step, tokens = step + steps, tokens + steps * batch_size * seq_len
        return stages

    @classmethod
    def ending_at(
        cls,
        tokens_per_step: float,
        budget: int,
        stages: int,
        stage_ratio: float,
        seq_len: int,
        seq_share: float = 0.5,
        max_seq_len: int | None = None,
        multiple: int = 1,
    ) -> "BatchSchedule":
        """``stages`` stages whose budgets grow by ``stage_ratio`` up to ``budget``, the last near ``tokens_per_step``
        (a batch found best for the whole budget): the rule backwards, ``B_0 S_0 = B* S* (T_0 / T)^(2/3)``.

        The other arguments are the constructor's; stage 0's batch is rounded to whole sequences of ``seq_len``.
        """
        for name, value in (("tokens_per_step", tokens_per_step), ("stage_ratio", stage_ratio)):
            check_finite("BatchSchedule.ending_at", name, value)
        if not isinstance(stages, int) or stages < 1:
            raise ValueError(f"BatchSchedule.ending_at: `stages` must be a positive integer, got {stages!r}")
        if not stage_ratio > 1 or not tokens_per_step > 0:
            raise ValueError(
                f"BatchSchedule.ending_at: `stage_ratio` must be > 1 and `tokens_per_step` > 0, got {stage_ratio} "
                f"and {tokens_per_step}"
            )
        budgets = [round(budget / stage_ratio**k) for k in reversed(range(stages))]
        first_tokens = tokens_per_step * critical_scaling(budgets[0], budgets[-1])[0]
        batch = max(multiple, multiple * round(first_tokens / seq_len / multiple))
        return cls(budgets, batch, seq_len, seq_share, max_seq_len, multiple)

    @property
    def total_steps(self) -> int:
        return self.stages[-1].first_step + self.stages[-1].steps

    @property
    def total_tokens(self) -> int:
        return self.stages[-1].end_tokens

    def stage_at(self, step: int) -> Stage:
        """The stage of the optimizer step that follows ``step`` completed steps (the last stage past the end)."""
        return next((s for s in self.stages if step < s.first_step + s.steps), self.stages[-1])

    def tokens_before(self, step: int) -> int:
        """Tokens trained in the first ``step`` optimizer steps."""
        stage = self.stage_at(step)
        return stage.start_tokens + (min(step, self.total_steps) - stage.first_step) * stage.tokens_per_step

    def __repr__(self) -> str:
        rows = ", ".join(f"{s.steps}x({s.batch_size}x{s.seq_len}, lr x{s.lr_factor:.3f})" for s in self.stages)
        return f"BatchSchedule({rows}; {self.total_tokens} tokens)"
