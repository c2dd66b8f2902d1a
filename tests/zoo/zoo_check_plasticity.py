"""PlasticityCallback on the zoo: its weight metrics equal those of an equivalent read by hand.

- QK norms: every attention layer's equal those of the same weights split by hand (following each model's forward)
  into separate ``q_proj``/``k_proj`` projections: GPT-2's Conv1D ``c_attn`` read as ``x @ W``, Phi-3's ``qkv_proj``
  sliced, GPT-NeoX's ``query_key_value`` viewed per head, a LoRA model's from its ``merge_and_unload()``'d copy;
- weight statistics: equal to those of every hidden matrix taken alone (each expert of a 3-D tensor, a Conv1D weight
  transposed, the merged copy of a LoRA model), embeddings and heads left out;
- T5 runs (its decoder gets the probe shifted right) and reports its encoder, decoder and cross-attention layers.
"""

import copy
import math

import torch
from datasets import Dataset
from torch import nn
from zoo_architectures import LAYERS, VOCAB, build
from zoo_matrix import MethodCheck

from hf_ext.models.layout import model_layout
from hf_ext.plasticity import PlasticityCallback, effective_rank, query_key_norms


def _probe_set() -> Dataset:
    """Two labels, each drawn from its own half of the vocabulary."""
    labels = torch.arange(8) % 2
    half = VOCAB // 2
    ids = torch.randint(3, half, (8, 6), generator=torch.Generator().manual_seed(0)) + (half - 3) * labels[:, None]
    return Dataset.from_dict({"input_ids": ids.tolist(), "label": labels.tolist()})


def _attention_paths(architecture: str) -> dict[str, str]:
    """Each attention layer's metric key and module path, written out per architecture."""
    per_layer = {
        "gpt2": "transformer.h.{}.attn",
        "gptj": "transformer.h.{}.attn",
        "gpt_neox": "gpt_neox.layers.{}.attention",
        "bert": "bert.encoder.layer.{}.attention.self",
    }
    if architecture == "t5":
        stacks = {
            "encoder": "encoder.block.{}.layer.0.SelfAttention",
            "decoder": "decoder.block.{}.layer.0.SelfAttention",
            "cross": "decoder.block.{}.layer.1.EncDecAttention",
        }
        return {f"{stack}/layer_{i}": path.format(i) for stack, path in stacks.items() for i in range(LAYERS)}
    path = per_layer.get(architecture, "model.layers.{}.self_attn")
    return {f"layer_{i}": path.format(i) for i in range(LAYERS)}


def _query_key_by_hand(architecture: str, attention: nn.Module, config) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``(d_out, hidden)`` query and key maps of one attention, sliced as its transformers forward slices them."""
    heads, hidden = config.num_attention_heads, config.hidden_size
    key_heads = getattr(config, "num_key_value_heads", None) or heads
    if architecture == "gpt2":  # Conv1D: y = x @ W, W (hidden, 3 hidden); split(hidden, dim=2) gives q, k, v
        weight = attention.c_attn.weight
        return weight[:, :hidden].T, weight[:, hidden : 2 * hidden].T
    if architecture == "phi3":  # qkv[..., :query_pos], then num_key_value_heads * head_dim key rows
        head_dim = hidden // heads
        weight, query_pos = attention.qkv_proj.weight, heads * head_dim
        return weight[:query_pos], weight[query_pos : query_pos + key_heads * head_dim]
    if architecture == "gpt_neox":  # view(..., heads, 3 * head_size).chunk(3, dim=-1)
        head_size = hidden // heads
        per_head = attention.query_key_value.weight.view(heads, 3 * head_size, hidden)
        return per_head[:, :head_size].reshape(-1, hidden), per_head[:, head_size : 2 * head_size].reshape(-1, hidden)
    if architecture == "t5":
        return attention.q.weight, attention.k.weight
    if architecture == "bert":
        return attention.query.weight, attention.key.weight
    return attention.q_proj.weight, attention.k_proj.weight


class _SplitAttention(nn.Module):
    """An attention holding the given query and key maps as separate ``q_proj``/``k_proj`` projections."""

    def __init__(self, query: torch.Tensor, key: torch.Tensor, config):
        super().__init__()
        self.config = config
        self.q_proj = nn.Linear(query.shape[1], query.shape[0], bias=False)
        self.k_proj = nn.Linear(key.shape[1], key.shape[0], bias=False)
        with torch.no_grad():
            self.q_proj.weight.copy_(query)
            self.k_proj.weight.copy_(key)


def _statistics_of_each_matrix_alone(model: nn.Module) -> tuple[float, float]:
    """Norm and mean effective rank of the hidden matrices, each expert and each Conv1D (transposed) on its own."""
    matrices = []
    for name, layout in model_layout(model, trainable_only=False).items():
        if layout.role == "hidden" and not layout.adapter:
            weight = model.get_parameter(name).detach()
            alone = list(weight.unbind(0)) if layout.stacked else [weight]
            matrices += [m.T if layout.transposed else m for m in alone]
    norm = math.sqrt(sum(m.pow(2).sum().item() for m in matrices))
    return norm, sum(effective_rank(m) for m in matrices) / len(matrices)


def _move_adapters_and_merge(model: nn.Module) -> nn.Module:
    """Moves a LoRA model's adapters away from zero (``lora_B`` starts at 0); returns its merged copy."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=torch.Generator().manual_seed(len(name))))
    return copy.deepcopy(model).merge_and_unload()


def check(architecture: str) -> None:
    model, _ = build(architecture)
    reference = _move_adapters_and_merge(model) if architecture == "lora_qwen2" else model
    metrics = PlasticityCallback(_probe_set(), batch_size=8).measure(model)
    paths = _attention_paths(architecture)
    attended = {key.partition("attention_entropy/")[2] for key in metrics if "attention_entropy/" in key}
    measured = {key.partition("qk_spectral_norm/")[2] for key in metrics if "qk_spectral_norm/" in key}
    assert attended == measured == set(paths), (attended, measured)
    for key, path in paths.items():
        query, key_map = _query_key_by_hand(architecture, reference.get_submodule(path), reference.config)
        expected = query_key_norms(_SplitAttention(query.detach(), key_map.detach(), reference.config))
        for name, value in expected.items():
            assert math.isclose(metrics[f"plasticity/{name}/{key}"], value, rel_tol=1e-5), (key, name)
    norm, rank = _statistics_of_each_matrix_alone(reference)
    assert math.isclose(metrics["plasticity/weight_norm"], norm, rel_tol=1e-5)
    assert math.isclose(metrics["plasticity/effective_rank_mean"], rank, rel_tol=1e-5)


CHECKS = [
    MethodCheck(
        "PlasticityCallback",
        "PlasticityCallback(probe_set).measure(model)",
        "each layer's QK norms equal those of the same weights split by hand into separate q/k projections (GPT-2's "
        "Conv1D c_attn, Phi-3's qkv_proj, GPT-NeoX's per-head query_key_value, T5's encoder, decoder and cross "
        "attention, LoRA's merge_and_unload() copy); the weight statistics equal those of each hidden matrix alone "
        "(every expert of a 3-D tensor, Conv1D transposed, LoRA merged; embeddings and heads left out)",
        check,
    ),
]
