"""SimPO with the total-probability regularizer, on TRL's CPO trainer (``loss_type="simpo"``).

SimPO has no reference model, so the anchor of each pair is the policy's own ``log P`` on that
pair before training: computed once when the trainer is built (one no-grad forward over the
datasets, like TRL's precomputed reference log-probs) and carried in the batches as a column.
"""

from dataclasses import dataclass, field

import torch
from torch.utils.data import DataLoader
from trl.experimental.cpo import CPOConfig, CPOTrainer

from .._validation import check_finite_fields, check_finite_loss
from .dpo import TotalProbabilityArguments, require_causal_lm, require_pair_columns
from .regularizer import log_total_probability, probability_regularizer

# TRL's pairwise collator turns columns ending in "_logps" into tensors.
ANCHOR_COLUMN = "total_prob_anchor_logps"


@dataclass
class RegularizedSimPOConfig(CPOConfig, TotalProbabilityArguments):
    """``CPOConfig`` set up as SimPO (``loss_type="simpo"``, ``cpo_alpha=0``) plus the regularizer."""

    loss_type: str = field(default="simpo", metadata={"help": "Must stay 'simpo'."})
    cpo_alpha: float = field(default=0.0, metadata={"help": "Must stay 0 for SimPO."})
    remove_unused_columns: bool = field(default=False, metadata={"help": "The pairwise collator needs all columns."})

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()
        self.check_regularizer()
        if self.loss_type != "simpo" or self.cpo_alpha != 0:
            raise ValueError(
                f"RegularizedSimPOConfig: needs loss_type='simpo' and cpo_alpha=0, got {self.loss_type!r} and "
                f"{self.cpo_alpha}"
            )


class RegularizedSimPOTrainer(CPOTrainer):
    """SimPO whose per-pair loss adds ``regularizer_coef * penalty(log P, log P before training)``.

    A NaN or inf training loss raises ``FloatingPointError`` naming the step, before its backward.
    """

    def __init__(self, model=None, args=None, data_collator=None, train_dataset=None, eval_dataset=None, **kwargs):
        require_causal_lm(model, type(self).__name__)
        for name, dataset in (("train", train_dataset), ("eval", eval_dataset)):
            if dataset is not None:
                require_pair_columns(dataset, type(self).__name__, name)
        super().__init__(model, args, data_collator, train_dataset, eval_dataset, **kwargs)
        self.train_dataset = self._with_anchors(self.train_dataset)
        if self.eval_dataset is not None:
            self.eval_dataset = self._with_anchors(self.eval_dataset)
        self._batch_anchors: torch.Tensor | None = None
        self._regularizer_metrics: dict[str, float] = {}

    @torch.no_grad()
    def _with_anchors(self, dataset):
        loader = DataLoader(dataset, batch_size=self.args.per_device_eval_batch_size, collate_fn=self.data_collator)
        was_training = self.model.training
        self.model.eval()
        anchors = []
        for batch in loader:
            chosen, rejected = self.concatenated_forward(self.model, batch)[:2]
            anchors.extend(log_total_probability(chosen, rejected).float().cpu().tolist())
        self.model.train(was_training)
        return dataset.add_column(ANCHOR_COLUMN, anchors)

    def get_batch_loss_metrics(self, model, batch, train_eval="train"):
        self._batch_anchors = batch[ANCHOR_COLUMN]
        loss, metrics = super().get_batch_loss_metrics(model, batch, train_eval)
        if train_eval == "train":
            check_finite_loss(type(self).__name__, loss, self.state.global_step + 1)
        prefix = "eval_" if train_eval == "eval" else ""
        metrics.update({prefix + name: value for name, value in self._regularizer_metrics.items()})
        return loss, metrics

    def cpo_loss(self, policy_chosen_logps, policy_rejected_logps):
        losses, chosen_rewards, rejected_rewards = super().cpo_loss(policy_chosen_logps, policy_rejected_logps)
        log_p = log_total_probability(policy_chosen_logps, policy_rejected_logps)
        anchors = self._batch_anchors.to(log_p.device, log_p.dtype)
        penalty = probability_regularizer(log_p, anchors, self.args.regularizer_form)
        if self.args.regularizer_coef:
            losses = losses + self.args.regularizer_coef * penalty
        gather = self.accelerator.gather_for_metrics
        self._regularizer_metrics = {
            "regularizer/mean_logps_chosen": gather(policy_chosen_logps.detach()).mean().item(),
            "regularizer/mean_logps_rejected": gather(policy_rejected_logps.detach()).mean().item(),
            "regularizer/log_p": gather(log_p.detach()).mean().item(),
            "regularizer/log_p_anchor": gather(anchors).mean().item(),
            "regularizer/penalty": gather(penalty.detach()).mean().item(),
        }
        return losses, chosen_rewards, rejected_rewards
