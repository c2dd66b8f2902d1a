import pytest

from hf_ext.data import arithmetic_dataset, stdlib_bpe_tokenizer
from hf_ext.data.sft import tokenize_prompt_completion
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


def test_chat_rows_tokenize_with_the_completion_as_a_suffix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path))
    tokenizer = stdlib_bpe_tokenizer(vocab_size=400, max_files=20)
    row = arithmetic_dataset(1)[0]
    tokens = tokenize_prompt_completion(row, tokenizer)
    completion = [t for t, label in zip(tokens["input_ids"], tokens["labels"], strict=True) if label != -100]
    assert tokenizer.decode(completion) == f" {row['completion'][0]['content']}{tokenizer.eos_token}"
    prompt = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
    assert prompt == f"user: {row['question']}\nassistant:"
