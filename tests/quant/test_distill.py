import math

import pytest
import torch
from torch.nn import functional as F
from transformers import TrainingArguments

from hf_ext.quant import LogitDistillationTrainer, distillation_loss


def test_loss_is_temperature_scaled_forward_kl_over_labelled_positions_plus_weighted_ce():
    generator = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 5, 11, generator=generator), torch.randn(2, 5, 11, generator=generator)
    labels = torch.randint(0, 11, (2, 5), generator=generator)
    labels[0, 3] = -100  # position 2 of row 0 predicts nothing
    losses = distillation_loss(student, teacher, labels, temperature=2.0, lm_loss_weight=0.5)

    kept = [(row, t) for row in range(2) for t in range(4) if labels[row, t + 1] != -100]
    kl = (
        sum(
            F.kl_div(
                F.log_softmax(student[r, t] / 2, -1),
                F.log_softmax(teacher[r, t] / 2, -1),
                log_target=True,
                reduction="sum",
            )
            for r, t in kept
        )
        * 4
        / len(kept)
    )
    ce = sum(F.cross_entropy(student[r, t], labels[r, t + 1]) for r, t in kept) / len(kept)
    torch.testing.assert_close(losses["kl"], kl)
    torch.testing.assert_close(losses["lm"], ce)
    torch.testing.assert_close(losses["loss"], kl + 0.5 * ce)


def test_identical_student_and_teacher_have_zero_kl():
    logits = torch.randn(1, 4, 9)
    assert distillation_loss(logits, logits.clone(), torch.zeros(1, 4, dtype=torch.long))["kl"].abs() < 1e-6


def test_the_trainer_lowers_the_kl_to_the_teacher_and_logs_it(tiny_pair, token_blocks, distill_config):
    model, teacher, _ = tiny_pair
    with torch.no_grad():
        for parameter in model.model.layers.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    trainer = LogitDistillationTrainer(model, teacher, distill_config(max_steps=12), train_dataset=token_blocks)
    trainer.train()
    kl = [entry["distill/kl"] for entry in trainer.state.log_history if "distill/kl" in entry]
    assert len(kl) == 12 and kl[-1] < 0.75 * kl[0]
    assert all(not parameter.requires_grad for parameter in trainer.teacher_model.parameters())


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("distill_temperature", 0.0, "`distill_temperature` must be > 0"),
        ("lm_loss_weight", -1.0, "`lm_loss_weight` must be >= 0"),
    ],
)
def test_bad_config_values_name_the_field(distill_config, field, value, message):
    with pytest.raises(ValueError, match=message):
        distill_config(**{field: value})


def test_the_trainer_wants_a_distillation_config(tiny_pair, tmp_path):
    model, teacher, _ = tiny_pair
    with pytest.raises(TypeError, match="`args` must be a LogitDistillationConfig"):
        LogitDistillationTrainer(model, teacher, TrainingArguments(output_dir=str(tmp_path)))


def test_a_nan_loss_stops_training_naming_the_step_before_the_weights_change(tiny_pair, token_blocks, distill_config):
    model, teacher, _ = tiny_pair
    trainer = LogitDistillationTrainer(model, teacher, distill_config(max_steps=2), train_dataset=token_blocks)
    trainer.args.lm_loss_weight = math.nan  # past the config's own check, as any NaN reaching the loss would be
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with pytest.raises(FloatingPointError, match=r"LogitDistillationTrainer: the training loss is nan at step 1;"):
        trainer.train()
    assert all(torch.equal(tensor, before[name]) for name, tensor in model.state_dict().items())


def test_without_the_shift_position_t_is_scored_on_label_t_for_sequences_and_classes():
    """An encoder-decoder's decoder (fed shifted labels) and a classifier predict ``labels[t]``, not ``t + 1``."""
    generator = torch.Generator().manual_seed(0)
    sequence, classes = torch.randn(2, 5, 11, generator=generator), torch.randn(3, 4, generator=generator)
    labels = torch.randint(0, 11, (2, 5), generator=generator)
    labels[1, 0] = -100
    kept = labels != -100
    lm = distillation_loss(sequence, sequence, labels, shift=False)["lm"]
    torch.testing.assert_close(lm, F.cross_entropy(sequence[kept], labels[kept]))
    class_labels = torch.tensor([0, 3, 1])
    lm = distillation_loss(classes, classes, class_labels, shift=False)["lm"]
    torch.testing.assert_close(lm, F.cross_entropy(classes, class_labels))
