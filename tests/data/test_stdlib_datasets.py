import pytest

from hf_ext.data import docstring_classification, stdlib_corpus
from hf_ext.models import load_smollm2_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return load_smollm2_tokenizer()


def test_corpus_blocks_have_fixed_length_and_are_deterministic(tokenizer):
    corpus = stdlib_corpus(tokenizer, block_size=64, max_files=12, seed=1)
    assert set(corpus) == {"train", "validation"}
    for split in corpus.values():
        assert len(split) > 0
        assert all(len(ids) == 64 for ids in split["input_ids"])
        assert split["labels"] == split["input_ids"]
    again = stdlib_corpus(tokenizer, block_size=64, max_files=12, seed=1)
    assert again["train"]["input_ids"] == corpus["train"]["input_ids"]
    other = stdlib_corpus(tokenizer, block_size=64, max_files=12, seed=2)
    assert other["train"]["input_ids"] != corpus["train"]["input_ids"]


def test_corpus_is_real_python_text(tokenizer):
    text = tokenizer.decode(stdlib_corpus(tokenizer, block_size=256, max_files=8)["train"]["input_ids"][0])
    assert any(word in text for word in ("def ", "import ", "class ", '"""'))


@pytest.mark.parametrize(
    ("kwargs", "field"), [({"block_size": 1}, "block_size"), ({"validation_fraction": 1.0}, "validation_fraction")]
)
def test_corpus_rejects_bad_arguments(tokenizer, kwargs, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        stdlib_corpus(tokenizer, **kwargs)


@pytest.mark.parametrize("num_classes", [4, 8])
def test_docstring_classes_are_balanced_and_deterministic(num_classes):
    data = docstring_classification(num_classes=num_classes, seed=0)
    names = data["train"].features["label"].names
    assert len(names) == num_classes and names[:2] == ["asyncio", "email"]
    for split in data.values():
        counts = [split["label"].count(label) for label in range(num_classes)]
        assert len(set(counts)) == 1 and counts[0] > 0
    assert data["train"]["text"] == docstring_classification(num_classes=num_classes, seed=0)["train"]["text"]
    assert not set(data["train"]["text"]) & set(data["validation"]["text"])


def test_docstring_classification_rejects_bad_class_count():
    with pytest.raises(ValueError, match=r"`num_classes` must be in 2\.\.8"):
        docstring_classification(num_classes=9)
