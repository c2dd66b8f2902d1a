"""Where likelihood moves: per-token log-probability changes between a reference and a trained policy.

Preference training can lower a response's total likelihood while generation still improves;
looking token by token shows that a small set of outlier tokens carries much of the change.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hf_ext.kernels import token_logprobs
from hf_ext.plotting import plot_histograms

from .regularizer import log_total_probability

RESPONSES = ("chosen", "rejected")


@dataclass
class TokenShift:
    """Per-token log-probs of each response under the reference and the policy, per response kind.

    ``reference_logps[kind][i]`` and ``policy_logps[kind][i]`` hold the log-probs of the tokens of
    response ``i``; ``tokens[kind]`` lists all response tokens of that kind, in the same order.
    """

    reference_logps: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    policy_logps: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    tokens: dict[str, list[str]] = field(default_factory=dict)

    @property
    def deltas(self) -> dict[str, torch.Tensor]:
        """``log p_policy - log p_reference`` of every response token, per kind."""
        return {
            kind: torch.cat([p - r for p, r in zip(self.policy_logps[kind], self.reference_logps[kind], strict=True)])
            for kind in self.policy_logps
        }

    def mean_logps(self, kind: str, model: str) -> torch.Tensor:
        """Length-normalized log-prob of each response of ``kind`` under ``model`` ("policy" or "reference")."""
        logps = {"policy": self.policy_logps, "reference": self.reference_logps}[model][kind]
        return torch.stack([x.mean() for x in logps])

    def log_total_probability(self, model: str) -> torch.Tensor:
        """``log P`` of each pair under ``model``, P = exp(mean log-prob chosen) + exp(mean log-prob rejected)."""
        return log_total_probability(self.mean_logps("chosen", model), self.mean_logps("rejected", model))

    def top_share(self, kind: str, fraction: float) -> float:
        """Share of the total absolute change carried by the top ``fraction`` of tokens (by |change|)."""
        magnitudes = self.deltas[kind].abs().sort(descending=True).values
        count = max(1, round(fraction * magnitudes.numel()))
        total = magnitudes.sum().item()
        return magnitudes[:count].sum().item() / total if total else 0.0

    def outliers(self, kind: str, count: int = 20) -> list[dict[str, Any]]:
        """The ``count`` tokens with the largest |change|, with their change."""
        deltas = self.deltas[kind]
        order = deltas.abs().argsort(descending=True)[:count].tolist()
        return [{"token": self.tokens[kind][i], "delta": deltas[i].item()} for i in order]

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers: per kind the mean log-probs before/after and the outlier shares, and log P."""
        report: dict[str, Any] = {}
        for kind, deltas in self.deltas.items():
            report[kind] = {
                "num_tokens": deltas.numel(),
                "mean_logps_reference": self.mean_logps(kind, "reference").mean().item(),
                "mean_logps_policy": self.mean_logps(kind, "policy").mean().item(),
                "mean_token_delta": deltas.mean().item(),
                "top_1pct_share": self.top_share(kind, 0.01),
                "top_5pct_share": self.top_share(kind, 0.05),
                "outliers": self.outliers(kind),
            }
        if set(RESPONSES) <= set(report):
            report["log_p"] = {m: self.log_total_probability(m).mean().item() for m in ("reference", "policy")}
        return report


def _encode(tokenizer, prompt, response) -> tuple[list[int], int]:
    """Token ids of prompt + response and the index where the response starts."""
    prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(prompt + response, tokenize=False)
    start = len(tokenizer(prompt_ids, add_special_tokens=False)["input_ids"])
    return tokenizer(full, add_special_tokens=False)["input_ids"], start


@torch.no_grad()
def _response_logprobs(
    model: PreTrainedModel, ids: list[list[int]], starts: list[int], pad_id: int
) -> list[torch.Tensor]:
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    for row, x in enumerate(ids):
        input_ids[row, : len(x)] = torch.tensor(x)
        attention[row, : len(x)] = 1
    device = next(model.parameters()).device
    logits = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).logits[:, :-1]
    per_token = token_logprobs(logits, input_ids[:, 1:].to(device)).cpu()
    return [per_token[row, start - 1 : len(x) - 1] for row, (x, start) in enumerate(zip(ids, starts, strict=True))]


def token_shift(
    policy: PreTrainedModel,
    reference: PreTrainedModel,
    dataset: Dataset,
    tokenizer: PreTrainedTokenizerBase,
    batch_size: int = 8,
) -> TokenShift:
    """Per-token log-prob changes of the chosen and rejected responses of a preference dataset.

    ``dataset`` needs conversational ``prompt``, ``chosen`` and ``rejected`` columns (as
    :func:`hf_ext.data.preference_dataset` produces).
    """
    missing = [c for c in ("prompt", *RESPONSES) if c not in dataset.column_names]
    if missing:
        raise ValueError(f"token_shift: `dataset` lacks columns {missing}; it needs prompt, chosen and rejected")
    was_training = policy.training, reference.training
    policy.eval()
    reference.eval()
    shift = TokenShift()
    try:
        for kind in RESPONSES:
            after, before, tokens = [], [], []
            for start in range(0, len(dataset), batch_size):
                rows = dataset.select(range(start, min(start + batch_size, len(dataset))))
                encoded = [_encode(tokenizer, p, r) for p, r in zip(rows["prompt"], rows[kind], strict=True)]
                ids, starts = [e[0] for e in encoded], [e[1] for e in encoded]
                pad = tokenizer.pad_token_id
                after.extend(_response_logprobs(policy, ids, starts, pad))
                before.extend(_response_logprobs(reference, ids, starts, pad))
                tokens.extend(
                    token for x, s in zip(ids, starts, strict=True) for token in tokenizer.convert_ids_to_tokens(x[s:])
                )
            shift.policy_logps[kind], shift.reference_logps[kind], shift.tokens[kind] = after, before, tokens
    finally:
        policy.train(was_training[0])
        reference.train(was_training[1])
    return shift


def write_report(shifts: dict[str, TokenShift], output_dir: str | Path, title: str) -> dict[str, dict[str, Any]]:
    """Write the summaries of named shifts as ``token_shift.json`` and their deltas as ``token_shift.png``.

    Returns the summaries by name; the token-shift and DPO recipes both report through it.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    summaries = {name: shift.summary() for name, shift in shifts.items()}
    (out / "token_shift.json").write_text(json.dumps(summaries, indent=2))
    deltas = {
        f"{name} {kind}": values.tolist() for name, shift in shifts.items() for kind, values in shift.deltas.items()
    }
    plot_histograms(deltas, out / "token_shift.png", title, "log p(policy) - log p(reference) per response token")
    return summaries
