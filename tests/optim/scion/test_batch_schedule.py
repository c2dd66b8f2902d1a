import pytest

from hf_ext.optim import BatchSchedule


def test_the_rule_grows_tokens_per_step_as_t_to_the_two_thirds_and_shrinks_the_step_as_t_to_the_minus_third():
    schedule = BatchSchedule([4096, 32768, 262144], batch_size=4, seq_len=16, seq_share=0.5)
    first, second, third = schedule.stages
    # T grows 8x per stage: B S grows 8^(2/3) = 4x, split as 2x longer sequences and 2x larger batches.
    assert (first.batch_size, first.seq_len) == (4, 16)
    assert (second.batch_size, second.seq_len) == (8, 32)
    assert (third.batch_size, third.seq_len) == (16, 64)
    assert [s.lr_factor for s in schedule.stages] == pytest.approx([1.0, 0.5, 0.25])
    # Stage k covers T_k - T_{k-1} tokens in whole steps: 4096 / 64, 28672 / 256, 229376 / 1024.
    assert [s.steps for s in schedule.stages] == [64, 112, 224]
    assert [s.end_tokens for s in schedule.stages] == [4096, 32768, 262144]
    assert schedule.total_steps == 400 and schedule.total_tokens == 262144


def test_all_growth_in_the_batch_and_rounding_to_the_micro_batches():
    schedule = BatchSchedule([1000, 8000], batch_size=6, seq_len=10, seq_share=0.0, multiple=3)
    assert [(s.batch_size, s.seq_len) for s in schedule.stages] == [(6, 10), (24, 10)]
    assert schedule.stages[0].steps == 17  # round(1000 / 60): the realized budget is reported, not the nominal one
    assert schedule.stages[0].end_tokens == 1020 and schedule.stages[1].start_tokens == 1020
    assert schedule.total_tokens == 1020 + schedule.stages[1].steps * 240


def test_step_lookup_and_token_counts():
    schedule = BatchSchedule([4096, 32768], batch_size=4, seq_len=16)
    assert schedule.stage_at(0) is schedule.stages[0] and schedule.stage_at(63) is schedule.stages[0]
    assert schedule.stage_at(64) is schedule.stages[1] and schedule.stage_at(10**6) is schedule.stages[1]
    assert schedule.tokens_before(64) == 4096 and schedule.tokens_before(65) == 4096 + 256
    assert schedule.tokens_before(schedule.total_steps) == schedule.total_tokens


def test_one_budget_is_a_fixed_schedule():
    schedule = BatchSchedule([6400], batch_size=4, seq_len=16)
    assert len(schedule.stages) == 1 and schedule.stages[0].steps == 100 and schedule.stages[0].lr_factor == 1.0


def test_a_schedule_ending_at_a_batch_runs_the_rule_backwards():
    schedule = BatchSchedule.ending_at(16 * 64, 2**17, stages=3, stage_ratio=4.0, seq_len=64)
    assert schedule.settings["budgets"] == [8192, 32768, 131072]
    # B0 S0 = 1024 (1/16)^(2/3) = 161 tokens: 3 sequences of 64; the last stage is back near 16 x 64.
    assert (schedule.stages[0].batch_size, schedule.stages[0].seq_len) == (3, 64)
    assert schedule.stages[-1].tokens_per_step == pytest.approx(1024, rel=0.25)
    assert schedule.stages[-1].lr_factor == pytest.approx(16 ** (-1 / 3))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stages": 0}, r"`stages` must be a positive integer, got 0"),
        ({"stage_ratio": 1.0}, r"`stage_ratio` must be > 1 and `tokens_per_step` > 0, got 1.0"),
        ({"tokens_per_step": 0.0}, r"`stage_ratio` must be > 1 and `tokens_per_step` > 0, got 4.0 and 0.0"),
        ({"stage_ratio": float("nan")}, "`stage_ratio` must be a finite number"),
    ],
)
def test_a_schedule_ending_at_a_batch_refuses_what_the_rule_cannot_use(kwargs, message):
    arguments = {"tokens_per_step": 1024, "budget": 2**17, "stages": 3, "stage_ratio": 4.0, "seq_len": 64}
    with pytest.raises(ValueError, match=message):
        BatchSchedule.ending_at(**arguments | kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budgets": [100, 100]}, r"`budgets` must be strictly increasing, got \[100, 100\]"),
        ({"budgets": [200, 100]}, "`budgets` must be strictly increasing"),
        ({"budgets": []}, "`budgets` must be a non-empty list"),
        ({"budgets": [100, float("nan")]}, "`budgets` must be a finite number"),
        ({"seq_share": 1.5}, r"`seq_share` must be in \[0, 1\]"),
        ({"batch_size": 0}, "`batch_size` must be a positive integer"),
        ({"multiple": 3}, r"`batch_size` \(4\) must be a multiple of `multiple` \(3\)"),
        ({"budgets": [1024, 65536], "max_seq_len": 32}, r"stage 1 .* sequences of 64 tokens, above `max_seq_len` \(32"),
        ({"seq_len": 64, "max_seq_len": 32}, r"stage 0 .* sequences of 64 tokens"),
    ],
)
def test_bad_schedules_are_refused_with_the_field_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BatchSchedule(**({"budgets": [1024, 8192], "batch_size": 4, "seq_len": 16} | kwargs))
