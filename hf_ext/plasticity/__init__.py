"""Weight decay and plasticity: measure what a base model's weights and representations allow."""

from .callback import PlasticityCallback
from .metrics import (
    attention_entropy,
    effective_rank,
    linear_probe_accuracy,
    query_key_norms,
    weight_statistics,
)

__all__ = [
    "PlasticityCallback",
    "attention_entropy",
    "effective_rank",
    "linear_probe_accuracy",
    "query_key_norms",
    "weight_statistics",
]
