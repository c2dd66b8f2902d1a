import copy

import pytest
import torch
from datasets import Dataset

from hf_ext.models import tiny_causal_lm
from hf_ext.quant import LogitDistillationConfig


@pytest.fixture
def tiny_pair():
    """A tiny Llama (the student, to be binarized) and an identical frozen copy (the teacher)."""
    model, tokenizer = tiny_causal_lm(hidden_size=16)
    return model, copy.deepcopy(model), tokenizer


@pytest.fixture
def token_blocks():
    generator = torch.Generator().manual_seed(0)
    blocks = torch.randint(0, 1000, (24, 16), generator=generator).tolist()
    return Dataset.from_dict({"input_ids": blocks, "attention_mask": [[1] * 16] * 24, "labels": blocks})


@pytest.fixture
def distill_config(training_args):
    """A factory of small CPU ``LogitDistillationConfig``s writing under ``tmp_path``; fields can be overridden."""

    def make(**overrides) -> LogitDistillationConfig:
        return training_args(LogitDistillationConfig, **_SETTINGS | overrides)

    return make


# Six logged steps of a deterministic run; the shared CPU settings come from tests/conftest.py.
_SETTINGS = {
    "learning_rate": 1e-2,
    "max_steps": 6,
    "logging_steps": 1,
    "seed": 0,
    "data_seed": 0,
}
