from hf_ext.data import arithmetic_dataset
from hf_ext.evaluation import arithmetic_accuracy, generate_chat_completions
from hf_ext.models import tiny_causal_lm


def test_generation_is_batched_greedy_and_restores_training_mode():
    model, tokenizer = tiny_causal_lm()
    model.train()
    prompts = arithmetic_dataset(5)["prompt"]
    first = generate_chat_completions(model, tokenizer, prompts, max_new_tokens=4, batch_size=2)
    assert len(first) == 5 and all(isinstance(c, str) for c in first)
    assert model.training
    # Batching with left padding must not change greedy answers.
    assert generate_chat_completions(model, tokenizer, prompts, max_new_tokens=4, batch_size=5) == first


def test_accuracy_is_a_fraction_over_the_whole_dataset():
    model, tokenizer = tiny_causal_lm()
    accuracy = arithmetic_accuracy(model, tokenizer, arithmetic_dataset(6), max_new_tokens=3, batch_size=4)
    assert 0.0 <= accuracy <= 1.0
