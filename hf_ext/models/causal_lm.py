"""One entry point for the causal LMs that recipes take by name or by checkpoint path."""

from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from .smollm2 import load_smollm2
from .tiny import tiny_causal_lm

CAUSAL_LMS = {"smollm2": load_smollm2, "tiny": tiny_causal_lm}


def check_causal_lm(field_name: str, name_or_path: str) -> None:
    """Raise, naming ``field_name``, unless ``name_or_path`` is a known name or an existing directory."""
    if name_or_path not in CAUSAL_LMS and not Path(name_or_path).is_dir():
        raise ValueError(
            f"`{field_name}` must be one of {sorted(CAUSAL_LMS)} or a checkpoint directory, got {name_or_path!r}"
        )


def load_causal_lm(name_or_path: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A model and its tokenizer: one of :data:`CAUSAL_LMS` by name, or a ``save_pretrained`` directory."""
    check_causal_lm("name_or_path", name_or_path)
    if name_or_path in CAUSAL_LMS:
        return CAUSAL_LMS[name_or_path]()
    return AutoModelForCausalLM.from_pretrained(name_or_path), AutoTokenizer.from_pretrained(name_or_path)
