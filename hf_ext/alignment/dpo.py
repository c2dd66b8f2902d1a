"""DPO with a regularizer that keeps the total length-normalized probability of each pair."""

import contextlib
from dataclasses import dataclass, field

import torch
from trl import DPOConfig, DPOTrainer

from .._validation import check_finite_fields, check_finite_loss
from .regularizer import REGULARIZER_FORMS, log_total_probability, probability_regularizer

PAIR_COLUMNS = ("chosen", "rejected")


@dataclass
class TotalProbabilityArguments:
    """The regularizer's fields, shared by the DPO and SimPO configs."""

    regularizer_coef: float = field(
        default=1.0,
        metadata={
            "help": "Weight of the penalty on log P, P = exp(mean log-prob of chosen) + exp(mean log-prob of "
            "rejected); 0 gives TRL's loss exactly."
        },
    )
    regularizer_form: str = field(
        default="one_sided",
        metadata={
            "help": f"One of {REGULARIZER_FORMS}: 'one_sided' penalises max(0, anchor - log P), 'two_sided' "
            "(log P - anchor)^2."
        },
    )

    def check_regularizer(self) -> None:
        """Refuse the regularizer's fields, and a ``beta`` TRL takes that makes the preference loss a no-op (0) or
        reward the rejected completion (< 0)."""
        name = type(self).__name__
        if not self.beta > 0:
            raise ValueError(f"{name}: `beta` must be > 0, got {self.beta}")
        if self.regularizer_coef < 0:
            raise ValueError(f"{name}: `regularizer_coef` must be >= 0, got {self.regularizer_coef}")
        if self.regularizer_form not in REGULARIZER_FORMS:
            raise ValueError(
                f"{name}: `regularizer_form` must be one of {REGULARIZER_FORMS}, got {self.regularizer_form!r}"
            )


def require_pair_columns(dataset, owner: str, dataset_name: str) -> None:
    """Fail at construction, naming what is missing, when a dataset holds no preference pairs."""
    columns = dataset.column_names  # None for an IterableDataset whose features are unknown
    missing = [c for c in PAIR_COLUMNS if columns is not None and c not in columns]
    if missing:
        raise ValueError(
            f"{owner}: the {dataset_name} dataset lacks columns {missing}; preference data needs 'chosen' and "
            f"'rejected' (and optionally 'prompt'), got {columns}"
        )


def require_causal_lm(model, owner: str) -> None:
    """Refuse, before TRL fails deep in a forward, a model that is not a decoder-only language model.

    The regularizer reads per-token log-probs of the completion from the LM head; TRL's preference trainers
    score completions with a decoder-only forward (encoder-decoder models are not supported by them), and a
    classifier (BERT's ``classifier``) has no LM head. A model given by name is checked by TRL when it loads.
    """
    if not isinstance(model, torch.nn.Module):
        return
    config = getattr(model, "config", None)
    kind = type(getattr(model, "get_base_model", lambda: model)()).__name__
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"{owner}: `model` is an encoder-decoder model ({kind}); TRL's preference trainers score completions "
            "with a decoder-only forward: use a causal language model (an AutoModelForCausalLM)"
        )
    if getattr(model, "get_output_embeddings", lambda: None)() is None:
        raise ValueError(
            f"{owner}: `model` ({kind}) has no language-model head (get_output_embeddings() is None), so it gives "
            "no token log-probs to prefer one completion by: use a causal language model (an AutoModelForCausalLM)"
        )


@dataclass
class RegularizedDPOConfig(DPOConfig, TotalProbabilityArguments):
    """``trl.DPOConfig`` plus the total-probability regularizer, anchored at the reference model's ``log P``."""

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()
        self.check_regularizer()
        if self.ld_alpha is not None:
            raise ValueError("RegularizedDPOConfig: `ld_alpha` is not supported with the regularizer; leave it None")


def _mean_completion_logps(per_token_logps: torch.Tensor, shift_mask: torch.Tensor) -> torch.Tensor:
    per_token_logps = per_token_logps[:, -shift_mask.size(1) :]
    return (per_token_logps * shift_mask).sum(1) / shift_mask.sum(1).clamp(min=1)


class RegularizedDPOTrainer(DPOTrainer):
    """``trl.DPOTrainer`` whose loss adds ``regularizer_coef * mean(penalty(log P, log P_ref))``.

    The policy's per-token log-probs are taken from TRL's own forward (a forward hook reads the
    fused LM head's ``log_probs``), so the regularizer costs no extra forward. The reference's come
    from TRL's reference forward, or from its precomputed sums divided by the completion lengths.
    Logs ``regularizer/log_p``, ``regularizer/log_p_ref``, ``regularizer/penalty`` and the chosen and
    rejected mean log-probs. A NaN or inf training loss raises ``FloatingPointError`` naming the step,
    before its backward: the Trainer would log it as a finite running mean and train NaN weights.
    """

    def __init__(self, model, *args, **kwargs):
        require_causal_lm(model, type(self).__name__)
        super().__init__(model, *args, **kwargs)

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        require_pair_columns(dataset, type(self).__name__, dataset_name)
        return super()._prepare_dataset(dataset, processing_class, args, dataset_name)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        policy_logps, ref_logps = [], []
        with contextlib.ExitStack() as hooks:
            hooks.enter_context(self._capture(self.accelerator.unwrap_model(model), policy_logps))
            if self.ref_model is not None:
                hooks.enter_context(self._capture(self.accelerator.unwrap_model(self.ref_model), ref_logps))
            result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        loss = result[0] if return_outputs else result
        shift_mask = inputs["completion_mask"][..., 1:]
        policy_means = _mean_completion_logps(policy_logps[0], shift_mask)
        if self.precompute_ref_logps:
            lengths = shift_mask.sum(1).clamp(min=1).chunk(2)
            ref_chosen = inputs["ref_chosen_logps"] / lengths[0]
            ref_rejected = inputs["ref_rejected_logps"] / lengths[1]
        else:
            ref_output = ref_logps[0] if ref_logps else policy_logps[1]
            ref_chosen, ref_rejected = _mean_completion_logps(ref_output, shift_mask).chunk(2)
        chosen, rejected = policy_means.chunk(2)
        log_p = log_total_probability(chosen, rejected)
        log_p_ref = log_total_probability(ref_chosen, ref_rejected)
        penalty = probability_regularizer(log_p, log_p_ref, self.args.regularizer_form)
        if self.args.regularizer_coef:
            loss = loss + self.args.regularizer_coef * penalty.mean()
        self._log_regularizer(chosen, rejected, log_p, log_p_ref, penalty)
        if model.training:
            check_finite_loss(type(self).__name__, loss, self.state.global_step + 1)
        return (loss, result[1]) if return_outputs else loss

    @staticmethod
    @contextlib.contextmanager
    def _capture(module: torch.nn.Module, sink: list):
        def hook(_module, _args, _kwargs, output):
            sink.append(output.log_probs)

        handle = module.register_forward_hook(hook, with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()

    def _log_regularizer(self, chosen, rejected, log_p, log_p_ref, penalty) -> None:
        mode = "train" if self.model.training else "eval"
        for name, value in (
            ("regularizer/mean_logps_chosen", chosen),
            ("regularizer/mean_logps_rejected", rejected),
            ("regularizer/log_p", log_p),
            ("regularizer/log_p_ref", log_p_ref),
            ("regularizer/penalty", penalty),
        ):
            self._metrics[mode][name].append(self.accelerator.gather(value.detach()).mean().item())
