"""Weight decay and plasticity: measure what a base model's weights and representations allow."""

from .callback import PlasticityCallback
from .downstream import arithmetic_after_finetuning, classification_after_finetuning
from .metrics import (
    attention_entropy,
    effective_rank,
    linear_probe_accuracy,
    query_key_norms,
    weight_statistics,
)
from .report import format_table, plasticity_report, plot_sweep

__all__ = [
    "PlasticityCallback",
    "arithmetic_after_finetuning",
    "classification_after_finetuning",
    "attention_entropy",
    "effective_rank",
    "format_table",
    "linear_probe_accuracy",
    "plasticity_report",
    "plot_sweep",
    "query_key_norms",
    "weight_statistics",
]
