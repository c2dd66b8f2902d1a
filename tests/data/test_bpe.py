import pytest

from hf_ext.data import stdlib_bpe_tokenizer
from hf_ext.models import llama_from_scratch


def test_small_bpe_round_trips_python_source_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path))
    tokenizer = stdlib_bpe_tokenizer(vocab_size=400, max_files=20)
    assert len(tokenizer) == 400 and tokenizer.eos_token == tokenizer.pad_token == "<|endoftext|>"
    source = "def area(r):\n    return 3.14159 * r ** 2  # ünïcode\n"
    ids = tokenizer(source)["input_ids"]
    assert tokenizer.decode(ids) == source and len(ids) < len(source)
    assert (tmp_path / "tokenizers" / "stdlib_bpe_400_20.json").is_file()
    assert stdlib_bpe_tokenizer(vocab_size=400, max_files=20)(source)["input_ids"] == ids


def test_a_model_from_scratch_is_sized_to_the_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path))
    tokenizer = stdlib_bpe_tokenizer(vocab_size=400, max_files=20)
    model = llama_from_scratch(tokenizer, hidden_size=32, num_layers=3, num_heads=2)
    assert model.config.vocab_size == 400 and len(model.model.layers) == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"vocab_size": 100}, "`vocab_size` must be >= 300"), ({"max_files": 0}, "`max_files` must be >= 1 or None")],
)
def test_bad_sizes_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stdlib_bpe_tokenizer(**kwargs)
