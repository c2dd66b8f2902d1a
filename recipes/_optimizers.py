"""The optimizers the recipes compare, built by name from a model and a step size: one place for every recipe.

A recipe lists the names it compares (``scion_batch``: Scion, AdamW, Muon; ``symmetry_curvature``: AdamW, the
symmetry preconditioner, a Shampoo-style baseline, Muon; ``stepsize_sensitivity``: SGD, AdamW, SPS, NGN) and
builds each here, so that one name means one optimizer with one set of defaults across recipes. AdamW runs without
weight decay, as every comparison here measures the step itself; Muon is :class:`~hf_ext.optim.MuonWithAdamW`.
"""

from collections.abc import Callable

import torch
from torch import nn

from hf_ext.optim import NGN, SPS, MuonWithAdamW, Scion, SymmetryCurvature, symmetry_param_groups

# name -> (model, lr, momentum, sps_c) -> optimizer
_BUILDERS: dict[str, Callable[[nn.Module, float, float, float], torch.optim.Optimizer]] = {
    "sgd": lambda model, lr, momentum, c: torch.optim.SGD(model.parameters(), lr=lr, momentum=0.0),
    "sgd_momentum": lambda model, lr, momentum, c: torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum),
    "adamw": lambda model, lr, momentum, c: torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0),
    "sps": lambda model, lr, momentum, c: SPS(model.parameters(), lr=lr, c=c),
    "ngn": lambda model, lr, momentum, c: NGN(model.parameters(), lr=lr, momentum=0.0),
    "ngn_m": lambda model, lr, momentum, c: NGN(model.parameters(), lr=lr, momentum=momentum),
    "scion": lambda model, lr, momentum, c: Scion(model, lr=lr),
    "symmetry": lambda model, lr, momentum, c: SymmetryCurvature(model, lr=lr),
    # our optimizer with the one-sided `orthogonal x identity` group: G (E[G^T G])^(-1/2)
    "shampoo_style": lambda model, lr, momentum, c: SymmetryCurvature(
        symmetry_param_groups(model, hidden="orthogonal"), lr=lr
    ),
    "muon": lambda model, lr, momentum, c: MuonWithAdamW(model, lr),
}
OPTIMIZERS = tuple(_BUILDERS)


def build_optimizer(
    name: str, model: nn.Module, lr: float, momentum: float = 0.9, sps_c: float = 0.5
) -> torch.optim.Optimizer:
    """Optimizer ``name`` (one of :data:`OPTIMIZERS`) over ``model`` at step size ``lr`` (SPS's cap ``gamma_b``, NGN's
    ``sigma``); ``momentum`` is that of ``sgd_momentum`` and ``ngn_m``, ``sps_c`` SPS's constant ``c``."""
    if name not in _BUILDERS:
        raise ValueError(f"build_optimizer: `name` must be one of {list(OPTIMIZERS)}, got {name!r}")
    return _BUILDERS[name](model, lr, momentum, sps_c)
