"""Tokenizing conversational prompt-completion rows for causal-LM training with the stock Trainer."""

from typing import Any

from transformers import PreTrainedTokenizerBase

IGNORE_INDEX = -100


def tokenize_prompt_completion(
    example: dict[str, Any], tokenizer: PreTrainedTokenizerBase, max_length: int = 256
) -> dict[str, list[int]]:
    """``input_ids``/``attention_mask``/``labels`` of prompt + completion, loss on the completion only.

    Use with ``dataset.map(tokenize_prompt_completion, fn_kwargs={"tokenizer": tok})`` and a
    ``DataCollatorForSeq2Seq`` (it pads ``labels`` with -100).
    """
    prompt_ids = tokenizer.apply_chat_template(example["prompt"], add_generation_prompt=True, tokenize=True)
    full_ids = tokenizer.apply_chat_template(example["prompt"] + example["completion"], tokenize=True)
    prompt_ids, full_ids = _as_ids(prompt_ids), _as_ids(full_ids)
    if full_ids[: len(prompt_ids)] != prompt_ids:
        raise ValueError("the chat template does not render the prompt as a prefix of prompt + completion")
    full_ids = full_ids[:max_length]
    labels = [IGNORE_INDEX] * len(prompt_ids) + full_ids[len(prompt_ids) :]
    return {"input_ids": full_ids, "attention_mask": [1] * len(full_ids), "labels": labels[:max_length]}


def _as_ids(rendered: Any) -> list[int]:
    """``apply_chat_template(tokenize=True)`` returns a list or a BatchEncoding depending on version."""
    return list(rendered["input_ids"]) if hasattr(rendered, "keys") else list(rendered)
