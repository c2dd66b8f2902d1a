from hf_ext.data import arithmetic_dataset
from hf_ext.data.sft import IGNORE_INDEX, tokenize_prompt_completion
from hf_ext.models import load_smollm2_tokenizer


def test_only_the_completion_is_trained_on():
    tokenizer = load_smollm2_tokenizer()
    row = arithmetic_dataset(1, seed=3)[0]
    features = tokenize_prompt_completion(row, tokenizer)
    assert len(features["input_ids"]) == len(features["labels"]) == len(features["attention_mask"])
    trained = [t for t in features["labels"] if t != IGNORE_INDEX]
    first_trained = features["labels"].index(trained[0])
    assert all(t == IGNORE_INDEX for t in features["labels"][:first_trained])
    assert row["completion"][0]["content"] in tokenizer.decode(trained)
    assert row["question"] not in tokenizer.decode(trained)
    truncated = tokenize_prompt_completion(row, tokenizer, max_length=10)
    assert len(truncated["input_ids"]) == len(truncated["labels"]) == 10
