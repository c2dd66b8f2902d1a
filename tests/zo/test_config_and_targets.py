import logging

import pytest
import torch
import transformers as tf
from peft import LoraConfig, get_peft_model
from torch import nn

from hf_ext.models import tiny_causal_lm
from hf_ext.zo import AGZOConfig, MeZOConfig
from hf_ext.zo.targets import resolve_targets


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"eps": 0}, "eps"),
        ({"rank": 0}, "rank"),
        ({"num_perturbations": 0}, "num_perturbations"),
        ({"estimator": "three_point"}, "estimator"),
        ({"other_params": "adam"}, "other_params"),
        ({"power_iterations": -1}, "power_iterations"),
        ({"subspace_refresh_interval": 0}, "subspace_refresh_interval"),
        ({"target_modules": []}, "target_modules"),
        ({"target_modules": 3}, "target_modules"),  # issue 72: "'int' object is not iterable"
        ({"weight_decay": -0.1}, "weight_decay"),
    ],
)
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        AGZOConfig(**kwargs)


def test_all_linear_skips_the_tied_output_embedding():
    model, _ = tiny_causal_lm()
    targets = resolve_targets(model, MeZOConfig())
    assert "lm_head" not in targets.linears
    assert len(targets.linears) == 2 * 7  # q, k, v, o, gate, up, down per layer
    assert "model.embed_tokens.weight" in targets.others
    assert resolve_targets(model, AGZOConfig()).others == {}


def test_names_and_regex_select_modules():
    model, _ = tiny_causal_lm()
    by_name = resolve_targets(model, AGZOConfig(target_modules=["q_proj", "v_proj"]))
    assert sorted(by_name.linears) == [f"model.layers.{i}.self_attn.{p}" for i in (0, 1) for p in ("q_proj", "v_proj")]
    by_regex = resolve_targets(model, AGZOConfig(target_modules=r".*layers\.1\.mlp\..*"))
    assert len(by_regex.linears) == 3


def test_target_that_matches_nothing_is_rejected_with_the_available_names():
    model, _ = tiny_causal_lm()
    with pytest.raises(ValueError, match=r"matched no trainable nn.Linear, Conv1D or MoE .*; trainable linear modules"):
        resolve_targets(model, AGZOConfig(target_modules=["query"]))
    with pytest.raises(ValueError, match="tied"):
        resolve_targets(model, AGZOConfig(target_modules=["lm_head"]))


def test_peft_lora_targets_only_the_trainable_adapters():
    model, _ = tiny_causal_lm()
    peft_model = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    targets = resolve_targets(peft_model, MeZOConfig())
    assert len(targets.linears) == 8 and all("lora_" in name for name in targets.linears)
    assert targets.others == {}
    by_name = resolve_targets(peft_model, AGZOConfig(target_modules=["q_proj"]))
    assert sorted(n.rsplit(".", 2)[-2] for n in by_name.linears) == ["lora_A", "lora_A", "lora_B", "lora_B"]


def test_all_linear_takes_gpt2_conv1d_layers_but_not_its_tied_head():
    """Issue 71: GPT-2 was refused ("matched no trainable nn.Linear") without a word about Conv1D."""
    model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=32))
    targets = resolve_targets(model, AGZOConfig())
    layers = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    assert sorted(targets.linears) == sorted(f"transformer.h.{i}.{layer}" for i in (0, 1) for layer in layers)
    assert sorted(resolve_targets(model, AGZOConfig(target_modules=["c_attn"])).linears) == [
        "transformer.h.0.attn.c_attn",
        "transformer.h.1.attn.c_attn",
    ]


def test_all_linear_takes_moe_routers_and_expert_tensors_and_names_select_them():
    """Issue 71: AGZO froze the router and the experts without a word."""
    config = tf.MixtralConfig(
        hidden_size=16,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=32,
        num_local_experts=4,
    )
    model = tf.MixtralForCausalLM(config)
    mlp = "model.layers.0.mlp"
    moe = [f"{mlp}.gate.weight", f"{mlp}.experts.gate_up_proj", f"{mlp}.experts.down_proj"]
    assert list(resolve_targets(model, AGZOConfig()).moe) == moe
    assert list(resolve_targets(model, AGZOConfig(target_modules=["experts"])).moe) == moe[1:]
    assert resolve_targets(model, AGZOConfig(target_modules=["q_proj"])).moe == {}


class Mixer(nn.Module):
    """A matrix that is no linear layer: ``x @ mix``."""

    def __init__(self):
        super().__init__()
        self.mix = nn.Parameter(torch.eye(4))
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(x @ self.mix)


def test_a_trainable_matrix_no_linear_map_reaches_gets_isotropic_noise_and_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="hf_ext.zo.targets"):
        targets = resolve_targets(Mixer(), AGZOConfig())
    assert list(targets.linears) == ["out"] and list(targets.others) == ["mix"]
    assert "they get isotropic noise: ['mix']" in caplog.text
