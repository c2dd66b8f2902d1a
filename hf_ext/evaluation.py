"""Evaluation: greedy chat completions, exact-match accuracy on verifiable tasks, held-out perplexity."""

import math
from collections.abc import Sequence
from typing import Any

import torch
from accelerate import PartialState
from accelerate.utils import gather_object
from datasets import Dataset
from torch.nn import functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .data.rewards import arithmetic_reward


@torch.no_grad()
def generate_chat_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[list[dict[str, Any]]],
    max_new_tokens: int = 32,
    batch_size: int = 16,
) -> list[str]:
    """Greedy completions of chat prompts, batched with left padding; the model's mode is restored."""
    was_training = model.training
    model.eval()
    completions: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            texts = [
                tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
                for p in prompts[start : start + batch_size]
            ]
            batch = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
            batch = batch.to(model.device)
            output = model.generate(
                **batch, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
            new_tokens = output[:, batch["input_ids"].shape[1] :]
            completions.extend(tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
    finally:
        model.train(was_training)
    return completions


def arithmetic_accuracy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: Dataset,
    max_new_tokens: int = 32,
    batch_size: int = 16,
) -> float:
    """Exact-match accuracy of greedy answers on an arithmetic dataset.

    Under ``accelerate launch`` each process answers its share of the rows and the results
    are gathered, so every process returns the same accuracy over the whole dataset.
    """
    state = PartialState()
    with state.split_between_processes(list(range(len(dataset)))) as indices:
        shard = dataset.select(indices)
        completions = generate_chat_completions(model, tokenizer, shard["prompt"], max_new_tokens, batch_size)
        local = arithmetic_reward(completions, shard["answer"])
    rewards = gather_object(local) if state.num_processes > 1 else local
    return sum(rewards) / len(rewards)


@torch.no_grad()
def perplexity(model: PreTrainedModel, blocks: Dataset, batch_size: int = 8) -> float:
    """``exp`` of the mean next-token cross-entropy over the labelled tokens of ``blocks``.

    ``blocks`` has ``input_ids`` and ``labels`` of equal length (as :func:`hf_ext.data.stdlib_corpus`
    makes them); every labelled token after the first counts once. The model's mode is restored.
    """
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for start in range(0, len(blocks), batch_size):
            batch = blocks[start : start + batch_size]
            input_ids = torch.tensor(batch["input_ids"], device=model.device)
            labels = torch.tensor(batch["labels"], device=model.device)[:, 1:]
            logits = model(input_ids=input_ids).logits[:, :-1]
            mask = labels != -100
            total += F.cross_entropy(logits[mask].float(), labels[mask], reduction="sum").item()
            count += int(mask.sum())
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("perplexity: `blocks` has no labelled token to predict")
    return math.exp(total / count)
