"""How the single-index estimator of :mod:`hf_ext.companion.single_index` is judged: the baseline a user would
reach for first, a two-layer network."""

from .baselines import fit_two_layer_network

__all__ = ["fit_two_layer_network"]
