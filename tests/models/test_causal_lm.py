import pytest
import torch

from hf_ext.models import check_causal_lm, load_causal_lm, tiny_causal_lm


def test_a_saved_checkpoint_loads_back_with_its_tokenizer(tmp_path):
    model, tokenizer = tiny_causal_lm(seed=3)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, loaded_tokenizer = load_causal_lm(str(tmp_path))
    assert torch.equal(loaded.model.embed_tokens.weight, model.model.embed_tokens.weight)
    assert loaded_tokenizer("2 + 3")["input_ids"] == tokenizer("2 + 3")["input_ids"]


def test_unknown_model_names_the_field_and_the_choices():
    with pytest.raises(ValueError, match=r"`policy` must be one of \['smollm2', 'tiny'\] or a checkpoint directory"):
        check_causal_lm("policy", "gpt5")
