"""Short training runs of both regularized trainers: gradient accumulation, PEFT LoRA, a NaN loss."""

import math

import pytest
import torch
from peft import LoraConfig

from hf_ext.alignment import (
    RegularizedDPOConfig,
    RegularizedDPOTrainer,
    RegularizedSimPOConfig,
    RegularizedSimPOTrainer,
)
from hf_ext.data import preference_dataset
from hf_ext.models import tiny_causal_lm

ALGORITHMS = {
    "dpo": (RegularizedDPOTrainer, RegularizedDPOConfig),
    "simpo": (RegularizedSimPOTrainer, RegularizedSimPOConfig),
}


def _trainer(algorithm, training_args, peft_config=None, **overrides):
    trainer_class, config_class = ALGORITHMS[algorithm]
    model, tokenizer = tiny_causal_lm(seed=0)
    reference = {"ref_model": tiny_causal_lm(seed=1)[0]} if algorithm == "dpo" and peft_config is None else {}
    settings = {
        "max_steps": 2,
        "optim": "sgd",
        "learning_rate": 0.5,
        "max_grad_norm": 0.0,
        "regularizer_coef": 5.0,
        "regularizer_form": "two_sided",
        "logging_steps": 1,
    }
    trainer = trainer_class(
        model=model,
        args=training_args(config_class, **settings | overrides),
        train_dataset=preference_dataset(8),
        processing_class=tokenizer,
        peft_config=peft_config,
        **reference,
    )
    return trainer


def _train(algorithm, training_args, peft_config=None, **overrides):
    trainer = _trainer(algorithm, training_args, peft_config, **overrides)
    trainer.train()
    return trainer


@pytest.mark.parametrize("algorithm", ["dpo", "simpo"])
def test_gradient_accumulation_gives_the_large_batch_update(training_args, algorithm):
    # Two steps, so that SimPO's policy has left its anchors and the penalty has a gradient.
    whole = _train(algorithm, training_args, per_device_train_batch_size=4)
    halves = _train(algorithm, training_args, per_device_train_batch_size=2, gradient_accumulation_steps=2)
    start = tiny_causal_lm(seed=0)[0].state_dict()
    for (name, a), b in zip(whole.model.state_dict().items(), halves.model.state_dict().values(), strict=True):
        assert not torch.equal(a, start[name]), name
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4, msg=name)
    assert any("regularizer/penalty" in entry for entry in halves.state.log_history)


@pytest.mark.parametrize("algorithm", ["dpo", "simpo"])
def test_lora_training_moves_only_the_adapter_and_logs_the_regularizer(training_args, algorithm):
    lora = LoraConfig(r=2, target_modules=["q_proj", "v_proj"], lora_dropout=0.0, task_type="CAUSAL_LM")
    trainer = _train(algorithm, training_args, peft_config=lora)
    base = tiny_causal_lm(seed=0)[0].state_dict()
    for name, param in trainer.model.named_parameters():
        if "lora_" not in name:
            key = name.replace("base_model.model.", "").replace(".base_layer", "")
            assert torch.equal(param, base[key]), name
    logged = [entry for entry in trainer.state.log_history if "regularizer/log_p" in entry]
    assert len(logged) == 2 and all(torch.isfinite(torch.tensor(entry["loss"])) for entry in logged)


@pytest.mark.parametrize("algorithm", ["dpo", "simpo"])
def test_a_nan_loss_stops_training_naming_the_step_before_the_weights_change(training_args, algorithm):
    """Issue 16: a NaN coefficient was logged as loss 0.0 (the Trainer's NaN filter) while the weights became NaN."""
    trainer = _trainer(algorithm, training_args)
    trainer.args.regularizer_coef = math.nan  # past the config's own check, as any NaN reaching the loss would be
    before = {name: tensor.clone() for name, tensor in trainer.model.state_dict().items()}
    with pytest.raises(FloatingPointError, match=r"Trainer: the training loss is nan at step 1;"):
        trainer.train()
    assert all(torch.equal(tensor, before[name]) for name, tensor in trainer.model.state_dict().items())
    assert not [entry for entry in trainer.state.log_history if "loss" in entry]
