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
    ProgressiveBinaryWeight,
    binarization_mix,
    binarize_model,
    binary_layers,
    ramp_length,
    set_binarization_mix,
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


def _lora(model):
    import peft

    config = peft.LoraConfig(r=2, target_modules=["q_proj", "up_proj"], lora_dropout=0.0)
    return peft.get_peft_model(model, config)


def test_on_a_peft_model_only_the_base_is_binarized_and_its_frozen_scales_stay_frozen(tiny_pair):
    model = _lora(tiny_pair[0])
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    errors = binarize_model(model)
    assert len(errors) == 2 * 7 and not any("lora_" in name for name in errors)
    assert isinstance(model.get_submodule(next(n for n in errors if n.endswith("q_proj.base_layer"))), nn.Linear)
    assert {name for name, parameter in model.named_parameters() if parameter.requires_grad} == trainable
    assert all(not layer.row_scale.requires_grad for layer in binary_layers(model).values())


def test_target_modules_name_a_peft_wrapped_layer_by_its_own_name(tiny_pair):
    model = _lora(tiny_pair[0])
    assert sorted(binarize_model(model, target_modules=["q_proj"])) == [
        f"base_model.model.model.layers.{i}.self_attn.q_proj.base_layer" for i in range(2)
    ]


class _Experts(nn.Module):
    """transformers 5's mixture-of-experts storage: expert stacks and per-expert biases (GPT-OSS)."""

    num_experts = 3

    def __init__(self):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.randn(3, 8, 4))
        self.gate_up_proj_bias = nn.Parameter(torch.randn(3, 8))


class _Router(nn.Module):
    num_experts = 3

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 4))
        self.bias = nn.Parameter(torch.randn(3))


class _Mixer(nn.Module):
    """A raw matrix that is no linear map (Mamba's ``A_log``): not binarized."""

    def __init__(self):
        super().__init__()
        self.A_log = nn.Parameter(torch.randn(4, 3))


def test_expert_stacks_and_routers_are_binarized_and_other_raw_tensors_are_not():
    torch.manual_seed(0)
    model = nn.ModuleDict({"experts": _Experts(), "gate": _Router(), "mixer": _Mixer()})
    assert sorted(binarize_model(model)) == ["experts.gate_up_proj", "gate"]
    stack = binary_layers(model)["experts.gate_up_proj"]
    assert isinstance(stack, ProgressiveBinaryWeight)
    assert stack.row_scale.shape == (3, 8) and stack.col_scale.shape == (3, 4)
    assert isinstance(model["experts"].gate_up_proj_bias, nn.Parameter)
    assert isinstance(model["mixer"].A_log, nn.Parameter)
    set_binarization_mix(model, 1.0)
    signs = torch.where(model["experts"].parametrizations.gate_up_proj.original >= 0, 1.0, -1.0)
    expected = stack.row_scale[..., None] * signs * stack.col_scale[:, None, :]
    assert torch.equal(model["experts"].gate_up_proj, expected)


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
        ({"start": -1}, "`start` must be an integer >= 0"),
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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": 1.5}, "`start` must be an integer >= 0, got 1.5"),  # was taken as a step
        ({"end": 2.5}, "`end` must be an integer >= 0, got 2.5"),
        ({"num_stages": "4"}, "`num_stages` must be an integer >= 1, got '4'"),  # failed comparing str and int
    ],
)
def test_steps_and_stage_counts_that_are_not_integers_are_refused_by_name(kwargs, message):
    with pytest.raises(TypeError, match="ProgressiveBinarizationCallback: " + message):
        ProgressiveBinarizationCallback(**kwargs)


def test_target_modules_that_are_neither_a_regex_nor_a_list_are_refused_by_name(tiny_pair):
    """An int failed as "'int' object is not iterable", naming nothing."""
    with pytest.raises(TypeError, match=r"binarize_model: `target_modules` must be a list \(\[5\] for one\)"):
        binarize_model(tiny_pair[0], target_modules=5)
