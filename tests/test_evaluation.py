import pytest
import torch
from datasets import Dataset
from torch.nn import functional as F

from hf_ext.data import arithmetic_dataset
from hf_ext.evaluation import arithmetic_accuracy, generate_chat_completions, perplexity
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


def test_perplexity_is_exp_of_the_mean_next_token_cross_entropy_over_labelled_tokens():
    model, _ = tiny_causal_lm()
    ids = torch.randint(0, 500, (3, 6), generator=torch.Generator().manual_seed(0))
    labels = ids.clone()
    labels[0, 2] = -100
    blocks = Dataset.from_dict({"input_ids": ids.tolist(), "labels": labels.tolist()})
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1]
    mask = labels[:, 1:] != -100
    expected = F.cross_entropy(logits[mask], labels[:, 1:][mask]).exp().item()
    assert perplexity(model, blocks, batch_size=2) == pytest.approx(expected, rel=1e-5)
