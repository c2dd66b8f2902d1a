"""The total length-normalized probability of a preference pair, and the penalty that keeps it up.

Direct alignment losses can push the chosen response's likelihood down together with the
rejected one. ``P = exp(mean log-prob of chosen) + exp(mean log-prob of rejected)`` measures
what the pair keeps in total; the regularizer penalises ``log P`` moving away from an anchor
(the reference model's ``log P`` for DPO).
"""

import torch
import torch.nn.functional as F

from hf_ext.kernels import token_logprobs

REGULARIZER_FORMS = ("one_sided", "two_sided")


def mean_token_logprobs(
    logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, chunk_size: int = 4096
) -> torch.Tensor:
    """Length-normalized log-probability per sequence: mean over ``mask`` of ``log p(label)``.

    ``logits`` ``(batch, seq, vocab)`` must already be aligned with ``labels`` ``(batch, seq)``
    (i.e. shifted for causal LMs); ``mask`` marks the response tokens.
    """
    mask = mask.to(torch.bool)
    per_token = token_logprobs(logits, labels.masked_fill(~mask, 0), chunk_size=chunk_size) * mask
    return per_token.sum(-1) / mask.sum(-1).clamp(min=1)


def log_total_probability(chosen_mean_logps: torch.Tensor, rejected_mean_logps: torch.Tensor) -> torch.Tensor:
    """``log P = log(exp(chosen) + exp(rejected))``, computed stably."""
    return torch.logaddexp(chosen_mean_logps, rejected_mean_logps)


def probability_regularizer(log_p: torch.Tensor, anchor_log_p: torch.Tensor, form: str) -> torch.Tensor:
    """Per-pair penalty on ``log P`` relative to its (detached) anchor.

    ``"one_sided"``: ``max(0, anchor - log P)``, only a drop below the anchor is penalised.
    ``"two_sided"``: ``(log P - anchor)^2``, any deviation is.
    """
    deviation = log_p - anchor_log_p.detach()
    if form == "one_sided":
        return F.relu(-deviation)
    if form == "two_sided":
        return deviation.square()
    raise ValueError(f"`form` must be one of {REGULARIZER_FORMS}, got {form!r}")
