import pytest
import torch
from trl.experimental.cpo import CPOConfig, CPOTrainer

from hf_ext.alignment import RegularizedSimPOConfig, RegularizedSimPOTrainer, log_total_probability
from hf_ext.data import preference_dataset
from hf_ext.models import tiny_causal_lm


def _shift_weights(model):
    """Move the policy away from where the anchors were taken."""
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.05 * torch.randn_like(param))


def _loss(trainer):
    batch = next(iter(trainer.get_train_dataloader()))
    return trainer.compute_loss(trainer.model, batch), batch


def _pair(training_args, **regularizer):
    torch.manual_seed(0)
    model, tokenizer = tiny_causal_lm(seed=0)
    plain_model, _ = tiny_causal_lm(seed=0)
    data = preference_dataset(8)
    config = training_args(RegularizedSimPOConfig, **regularizer)
    trainer = RegularizedSimPOTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer)
    plain_config = training_args(CPOConfig, loss_type="simpo", cpo_alpha=0.0)
    plain = CPOTrainer(model=plain_model, args=plain_config, train_dataset=data, processing_class=tokenizer)
    torch.manual_seed(1)
    _shift_weights(model)
    torch.manual_seed(1)
    _shift_weights(plain_model)
    return trainer, plain


def test_anchors_are_the_policy_log_p_before_training(training_args):
    model, tokenizer = tiny_causal_lm(seed=0)
    config = training_args(RegularizedSimPOConfig)
    trainer = RegularizedSimPOTrainer(
        model=model, args=config, train_dataset=preference_dataset(8), processing_class=tokenizer
    )
    _loss(trainer)
    metrics = trainer._regularizer_metrics
    assert metrics["regularizer/penalty"] == 0.0
    assert metrics["regularizer/log_p"] == pytest.approx(metrics["regularizer/log_p_anchor"], abs=1e-5)


def test_zero_coefficient_is_trl_simpo_exactly(training_args):
    trainer, plain = _pair(training_args, regularizer_coef=0.0)
    (loss, _), (plain_loss, _) = _loss(trainer), _loss(plain)
    assert loss.item() == plain_loss.item()
    assert trainer._regularizer_metrics["regularizer/penalty"] > 0


@pytest.mark.parametrize("form", ["one_sided", "two_sided"])
def test_loss_adds_the_penalty_against_the_cached_anchor(training_args, form):
    trainer, plain = _pair(training_args, regularizer_coef=3.0, regularizer_form=form)
    (loss, batch), (plain_loss, _) = _loss(trainer), _loss(plain)
    with torch.no_grad():
        log_p = log_total_probability(*trainer.concatenated_forward(trainer.model, batch)[:2])
    deviation = log_p - batch["total_prob_anchor_logps"]
    penalty = torch.relu(-deviation) if form == "one_sided" else deviation.square()
    assert loss.item() == pytest.approx(plain_loss.item() + 3.0 * penalty.mean().item(), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"loss_type": "sigmoid"}, "loss_type='simpo'"),
        ({"regularizer_coef": -0.5}, "`regularizer_coef`"),
        ({"beta": -2.0}, r"RegularizedSimPOConfig: `beta` must be > 0, got -2.0"),  # was taken by TRL
    ],
)
def test_bad_config_is_rejected(training_args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        training_args(RegularizedSimPOConfig, **kwargs)


def test_dataset_without_pairs_fails_at_construction(training_args):
    model, tokenizer = tiny_causal_lm()
    good, bad = preference_dataset(4), preference_dataset(4).remove_columns(["chosen", "rejected"])
    with pytest.raises(ValueError, match=r"the eval dataset lacks columns \['chosen', 'rejected'\]"):
        RegularizedSimPOTrainer(
            model=model,
            args=training_args(RegularizedSimPOConfig),
            train_dataset=good,
            eval_dataset=bad,
            processing_class=tokenizer,
        )
