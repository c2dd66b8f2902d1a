"""Offline datasets, deterministic by seed: verifiable arithmetic, preference pairs, real text (also packed for a
batch schedule), 3D volumes, scikit-learn's digits."""

from .arithmetic import arithmetic_dataset
from .bpe import stdlib_bpe_tokenizer
from .classification import docstring_classification
from .corpus import stdlib_corpus
from .digits import digits
from .packed_stream import PackedStream, PackedStreamCollator
from .preferences import preference_dataset
from .rewards import arithmetic_reward, extract_final_number, final_number_format_reward
from .volumes import synthetic_volumes, volume_segmentation

__all__ = [
    "PackedStream",
    "PackedStreamCollator",
    "arithmetic_dataset",
    "arithmetic_reward",
    "digits",
    "docstring_classification",
    "extract_final_number",
    "final_number_format_reward",
    "preference_dataset",
    "stdlib_bpe_tokenizer",
    "stdlib_corpus",
    "synthetic_volumes",
    "volume_segmentation",
]
