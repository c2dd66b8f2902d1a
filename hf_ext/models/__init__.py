"""Offline model loaders: real pretrained models shipped by PyPI packages, tiny configs, and our own model families."""

from .._cache import cache_root
from ._assets import MissingAssetError
from .causal_lm import CAUSAL_LMS, check_causal_lm, load_causal_lm
from .minilm import load_minilm, minilm_path
from .rep3d import Rep3DConfig, Rep3DConv, Rep3DForSegmentation, Rep3DModel
from .smollm2 import SMOLLM2_135M_SHAPE, load_smollm2, load_smollm2_tokenizer, smollm2_from_scratch, smollm2_path
from .tiny import digits_mlp, llama_from_scratch, tiny_causal_lm

__all__ = [
    "CAUSAL_LMS",
    "MissingAssetError",
    "Rep3DConfig",
    "Rep3DConv",
    "Rep3DForSegmentation",
    "Rep3DModel",
    "SMOLLM2_135M_SHAPE",
    "cache_root",
    "check_causal_lm",
    "digits_mlp",
    "llama_from_scratch",
    "load_causal_lm",
    "load_minilm",
    "load_smollm2",
    "load_smollm2_tokenizer",
    "minilm_path",
    "smollm2_from_scratch",
    "smollm2_path",
    "tiny_causal_lm",
]
