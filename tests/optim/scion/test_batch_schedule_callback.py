import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback

from hf_ext.data import PackedStream, PackedStreamCollator
from hf_ext.optim import BatchScheduleCallback, Scion

# Stage 0: 4 steps of 4 x 8 tokens; stage 1 (8x the budget): 7 steps of 8 x 16 tokens at half the step size.
SCHEDULE = {"budgets": [128, 1024], "batch_size": 4, "seq_len": 8, "max_seq_len": 64, "multiple": 2}
TOKENS = torch.randint(0, 40, (3000,), generator=torch.Generator().manual_seed(0))


def _model():
    config = LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


class Recorder(TrainerCallback):
    """Tokens the model saw in each optimizer step, and the learning rate that step used."""

    def __init__(self, model):
        self.tokens, self.lrs, self._count = [], [], 0
        model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        if module.training:
            self._count += kwargs["input_ids"].numel()

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        self.lrs.append(optimizer.param_groups[0]["lr"])

    def on_step_end(self, args, state, control, **kwargs):
        self.tokens.append(self._count)
        self._count = 0


def _trainer(training_args, output_dir, schedule_kwargs=SCHEDULE, **overrides):
    callback = BatchScheduleCallback(**schedule_kwargs)
    model = _model()
    settings = {
        "output_dir": output_dir,
        "max_steps": callback.schedule.total_steps,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 2,
        "train_sampling_strategy": "sequential",
        "learning_rate": 0.02,
        "lr_scheduler_type": "constant",
        "logging_steps": 1,
    }
    recorder = Recorder(model)
    trainer = Trainer(
        model=model,
        args=training_args(**settings | overrides),
        train_dataset=PackedStream(TOKENS, callback.schedule, micro_batches_per_step=2, seed=0),
        data_collator=PackedStreamCollator(),
        callbacks=[callback, recorder],
        optimizers=(Scion(model, lr=0.02), None),
    )
    return trainer, callback, recorder


def test_each_step_trains_the_tokens_and_step_size_the_schedule_says(training_args, tmp_path):
    trainer, callback, recorder = _trainer(training_args, tmp_path)
    trainer.train()
    assert recorder.tokens == [32] * 4 + [128] * 7
    assert sum(recorder.tokens) == callback.schedule.total_tokens == 1024
    assert recorder.lrs == pytest.approx([0.02] * 4 + [0.01] * 7)
    assert trainer.optimizer.param_groups[0]["lr"] == 0.02  # the scheduler's value is left as it was
    logged = [e for e in trainer.state.log_history if "schedule/seq_len" in e]
    assert [e["schedule/seq_len"] for e in logged] == [8] * 4 + [16] * 7
    assert logged[-1]["schedule/tokens"] == 1024


def test_packed_rows_are_contiguous_text_of_the_stage_length():
    callback = BatchScheduleCallback(**SCHEDULE)
    data = PackedStream(TOKENS, callback.schedule, micro_batches_per_step=2, seed=0)
    assert len(data) == 22
    first, late = data[0]["input_ids"], data[21]["input_ids"]
    assert first.shape == (2, 8) and late.shape == (4, 16)
    stream = TOKENS.tolist()
    for row in late.tolist():
        start = next(i for i in range(0, len(stream), 16) if stream[i : i + 16] == row)
        assert start % 16 == 0
    assert PackedStreamCollator()([data[4], data[5]])["labels"].shape == (4, 8)


def test_resuming_mid_stage_continues_exactly(training_args, tmp_path):
    full, _, _ = _trainer(training_args, tmp_path / "full", save_strategy="steps", save_steps=6)
    full.train()
    resumed, _, recorder = _trainer(training_args, tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-6"))  # stage 1 began at step 4
    assert recorder.tokens == [128] * 5 and recorder.lrs == pytest.approx([0.01] * 5)
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_a_checkpoint_of_another_schedule_is_refused(training_args, tmp_path):
    full, _, _ = _trainer(training_args, tmp_path / "a", save_strategy="steps", save_steps=6)
    full.train()
    other = SCHEDULE | {"budgets": [128, 1200]}
    resumed, _, _ = _trainer(
        training_args, tmp_path / "b", other, max_steps=BatchScheduleCallback(**other).schedule.total_steps
    )
    with pytest.raises(ValueError, match=r"trained under another schedule \(\['budgets'\]\)"):
        resumed.train(resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-6"))


def test_trainer_settings_that_break_the_accounting_are_refused(training_args, tmp_path):
    trainer, _, _ = _trainer(
        training_args, tmp_path, train_sampling_strategy="random", gradient_accumulation_steps=1, max_steps=5
    )
    with pytest.raises(ValueError) as error:
        trainer.train()
    for needed in ("train_sampling_strategy='sequential'", "max_steps=11", "micro_batches_per_step=1"):
        assert needed in str(error.value)


def test_stream_arguments_are_checked():
    schedule = BatchScheduleCallback(**SCHEDULE).schedule
    with pytest.raises(ValueError, match=r"batch sizes \[4, 8\] do not split into 3 micro-batches"):
        PackedStream(TOKENS, schedule, micro_batches_per_step=3)
    with pytest.raises(ValueError, match="10 tokens cannot fill one row of 16"):
        PackedStream(TOKENS[:10], schedule)
