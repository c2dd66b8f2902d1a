import copy

import pytest
import torch
from safetensors.torch import load_file
from torch import nn
from transformers import TrainerCallback

from hf_ext.quant import (
    LogitDistillationTrainer,
    ProgressiveBinarizationCallback,
    ProgressiveBinaryLinear,
    binarization_mix,
    binarize_model,
    binary_layers,
    ramp_length,
)


def test_binarize_model_swaps_decoder_linears_and_keeps_embeddings_head_and_norms(tiny_pair):
    model, _, _ = tiny_pair
    errors = binarize_model(model)
    layers = binary_layers(model)
    assert set(errors) == set(layers) and len(layers) == 2 * 7
    assert all(0 < error < 1 for error in errors.values())
    assert not isinstance(model.lm_head, ProgressiveBinaryLinear)
    assert isinstance(model.model.embed_tokens, nn.Embedding)
    assert model.lm_head.weight is model.model.embed_tokens.weight


@pytest.mark.parametrize(
    ("target_modules", "expected"),
    [(["q_proj", "v_proj"], 4), (r".*layers\.0\.mlp\..*", 3)],
)
def test_target_modules_take_suffixes_or_a_regex(tiny_pair, target_modules, expected):
    model, _, _ = tiny_pair
    assert len(binarize_model(model, target_modules=target_modules)) == expected


def test_targets_that_match_nothing_are_refused_naming_the_layers(tiny_pair):
    model, _, _ = tiny_pair
    with pytest.raises(ValueError, match=r"`target_modules`=\['qproj'\].*end in \[.*'q_proj'"):
        binarize_model(model, target_modules=["qproj"])
    binarize_model(model)
    with pytest.raises(ValueError, match="matches no full-precision nn.Linear"):
        binarize_model(model)  # already binarized


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("linear", [0, 0, 0.25, 0.5, 0.75, 1, 1]),
        ("cosine", [0, 0, (1 - 2**-0.5) / 2, 0.5, (1 + 2**-0.5) / 2, 1, 1]),
        ("step", [0, 0, 0, 0.5, 0.5, 1, 1]),
    ],
)
def test_schedules_rise_from_start_to_end(schedule, expected):
    values = [binarization_mix(step, schedule, start=1, end=5, num_stages=2) for step in range(7)]
    assert values == pytest.approx(expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": 10, "end": 5}, r"`end` \(5\) must be after `start` \(10\)"),
        ({"schedule": "exp"}, r"`schedule` must be one of \['linear', 'cosine', 'step'\]"),
        ({"start": -1}, "`start` must be >= 0"),
    ],
)
def test_bad_schedules_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ProgressiveBinarizationCallback(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"max_steps": 30}, 15),
        ({"max_steps": 3, "binarize_fraction": 0.1}, 1),
        ({"max_steps": 30, "ramp_steps": 10}, 10),
        ({"max_steps": 30, "binarize_fraction": 0.9, "ramp_steps": 30}, 30),
    ],
)
def test_ramp_length_is_absolute_when_given_else_a_fraction(kwargs, expected):
    assert ramp_length(**kwargs) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_steps": 30, "ramp_steps": 31}, r"`ramp_steps` must be in \[1, max_steps=30\].*got 31"),
        ({"max_steps": 30, "ramp_steps": -5}, r"`ramp_steps` must be in \[1, max_steps=30\].*got -5"),
        ({"max_steps": 30, "ramp_steps": 0}, r"`ramp_steps` must be in \[1, max_steps=30\]"),
        ({"max_steps": 30, "binarize_fraction": 1.5}, r"`binarize_fraction` must be in \(0, 1\]"),
        ({"max_steps": 0}, "`max_steps` must be >= 1"),
        ({"max_steps": 30, "binarize_fraction": float("nan")}, "binarize_fraction"),
    ],
)
def test_bad_ramps_are_refused_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ramp_length(**kwargs)


def test_a_ramp_longer_than_the_run_is_refused_at_train_begin(tiny_pair, token_blocks, distill_config):
    model, teacher, _ = tiny_pair
    binarize_model(model)
    callback = ProgressiveBinarizationCallback(end=7)
    trainer = LogitDistillationTrainer(
        model, teacher, distill_config(), train_dataset=token_blocks, callbacks=[callback]
    )
    with pytest.raises(ValueError, match=r"`end` must be in \(0, max_steps=6\].*step 7"):
        trainer.train()


def test_a_schedule_starting_after_the_run_ends_is_refused_at_train_begin(tiny_pair, token_blocks, distill_config):
    model, teacher, _ = tiny_pair
    binarize_model(model)
    callback = ProgressiveBinarizationCallback(start=6)
    trainer = LogitDistillationTrainer(
        model, teacher, distill_config(), train_dataset=token_blocks, callbacks=[callback]
    )
    with pytest.raises(ValueError, match=r"ends at step 6 .* not after `start` \(6\)"):
        trainer.train()


def test_the_callback_drives_lambda_and_logs_it(tiny_pair, token_blocks, distill_config):
    model, teacher, _ = tiny_pair
    binarize_model(model)
    trainer = LogitDistillationTrainer(
        model,
        teacher,
        distill_config(),
        train_dataset=token_blocks,
        callbacks=[ProgressiveBinarizationCallback()],
    )
    trainer.train()
    logged = [entry["binarization/lambda"] for entry in trainer.state.log_history if "loss" in entry]
    assert logged == pytest.approx([0, 1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6])
    assert all(layer.mix.item() == 1.0 for layer in binary_layers(model).values())


def _train(model, teacher, data, config, output_dir, resume=None, stop_at=None):
    class StopAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = state.global_step == stop_at

    args = config(output_dir=str(output_dir), save_strategy="steps", save_steps=3)
    callbacks = [ProgressiveBinarizationCallback(), StopAt()]
    trainer = LogitDistillationTrainer(model, teacher, args, train_dataset=data, callbacks=callbacks)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def test_resume_mid_schedule_continues_lambda_scales_and_weights(tiny_pair, token_blocks, distill_config, tmp_path):
    model, teacher, _ = tiny_pair
    fresh = copy.deepcopy(model)
    binarize_model(model)
    _train(model, teacher, token_blocks, distill_config, tmp_path / "straight")

    interrupted = copy.deepcopy(fresh)
    binarize_model(interrupted)
    _train(interrupted, teacher, token_blocks, distill_config, tmp_path / "resumed", stop_at=3)
    saved = load_file(tmp_path / "resumed" / "checkpoint-3" / "model.safetensors")
    assert saved["model.layers.0.self_attn.q_proj.mix"].item() == pytest.approx(2 / 6)  # lambda of step 3

    resumed = copy.deepcopy(fresh)
    binarize_model(resumed)
    _train(
        resumed,
        teacher,
        token_blocks,
        distill_config,
        tmp_path / "resumed",
        resume=str(tmp_path / "resumed" / "checkpoint-3"),
    )
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[name], tensor, msg=name)
