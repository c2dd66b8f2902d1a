"""Randomly initialised models: tiny Llamas for tests, small ones for pretraining, and the MLP on digits."""

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from .smollm2 import load_smollm2_tokenizer


def llama_from_scratch(
    tokenizer: PreTrainedTokenizerBase,
    hidden_size: int = 128,
    num_layers: int = 8,
    num_heads: int = 4,
    num_kv_heads: int | None = None,
    max_positions: int = 512,
    seed: int = 0,
) -> PreTrainedModel:
    """A randomly initialised Llama sized to ``tokenizer``'s vocabulary (MLP 4x wide, tied embeddings)."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads or num_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)


def tiny_causal_lm(
    seed: int = 0, hidden_size: int = 8, num_layers: int = 2
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A ~0.4M-parameter Llama (tied embeddings dominate) that runs a training step in milliseconds.

    It shares SmolLM2's tokenizer and chat template, so any pipeline built for SmolLM2 runs
    unchanged on it.
    """
    tokenizer = load_smollm2_tokenizer()
    model = llama_from_scratch(
        tokenizer, hidden_size, num_layers, num_heads=2, num_kv_heads=1, max_positions=1024, seed=seed
    )
    return model, tokenizer


def digits_mlp(hidden_size: int, seed: int = 0) -> nn.Sequential:
    """``Linear(64, hidden_size) - Tanh - Linear(hidden_size, 10)``, the classifier of :func:`hf_ext.data.digits`'s
    8x8 images, initialised from ``seed`` (the global generators are left as they were)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(64, hidden_size), nn.Tanh(), nn.Linear(hidden_size, 10))
