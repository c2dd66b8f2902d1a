import copy
import math

import peft
import pytest
import torch
import transformers as tf
from torch import nn

from hf_ext.models import load_minilm, tiny_causal_lm
from hf_ext.plasticity import (
    attention_entropy,
    effective_rank,
    linear_probe_accuracy,
    query_key_norms,
    weight_statistics,
)


def test_effective_rank_counts_equally_used_directions():
    assert effective_rank(torch.eye(5)) == pytest.approx(5.0)
    assert effective_rank(torch.outer(torch.arange(1.0, 4.0), torch.ones(6))) == pytest.approx(1.0)
    assert effective_rank(torch.diag(torch.tensor([1.0, 1.0, 0.0]))) == pytest.approx(2.0)
    assert effective_rank(torch.zeros(3, 3)) == 0.0


def test_weight_statistics_skip_embeddings_and_vectors():
    model, _ = tiny_causal_lm()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 2 and "embed" not in name:
                parameter.fill_(0.5)  # all-equal matrices: rank 1
    stats = weight_statistics(model)
    entries = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n)
    assert stats["weight_norm"] == pytest.approx(0.5 * math.sqrt(entries))
    assert stats["effective_rank_mean"] == pytest.approx(1.0, abs=1e-4)


def test_weight_statistics_leave_out_gpt2_token_and_position_embeddings():
    model = tf.GPT2LMHeadModel(tf.GPT2Config(n_embd=8, n_head=2, n_layer=2, vocab_size=50))
    blocks = [p for name, p in model.named_parameters() if name.startswith("transformer.h.") and p.dim() == 2]
    assert weight_statistics(model)["weight_norm"] == pytest.approx(math.sqrt(sum(p.pow(2).sum() for p in blocks)))


class _Experts(nn.Module):
    """Mixture-of-experts tensors as transformers 5 stores them: (experts, out, in)."""

    def __init__(self, stacked: torch.Tensor):
        super().__init__()
        self.gate_up_proj = nn.Parameter(stacked)


def test_each_expert_of_a_stack_counts_as_the_matrix_it_is_alone():
    stacked = torch.randn(3, 6, 4, generator=torch.Generator().manual_seed(0))
    stacked[1, :, 1:] = 0  # expert 1 has rank 1: a stack read as one matrix would hide it
    alone = nn.ModuleList(nn.Linear(4, 6, bias=False) for _ in range(3))
    with torch.no_grad():
        for linear, expert in zip(alone, stacked, strict=True):
            linear.weight.copy_(expert)
    stats, expected = weight_statistics(_Experts(stacked)), weight_statistics(alone)
    assert stats["weight_norm"] == pytest.approx(expected["weight_norm"])
    assert stats["effective_rank_mean"] == pytest.approx(expected["effective_rank_mean"])
    assert stats["effective_rank_mean"] < 3.5  # (two near-4 ranks and a 1) / 3


def _lora_llama(**lora):
    model, _ = tiny_causal_lm(hidden_size=8)
    config = peft.LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "k_proj", "up_proj"], **lora)
    model = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(generator=torch.Generator().manual_seed(1))  # lora_B starts at zero
    return model


def test_weight_metrics_of_a_lora_model_read_its_merged_weights():
    model = _lora_llama()
    merged = copy.deepcopy(model).merge_and_unload()
    attention, merged_attention = model.base_model.model.model.layers[0].self_attn, merged.model.layers[0].self_attn
    assert query_key_norms(attention) == pytest.approx(query_key_norms(merged_attention))
    assert weight_statistics(model) == pytest.approx(weight_statistics(merged))


def test_a_lora_variant_whose_weight_is_no_sum_is_refused_by_layer():
    model = _lora_llama(use_dora=True)
    with pytest.raises(ValueError, match=r"layers\.0\.self_attn\.q_proj \(Linear\) has adapters \['default'\] whose"):
        weight_statistics(model)


def test_query_key_norms_on_hand_set_llama_weights():
    """hidden 4, 2 query heads of dim 2 sharing one key head: W_Q^h (W_K)^T has known norms."""
    model, _ = tiny_causal_lm(hidden_size=4)
    attention = model.model.layers[0].self_attn
    with torch.no_grad():
        attention.q_proj.weight.copy_(torch.cat([2 * torch.eye(2, 4), 3 * torch.eye(2, 4)]))  # heads: 2I, 3I
        attention.k_proj.weight.copy_(torch.eye(2, 4))
    # head h: (c_h E)^T E = c_h diag(1, 1, 0, 0): spectral c_h, Frobenius c_h sqrt(2).
    norms = query_key_norms(attention)
    assert norms["qk_spectral_norm"] == pytest.approx(2.5)
    assert norms["qk_frobenius_norm"] == pytest.approx(2.5 * math.sqrt(2))


# hidden 4, 2 query heads of dim 2 and the key heads of each layout, set as in the Llama test above.
FUSED = {
    "gpt2": (
        tf.GPT2Config(n_embd=4, n_head=2, n_layer=1, vocab_size=8),
        tf.GPT2LMHeadModel,
        "transformer.h.0.attn.c_attn",
    ),
    "gpt_neox": (
        tf.GPTNeoXConfig(hidden_size=4, num_attention_heads=2, num_hidden_layers=1, intermediate_size=8, vocab_size=8),
        tf.GPTNeoXForCausalLM,
        "gpt_neox.layers.0.attention.query_key_value",
    ),
    "phi3": (
        tf.Phi3Config(
            hidden_size=4,
            num_attention_heads=2,
            num_key_value_heads=1,
            num_hidden_layers=1,
            intermediate_size=8,
            vocab_size=8,
            pad_token_id=0,
        ),
        tf.Phi3ForCausalLM,
        "model.layers.0.self_attn.qkv_proj",
    ),
}


def _fused_query_key_value(architecture: str) -> torch.Tensor:
    """The fused (d_out, hidden) map whose query heads are 2I and 3I (on the first two inputs), keys I, values 7I."""
    eye = torch.eye(2, 4)
    if architecture == "gpt_neox":  # per head: its query, its key, its value
        return torch.cat([2 * eye, eye, 7 * eye, 3 * eye, eye, 7 * eye])
    key_heads = 1 if architecture == "phi3" else 2
    return torch.cat([2 * eye, 3 * eye, *[eye] * key_heads, *[7 * eye] * key_heads])


@pytest.mark.parametrize("architecture", sorted(FUSED))
def test_fused_query_key_value_projections_are_split_by_the_head_layout(architecture):
    config, model_class, path = FUSED[architecture]
    model = model_class(config)
    projection, attention = model.get_submodule(path), model.get_submodule(path.rpartition(".")[0])
    with torch.no_grad():
        weight = _fused_query_key_value(architecture)
        projection.weight.copy_(weight.T if architecture == "gpt2" else weight)  # GPT-2's Conv1D stores (in, out)
    norms = query_key_norms(attention)
    assert norms["qk_spectral_norm"] == pytest.approx(2.5)
    assert norms["qk_frobenius_norm"] == pytest.approx(2.5 * math.sqrt(2))


def test_a_fused_projection_that_does_not_fit_the_head_layout_is_refused():
    config, model_class, path = FUSED["phi3"]
    attention = model_class(config).get_submodule(path.rpartition(".")[0])
    four_heads = copy.deepcopy(config)
    four_heads.num_attention_heads = four_heads.num_key_value_heads = 4
    with pytest.raises(
        ValueError, match=r"Phi3Attention.qkv_proj has 8 output rows, which do not fit .* 4 query heads"
    ):
        query_key_norms(attention, four_heads)


def test_query_key_norms_on_bert_attention():
    model, _ = load_minilm(num_labels=2)
    norms = query_key_norms(model.bert.encoder.layer[0].attention.self)
    assert 0 < norms["qk_spectral_norm"] <= norms["qk_frobenius_norm"]


def test_attention_entropy_of_uniform_and_one_hot_rows():
    uniform = torch.full((1, 2, 3, 4), 0.25)
    assert attention_entropy(uniform) == pytest.approx(math.log(4))
    one_hot = torch.zeros(1, 2, 3, 4)
    one_hot[..., 0] = 1.0
    assert attention_entropy(one_hot) == pytest.approx(0.0, abs=1e-6)
    mixed = torch.cat([uniform[:, :, :2], one_hot[:, :, 2:]], dim=2)
    assert attention_entropy(mixed, attention_mask=torch.tensor([[1, 1, 0]])) == pytest.approx(math.log(4))


def test_linear_probe_separates_separable_classes_and_not_random_ones():
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (300,), generator=generator)
    centres = torch.randn(3, 16, generator=generator) * 4
    features = centres[labels] + torch.randn(300, 16, generator=generator)
    assert linear_probe_accuracy(features[:200], labels[:200], features[200:], labels[200:]) == 1.0
    noise = torch.randn(300, 16, generator=generator)
    assert linear_probe_accuracy(noise[:200], labels[:200], noise[200:], labels[200:]) < 0.5


def test_probe_inputs_must_line_up():
    with pytest.raises(ValueError, match="same number of rows"):
        linear_probe_accuracy(torch.zeros(3, 2), torch.zeros(2, dtype=torch.long), torch.zeros(1, 2), torch.zeros(1))


def test_the_effective_rank_of_a_tensor_that_is_not_a_matrix_is_refused_with_its_shape():
    """A vector failed as "too many indices for tensor of dimension 1"."""
    with pytest.raises(ValueError, match=r"effective_rank: `matrix` must be 2-D, got shape \(5,\)"):
        effective_rank(torch.randn(5))
