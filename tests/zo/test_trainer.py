import math

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from transformers import DataCollatorForSeq2Seq

from hf_ext.data import arithmetic_dataset
from hf_ext.data.sft import tokenize_prompt_completion
from hf_ext.models import tiny_causal_lm
from hf_ext.zo import AGZOConfig, MeZOConfig, ZOTrainer

# Plain SGD on the estimate, logged every step; the shared CPU settings come from tests/conftest.py.
ZO_SETTINGS = {
    "max_steps": 10,
    "learning_rate": 0.1,
    "lr_scheduler_type": "constant",
    "max_grad_norm": 0.0,
    "logging_steps": 1,
    "seed": 0,
}


def _regression_data(n=64, seed=0, poison=False):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=generator)
    y = x @ torch.randn(6, 4, generator=generator)
    if poison:
        x = x * math.nan
    return Dataset.from_dict({"x": x.tolist(), "y": y.tolist()})


def _regression_loss(model, data):
    with torch.no_grad():
        return model(torch.tensor(data["x"]), torch.tensor(data["y"]))["loss"].item()


@pytest.mark.parametrize(
    ("config", "lr"), [(MeZOConfig(eps=1e-3), 0.02), (AGZOConfig(eps=1e-3, rank=6), 0.1)], ids=["mezo", "agzo"]
)
def test_zo_training_reduces_a_least_squares_loss(training_args, make_least_squares, config, lr):
    model, data = make_least_squares(), _regression_data()
    before = _regression_loss(model, data)
    args = training_args(**ZO_SETTINGS | dict(max_steps=200, learning_rate=lr))
    trainer = ZOTrainer(model, args, train_dataset=data, zo_config=config)
    trainer.train()
    after = _regression_loss(model, data)
    assert after < 0.5 * before, (before, after)
    logged = [entry for entry in trainer.state.log_history if "zo/forward_passes" in entry]
    assert logged and all(entry["zo/forward_passes"] == 2 for entry in logged)
    assert all("grad_norm" not in entry for entry in trainer.state.log_history)


def test_gradient_accumulation_estimates_the_accumulated_batch(training_args, make_least_squares):
    data = _regression_data(n=32)
    results = []
    for batch, accumulation in ((8, 1), (4, 2)):
        model = make_least_squares(seed=3)
        shape = dict(per_device_train_batch_size=batch, gradient_accumulation_steps=accumulation, max_steps=3)
        args = training_args(**ZO_SETTINGS | shape)
        # On a quadratic the central difference is exact for any eps; a large one limits fp32 rounding.
        ZOTrainer(model, args, train_dataset=data, zo_config=MeZOConfig(eps=0.1)).train()
        results.append(model.proj.weight.detach().clone())
    torch.testing.assert_close(results[0], results[1], atol=1e-5, rtol=1e-4)


def test_non_finite_loss_skips_the_step_and_leaves_parameters_exactly(training_args, make_least_squares):
    model = make_least_squares()
    before = model.proj.weight.detach().clone()
    config = MeZOConfig(other_params="isotropic", weight_decay=0.1)
    trainer = ZOTrainer(
        model,
        training_args(**ZO_SETTINGS | dict(max_steps=3)),
        train_dataset=_regression_data(poison=True),
        zo_config=config,
    )
    trainer.train()
    assert torch.equal(model.proj.weight, before)
    assert sum(entry.get("zo/skipped_steps", 0) for entry in trainer.state.log_history) == 3
    # Not the Trainer's logging_nan_inf_filter running mean (0.0 at the first step): the losses were NaN.
    losses = [entry[key] for entry in trainer.state.log_history for key in ("loss", "train_loss") if key in entry]
    assert len(losses) == 4 and all(math.isnan(loss) for loss in losses)


def _lm_data(tokenizer, n=24):
    data = arithmetic_dataset(n, seed=5)
    return data.map(tokenize_prompt_completion, fn_kwargs={"tokenizer": tokenizer}, remove_columns=data.column_names)


def test_resumed_run_continues_exactly_as_an_uninterrupted_one(training_args, tmp_path):
    config = AGZOConfig(rank=2, subspace_refresh_interval=3, eps=1e-2)
    finals = []
    for resume in (False, True):
        model, tokenizer = tiny_causal_lm(seed=2)
        out = tmp_path / f"run-{resume}"
        args = training_args(
            **ZO_SETTINGS | dict(output_dir=out, max_steps=5, save_strategy="steps", save_steps=2, learning_rate=1e-3)
        )
        collator = DataCollatorForSeq2Seq(tokenizer, padding=True)
        trainer = ZOTrainer(model, args, train_dataset=_lm_data(tokenizer), data_collator=collator, zo_config=config)
        if resume:
            # Train past step 2 (writing checkpoint-2), then restart a differently initialised model from it.
            trainer.train()
            model, tokenizer = tiny_causal_lm(seed=99)
            trainer = ZOTrainer(
                model, args, train_dataset=_lm_data(tokenizer), data_collator=collator, zo_config=config
            )
            trainer.train(resume_from_checkpoint=str(out / "checkpoint-2"))
        else:
            trainer.train()
        finals.append({n: p.detach().clone() for n, p in model.named_parameters()})
    assert finals[0].keys() == finals[1].keys()
    assert all(torch.equal(finals[0][n], finals[1][n]) for n in finals[0])


def test_peft_lora_model_trains_only_its_adapters(training_args):
    model, tokenizer = tiny_causal_lm(seed=4)
    model = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"], lora_dropout=0.1))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = training_args(**ZO_SETTINGS | dict(max_steps=3, learning_rate=1e-2))
    collator = DataCollatorForSeq2Seq(tokenizer, padding=True)
    ZOTrainer(
        model, args, train_dataset=_lm_data(tokenizer), data_collator=collator, zo_config=AGZOConfig(rank=2)
    ).train()
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all("lora_" in n for n in changed)
    assert any("lora_A" in n for n in changed) and any("lora_B" in n for n in changed)


@pytest.mark.parametrize(
    ("overrides", "kwargs", "message"),
    [
        ({"max_grad_norm": 1.0}, {}, "`max_grad_norm` must be 0"),
        ({"weight_decay": 0.1}, {}, "zo_config.weight_decay"),
        ({"learning_rate": math.nan}, {}, "TrainingArguments: `learning_rate` must be a finite number"),
        ({}, {"zo_config": {"eps": 1e-3}}, "`zo_config` must be an AGZOConfig or MeZOConfig"),
        ({}, {"optimizers": (torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1), None)}, "only a scheduler"),
        # issue 72: built, then train() failed in torch's sampler ("num_samples should be a positive integer")
        ({}, {"train_dataset": []}, "ZOTrainer: `train_dataset` is empty"),
    ],
)
def test_unsupported_arguments_are_rejected_at_construction(
    training_args, make_least_squares, overrides, kwargs, message
):
    args = training_args(**ZO_SETTINGS | overrides)
    with pytest.raises((ValueError, TypeError), match=message):
        ZOTrainer(make_least_squares(), args, **{"train_dataset": _regression_data()} | kwargs)


@pytest.mark.slow
def test_torch_compile_trains_as_eager(training_args, make_least_squares):
    """TrainingArguments(torch_compile=True): inductor compiles the model, the perturbation hooks run eagerly."""
    finals = []
    for compiled in (False, True):
        model = make_least_squares()
        args = training_args(**ZO_SETTINGS | dict(max_steps=4, torch_compile=compiled))
        trainer = ZOTrainer(model, args, train_dataset=_regression_data(), zo_config=AGZOConfig(rank=2, eps=1e-2))
        trainer.train()
        assert (type(trainer.model_wrapped).__name__ == "OptimizedModule") == compiled
        finals.append(model.proj.weight.detach().clone())
    moved = (finals[0] - make_least_squares().proj.weight).abs().max().item()
    torch.testing.assert_close(finals[1], finals[0], atol=1e-4 * moved, rtol=0)


def test_a_moe_model_trains_its_router_and_experts_on_padded_batches(training_args, make_tiny_mixtral):
    """Issue 71: AGZO left the router and the experts frozen without a word."""
    model = make_tiny_mixtral()
    ids = torch.randint(3, 32, (8, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[::2, 5:] = 0  # padded tokens are routed too, but left out of every basis
    data = Dataset.from_dict({"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)})
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = training_args(**ZO_SETTINGS | dict(max_steps=2, learning_rate=1e-2, per_device_train_batch_size=4))
    trainer = ZOTrainer(model, args, train_dataset=data, zo_config=AGZOConfig(rank=2))
    trainer.train()
    moe = [n for n in before if ".mlp." in n]
    assert len(moe) == 3 and all(not torch.equal(model.get_parameter(n), before[n]) for n in moe)
