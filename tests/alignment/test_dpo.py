import pytest
import torch
from trl import DPOConfig, DPOTrainer

from hf_ext.alignment import RegularizedDPOConfig, RegularizedDPOTrainer, log_total_probability, mean_token_logprobs
from hf_ext.data import preference_dataset
from hf_ext.models import tiny_causal_lm


def _trainer(cls, args):
    model, tokenizer = tiny_causal_lm(seed=0)
    reference, _ = tiny_causal_lm(seed=1)  # differs from the policy, so log P and its anchor differ
    return cls(
        model=model, ref_model=reference, args=args, train_dataset=preference_dataset(8), processing_class=tokenizer
    )


def _loss_and_batch(trainer):
    batch = next(iter(trainer.get_train_dataloader()))
    return trainer.compute_loss(trainer.model, batch), batch


def _independent_log_p(model, batch):
    """log P from a plain forward (full logits), without TRL's fused head or our hook."""
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    means = mean_token_logprobs(logits, batch["input_ids"][:, 1:], batch["completion_mask"][:, 1:])
    return log_total_probability(*means.chunk(2))


def test_zero_coefficient_is_trl_dpo_exactly(training_args):
    plain, _ = _loss_and_batch(_trainer(DPOTrainer, training_args(DPOConfig)))
    regularized_trainer = _trainer(RegularizedDPOTrainer, training_args(RegularizedDPOConfig, regularizer_coef=0.0))
    regularized, _ = _loss_and_batch(regularized_trainer)
    assert regularized.item() == plain.item()
    assert regularized_trainer._metrics["train"]["regularizer/penalty"][0] > 0


@pytest.mark.parametrize("form", ["one_sided", "two_sided"])
def test_loss_adds_the_penalty_on_log_p_against_the_reference(training_args, form):
    plain, _ = _loss_and_batch(_trainer(DPOTrainer, training_args(DPOConfig)))
    config = training_args(RegularizedDPOConfig, regularizer_coef=2.0, regularizer_form=form)
    trainer = _trainer(RegularizedDPOTrainer, config)
    loss, batch = _loss_and_batch(trainer)
    deviation = _independent_log_p(trainer.model, batch) - _independent_log_p(trainer.ref_model, batch)
    penalty = torch.relu(-deviation) if form == "one_sided" else deviation.square()
    assert loss.item() == pytest.approx(plain.item() + 2.0 * penalty.mean().item(), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"regularizer_coef": -1.0}, "regularizer_coef"),
        ({"regularizer_form": "l1"}, "regularizer_form"),
        ({"beta": -0.1}, "beta"),  # TRL took it: the loss then favoured the rejected completion
        ({"beta": 0.0}, "beta"),  # TRL took it: a loss of constant log 2, nothing learned
    ],
)
def test_bad_config_names_the_field(training_args, kwargs, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        training_args(RegularizedDPOConfig, **kwargs)


def test_peft_reference_is_the_adapter_as_it_was_at_construction(training_args):
    """TRL keeps a copy of an existing adapter, named "ref", as the reference: moving the trained
    adapter afterwards must show up as a penalty against that copy."""
    from peft import LoraConfig, get_peft_model

    model, tokenizer = tiny_causal_lm(seed=0)
    model = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    args = training_args(RegularizedDPOConfig, regularizer_coef=1.0, regularizer_form="two_sided")
    trainer = RegularizedDPOTrainer(
        model=model, args=args, train_dataset=preference_dataset(8), processing_class=tokenizer
    )
    batch = next(iter(trainer.get_train_dataloader()))
    log_p_ref = _independent_log_p(trainer.model, batch)
    with torch.no_grad():
        for name, param in trainer.model.named_parameters():
            if "lora_B.default" in name:
                param.copy_(torch.randn_like(param))
    log_p = _independent_log_p(trainer.model, batch)
    loss = trainer.compute_loss(trainer.model, batch)
    metrics = trainer._metrics["train"]
    assert metrics["regularizer/log_p"][0] == pytest.approx(log_p.mean().item(), rel=1e-5)
    assert metrics["regularizer/log_p_ref"][0] == pytest.approx(log_p_ref.mean().item(), rel=1e-5)
    expected_penalty = (log_p - log_p_ref).square().mean().item()
    # The penalty is a small difference of two ~-10 values: compare it loosely, log P values tightly.
    assert metrics["regularizer/penalty"][0] == pytest.approx(expected_penalty, rel=1e-2)
    assert expected_penalty > 0 and torch.isfinite(loss)


def test_dataset_without_pairs_fails_at_construction(training_args):
    model, tokenizer = tiny_causal_lm()
    data = preference_dataset(4).rename_column("rejected", "other")
    with pytest.raises(ValueError, match=r"RegularizedDPOTrainer: the train dataset lacks columns \['rejected'\]"):
        RegularizedDPOTrainer(
            model=model, args=training_args(RegularizedDPOConfig), train_dataset=data, processing_class=tokenizer
        )
