import math

import pytest
import torch

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
