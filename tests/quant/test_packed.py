import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from hf_ext.models import tiny_causal_lm
from hf_ext.quant import PackedBinaryLinear, binarize_model, load_packed, save_packed, set_binarization_mix


@pytest.fixture
def binary_model(tiny_pair):
    model, _, _ = tiny_pair
    binarize_model(model)
    with torch.no_grad():  # move the scales off their init so the export must carry them
        for name, parameter in model.named_parameters():
            if name.endswith("_scale"):
                parameter.mul_(1 + 0.1 * torch.randn_like(parameter))
    set_binarization_mix(model, 1.0)
    return model.eval()


def test_packed_model_computes_what_the_unpacked_binary_model_computes(binary_model, tmp_path):
    save_packed(binary_model, tmp_path)
    packed = load_packed(tmp_path)
    assert sum(isinstance(m, PackedBinaryLinear) for m in packed.modules()) == 14
    ids = torch.randint(0, 1000, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(packed(ids).logits, binary_model(ids).logits, rtol=1e-5, atol=1e-5)
    greedy = {"max_new_tokens": 5, "do_sample": False}
    assert torch.equal(packed.generate(ids[:1], **greedy), binary_model.generate(ids[:1], **greedy))
    assert packed.lm_head.weight is packed.model.embed_tokens.weight


def test_linear_layers_pack_to_under_a_fourteenth_of_fp16_at_smollm2_shapes(tmp_path):
    """SmolLM2-135M's hidden size (576), random weights: bits + fp32 scales vs the fp16 weights."""
    model, _ = tiny_causal_lm(hidden_size=576, num_layers=1)
    binarize_model(model)
    set_binarization_mix(model, 1.0)
    sizes = save_packed(model, tmp_path)
    assert sizes["packed_linear_bytes"] <= sizes["fp16_linear_bytes"] / 14


def test_the_packed_bits_are_the_signs_of_the_trained_weights(binary_model, tmp_path):
    save_packed(binary_model, tmp_path)
    tensors = load_file(tmp_path / "packed_binary.safetensors")
    layer = binary_model.model.layers[0].mlp.down_proj
    bits = tensors["model.layers.0.mlp.down_proj.packed"]
    first_byte = sum(int(layer.weight[0, j] >= 0) << j for j in range(8))
    assert bits.dtype == torch.uint8 and bits[0, 0].item() == first_byte
    assert torch.equal(tensors["model.layers.0.mlp.down_proj.row_scale"], layer.row_scale.detach())
    assert "model.layers.0.mlp.down_proj.weight" not in tensors


def test_a_model_mid_schedule_is_not_exported(binary_model, tmp_path):
    set_binarization_mix(binary_model, 0.5)
    with pytest.raises(ValueError, match=r"14 binarized layers are not fully binary .* mix 0.5"):
        save_packed(binary_model, tmp_path)


def test_a_mismatched_architecture_is_refused(binary_model, tmp_path):
    save_packed(binary_model, tmp_path)
    wider, _ = tiny_causal_lm(hidden_size=32)
    with pytest.raises(
        ValueError, match=r"'model.layers.0.self_attn.q_proj' is Linear\(16, 16\) but `model` has Linear\(32, 32\)"
    ):
        load_packed(tmp_path, wider)
    shallower, _ = tiny_causal_lm(hidden_size=16, num_layers=1)
    with pytest.raises(ValueError, match=r"'model.layers.1.self_attn.q_proj' .* but `model` has None"):
        load_packed(tmp_path, shallower)


def test_loading_into_a_matching_full_precision_model_converts_it(binary_model, tmp_path):
    save_packed(binary_model, tmp_path)
    fresh, _ = tiny_causal_lm(hidden_size=16, seed=5)
    loaded = load_packed(tmp_path, fresh)
    assert loaded is fresh and isinstance(fresh.model.layers[1].mlp.up_proj, PackedBinaryLinear)


def test_non_packed_files_and_non_binarized_models_are_refused(tiny_pair, tmp_path):
    model, _, _ = tiny_pair
    with pytest.raises(ValueError, match="has no binarized layer"):
        save_packed(model, tmp_path)
    with pytest.raises(ValueError, match="no packed_binary.safetensors"):
        load_packed(tmp_path)
    save_file({"x": torch.zeros(1)}, tmp_path / "packed_binary.safetensors", {"format": "other"})
    with pytest.raises(ValueError, match="is not a hf_ext.packed_binary/1 file"):
        load_packed(tmp_path)


@pytest.mark.parametrize("where", ["model.norm.weight", "model.layers.0.mlp.up_proj.weight"])
def test_nan_weights_are_not_exported(binary_model, tmp_path, where):
    """A NaN in a binarized weight would silently pack as -1: it must be refused like any other."""
    with torch.no_grad():
        binary_model.get_parameter(where).view(-1)[0] = float("nan")
    with pytest.raises(ValueError, match="NaN/inf"):
        save_packed(binary_model, tmp_path)
    assert not (tmp_path / "packed_binary.safetensors").exists()


def test_metadata_lists_the_binary_layers(binary_model, tmp_path):
    from safetensors import safe_open

    save_packed(binary_model, tmp_path)
    with safe_open(tmp_path / "packed_binary.safetensors", framework="pt") as handle:
        layers = json.loads(handle.metadata()["binary_layers"])
    assert layers["model.layers.0.mlp.gate_proj"] == [16, 64, False]


def test_a_truncated_packed_file_is_named(binary_model, tmp_path):
    save_packed(binary_model, tmp_path)
    file = tmp_path / "packed_binary.safetensors"
    file.write_bytes(file.read_bytes()[:-16])
    with pytest.raises(ValueError, match=r"packed_binary\.safetensors' is truncated or not a safetensors file"):
        load_packed(tmp_path)


def test_a_missing_config_is_named_as_missing(binary_model, tmp_path):
    save_packed(binary_model, tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"load_packed: '.*config\.json' is missing"):
        load_packed(tmp_path)


def test_a_truncated_config_is_named_as_invalid_json(binary_model, tmp_path):
    save_packed(binary_model, tmp_path)
    config = tmp_path / "config.json"
    config.write_bytes(config.read_bytes()[:40])
    with pytest.raises(ValueError, match=r"load_packed: '.*config\.json' is not valid JSON"):
        load_packed(tmp_path)


def test_a_packed_layer_reads_as_its_dense_binary_weight_and_refuses_a_new_one(binary_model, tmp_path):
    """What code written for nn.Linear reads of ``weight`` (T5's dtype check, PEFT's device): the binary weight."""
    save_packed(binary_model, tmp_path)
    layer = load_packed(tmp_path).model.layers[0].mlp.down_proj
    assert isinstance(layer, PackedBinaryLinear)
    assert torch.equal(layer.weight, binary_model.model.layers[0].mlp.down_proj.effective_weight())
    assert (layer.weight.dtype, layer.weight.device) == (layer.row_scale.dtype, layer.packed.device)
    with pytest.raises(AttributeError):
        layer.weight = torch.zeros(16, 64)


def _tiny(config_class, model_class, **fields):
    torch.manual_seed(0)
    return model_class(config_class(vocab_size=64, hidden_size=16, num_hidden_layers=1, **fields))


def _binary(model):
    binarize_model(model)
    set_binarization_mix(model, 1.0)
    return model.eval()


def test_a_model_is_rebuilt_from_the_class_it_was_saved_from(tmp_path):
    """T5 is no causal LM: load_packed builds the class save_packed recorded in the config's ``architectures``."""
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4, decoder_start_token_id=0)
    model = _binary(T5ForConditionalGeneration(config))
    save_packed(model, tmp_path)
    packed = load_packed(tmp_path)
    assert type(packed) is T5ForConditionalGeneration and model.config.architectures is None
    ids = torch.randint(0, 64, (2, 5))
    with torch.no_grad():
        torch.testing.assert_close(packed(ids, labels=ids).logits, model(ids, labels=ids).logits, rtol=1e-5, atol=1e-5)


def _mixtral(num_experts=4):
    from transformers import MixtralConfig, MixtralForCausalLM

    return _tiny(
        MixtralConfig,
        MixtralForCausalLM,
        intermediate_size=24,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_local_experts=num_experts,
        num_experts_per_tok=2,
    )


def test_expert_stacks_are_stored_as_bits_and_unpack_to_the_binary_experts_bit_for_bit(tmp_path):
    model = _binary(_mixtral())
    sizes = save_packed(model, tmp_path)
    tensors = load_file(tmp_path / "packed_binary.safetensors")
    bits = tensors["model.layers.0.mlp.experts.gate_up_proj.packed"]
    assert bits.dtype == torch.uint8 and bits.shape == (4, 48, 2)  # (experts, 2 * intermediate, hidden / 8)
    assert tensors["model.layers.0.mlp.experts.gate_up_proj.row_scale"].shape == (4, 48)
    assert tensors["model.layers.0.mlp.gate.packed"].shape == (4, 2)  # the router: (experts, hidden / 8)
    assert not any("parametrizations" in key or key.endswith("experts.down_proj") for key in tensors)
    assert sizes["packed_linear_bytes"] < sizes["fp16_linear_bytes"] / 3  # fp32 scales weigh at hidden 16
    packed = load_packed(tmp_path)
    for name in ("gate_up_proj", "down_proj"):
        expected = getattr(model.model.layers[0].mlp.experts, name)
        assert torch.equal(getattr(packed.model.layers[0].mlp.experts, name), expected)
    assert torch.equal(packed.model.layers[0].mlp.gate.weight, model.model.layers[0].mlp.gate.weight)


def test_a_model_with_other_expert_stacks_is_refused(tmp_path):
    save_packed(_binary(_mixtral()), tmp_path)
    with pytest.raises(ValueError, match=r"'model.layers.0.mlp.gate' packs maps of shape \(4,\) x 16 but `model` has"):
        load_packed(tmp_path, _mixtral(num_experts=2))
