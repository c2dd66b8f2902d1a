"""Logit distillation from a full-precision teacher: the default objective of progressive binarization.

The student (the model being binarized) matches the teacher's distribution on every labelled
position: forward KL ``KL(teacher || student)`` at temperature ``T`` (scaled by ``T^2`` so gradients
keep their size), plus an optional cross-entropy on the labels. Positions are aligned with the labels
as the model's own loss aligns them: a causal LM's position ``t`` predicts ``labels[t + 1]``; an
encoder-decoder's decoder (fed ``labels`` shifted right, as in its own forward), a classifier and a
token classifier predict ``labels[t]``.

Not TRL's ``DistillationTrainer`` or ``trl.experimental.gkd.GKDTrainer``: both distil on completions
of a ``prompt``/``messages`` column (generated on-policy, or through GKD's chat collator) and have no
language-modelling term; binarization distils on pre-tokenized ``input_ids``/``labels`` blocks, which
takes one ``compute_loss`` on the stock ``Trainer``.
"""

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F
from transformers import Trainer, TrainingArguments

from .._validation import check_finite_fields, check_finite_loss


@dataclass
class LogitDistillationConfig(TrainingArguments):
    """``TrainingArguments`` plus the distillation loss's knobs."""

    distill_temperature: float = field(
        default=1.0, metadata={"help": "Softmax temperature of both teacher and student in the KL term (> 0)."}
    )
    lm_loss_weight: float = field(
        default=0.0, metadata={"help": "Weight of the next-token cross-entropy on the labels (>= 0; 0: KL only)."}
    )

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()
        if not self.distill_temperature > 0:
            raise ValueError(
                f"LogitDistillationConfig: `distill_temperature` must be > 0, got {self.distill_temperature}"
            )
        if not self.lm_loss_weight >= 0:
            raise ValueError(f"LogitDistillationConfig: `lm_loss_weight` must be >= 0, got {self.lm_loss_weight}")


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 1.0,
    lm_loss_weight: float = 0.0,
    shift: bool = True,
) -> dict[str, torch.Tensor]:
    """Mean over labelled positions of ``T^2 KL(teacher_T || student_T)`` (+ weighted CE).

    ``shift``: position ``t`` predicts ``labels[t + 1]`` (a causal LM); else ``labels[t]`` (a decoder fed shifted
    labels, a classifier's ``(batch, classes)`` logits). Positions whose label is -100 do not count.
    Returns ``loss``, ``kl`` and ``lm`` (the cross-entropy, computed whatever its weight).
    """
    if shift:
        student_logits, teacher_logits, labels = student_logits[:, :-1], teacher_logits[:, :-1], labels[:, 1:]
    mask = labels != -100
    student, teacher = student_logits[mask].float(), teacher_logits[mask].float()
    student_logp = F.log_softmax(student / temperature, dim=-1)
    teacher_logp = F.log_softmax(teacher / temperature, dim=-1)
    kl = (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1).mean() * temperature**2
    lm = F.cross_entropy(student, labels[mask])
    return {"loss": kl + lm_loss_weight * lm, "kl": kl, "lm": lm}


def _model_inputs(model: nn.Module, inputs: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], bool]:
    """The forward's inputs without ``labels`` (an encoder-decoder's decoder gets them shifted right, as its own
    forward would), and whether position ``t`` predicts ``labels[t + 1]`` (a left-to-right generator)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model's transformers model
    model_inputs = {key: value for key, value in inputs.items() if key != "labels"}
    encoder_decoder = getattr(base.config, "is_encoder_decoder", False)
    if encoder_decoder and "decoder_input_ids" not in model_inputs:
        model_inputs["decoder_input_ids"] = base.prepare_decoder_input_ids_from_labels(labels=inputs["labels"])
    return model_inputs, base.can_generate() and not encoder_decoder


class LogitDistillationTrainer(Trainer):
    """A ``Trainer`` whose loss is :func:`distillation_loss` against a frozen ``teacher_model``.

    The dataset needs ``input_ids`` and ``labels`` (``attention_mask`` optional), as causal-LM
    collators produce (target tokens for an encoder-decoder, class ids for a classifier). The teacher
    is moved to the training device and kept in eval mode. A NaN or inf training loss raises
    ``FloatingPointError`` naming the step, before its backward.
    """

    # The loss is a per-micro-batch mean: let Trainer divide it by the accumulation steps.
    loss_is_scaled_for_ga = False

    def __init__(self, model: nn.Module, teacher_model: nn.Module, args: LogitDistillationConfig, **kwargs):
        if not isinstance(args, LogitDistillationConfig):
            raise TypeError(
                f"LogitDistillationTrainer: `args` must be a LogitDistillationConfig, got {type(args).__name__}"
            )
        super().__init__(model=model, args=args, **kwargs)
        self.teacher_model = teacher_model.to(self.args.device).eval().requires_grad_(False)
        self._distill_metrics: dict[str, list[float]] = {"kl": [], "lm": []}

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs["labels"]
        model_inputs, shift = _model_inputs(self.accelerator.unwrap_model(model), inputs)
        outputs = model(**model_inputs)
        with torch.no_grad():
            teacher_logits = self.teacher_model(**model_inputs).logits
        losses = distillation_loss(
            outputs.logits, teacher_logits, labels, self.args.distill_temperature, self.args.lm_loss_weight, shift
        )
        for name in self._distill_metrics:
            self._distill_metrics[name].append(losses[name].item())
        if model.training:
            check_finite_loss(type(self).__name__, losses["loss"], self.state.global_step + 1)
        return (losses["loss"], outputs) if return_outputs else losses["loss"]

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        for name, values in self._distill_metrics.items():
            if values:
                logs[f"distill/{name}"] = sum(values) / len(values)
                values.clear()
        super().log(logs, start_time)
