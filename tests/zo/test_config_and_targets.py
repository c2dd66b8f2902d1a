import pytest
from peft import LoraConfig, get_peft_model

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
    with pytest.raises(ValueError, match=r"matched no trainable nn.Linear; trainable linear modules include"):
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
