"""Causal-LM corpus: standard-library source text packed into fixed-length token blocks."""

import random

from datasets import Dataset, DatasetDict
from transformers import PreTrainedTokenizerBase

from .stdlib_text import read_source, stdlib_source_files


def stdlib_corpus(
    tokenizer: PreTrainedTokenizerBase,
    block_size: int = 128,
    validation_fraction: float = 0.1,
    max_files: int | None = None,
    seed: int = 0,
) -> DatasetDict:
    """Train/validation blocks of ``block_size`` tokens with ``input_ids``, ``attention_mask``, ``labels``.

    Files, not blocks, are split between train and validation so no file leaks across; each
    file's tokens end with EOS and the stream is cut into full blocks (the tail is dropped).
    ``max_files`` keeps a seeded random subset for quick runs (the whole library is ~12 MB).
    """
    if block_size < 2:
        raise ValueError(f"stdlib_corpus: `block_size` must be >= 2, got {block_size}")
    if not 0 < validation_fraction < 1:
        raise ValueError(f"stdlib_corpus: `validation_fraction` must be in (0, 1), got {validation_fraction}")
    files = stdlib_source_files()
    random.Random(f"corpus-{seed}").shuffle(files)
    if max_files is not None:
        if max_files < 2:
            raise ValueError(f"stdlib_corpus: `max_files` must be >= 2 or None, got {max_files}")
        files = files[:max_files]
    num_validation = max(1, round(len(files) * validation_fraction))
    splits = {"validation": files[:num_validation], "train": files[num_validation:]}
    return DatasetDict(
        {name: _pack([read_source(p) for p in paths], tokenizer, block_size) for name, paths in splits.items()}
    )


def _pack(texts: list[str | None], tokenizer: PreTrainedTokenizerBase, block_size: int) -> Dataset:
    stream: list[int] = []
    for ids in tokenizer([t for t in texts if t], add_special_tokens=False)["input_ids"]:
        stream.extend(ids)
        stream.append(tokenizer.eos_token_id)
    blocks = [stream[i : i + block_size] for i in range(0, len(stream) - block_size + 1, block_size)]
    return Dataset.from_dict(
        {"input_ids": blocks, "attention_mask": [[1] * block_size] * len(blocks), "labels": blocks}
    )
