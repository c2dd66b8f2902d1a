"""Which parameters a zeroth-order method perturbs: targeted linear weights and the rest."""

import re
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from .config import ZOConfig


@dataclass(frozen=True)
class ZOTargets:
    """Targeted ``nn.Linear`` modules by name, and the other parameters that get isotropic noise."""

    linears: dict[str, nn.Linear]
    others: dict[str, nn.Parameter]

    def parameters(self) -> list[nn.Parameter]:
        """Every parameter that is perturbed and updated, linear weights first."""
        return [m.weight for m in self.linears.values()] + list(self.others.values())


def _shared_parameter_ids(model: nn.Module) -> set[int]:
    """Ids of parameters reachable under more than one name (tied weights)."""
    seen: dict[int, int] = {}
    for _, param in model.named_parameters(remove_duplicate=False):
        seen[id(param)] = seen.get(id(param), 0) + 1
    return {pid for pid, count in seen.items() if count > 1}


def _matches(name: str, target_modules: str | list[str]) -> bool:
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, name) is not None
    return any(name == target or name.endswith("." + target) for target in target_modules)


def _trainable_linears_under(module: nn.Module, prefix: str) -> dict[str, nn.Linear]:
    return {
        ".".join(part for part in (prefix, name) if part): child
        for name, child in module.named_modules()
        if isinstance(child, nn.Linear) and child.weight.requires_grad
    }


def resolve_targets(model: nn.Module, config: ZOConfig) -> ZOTargets:
    """Resolve ``config.target_modules`` on ``model``; raises ``ValueError`` if nothing trainable matches."""
    shared = _shared_parameter_ids(model)
    output_embeddings = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    linears: dict[str, nn.Linear] = {}
    if config.target_modules == "all-linear":
        for name, module in _trainable_linears_under(model, "").items():
            if module is not output_embeddings and id(module.weight) not in shared:
                linears[name] = module
    else:
        for name, module in model.named_modules():
            if name and _matches(name, config.target_modules):
                linears.update(_trainable_linears_under(module, name))
        tied = [name for name, module in linears.items() if id(module.weight) in shared]
        if tied:
            raise ValueError(
                f"{type(config).__name__}: target_modules matched linear layers whose weight is tied to another "
                f"parameter ({tied[:3]}); a forward-time perturbation of a tied weight would miss its other uses"
            )
    if not linears:
        available = sorted(_trainable_linears_under(model, ""))[:12]
        raise ValueError(
            f"{type(config).__name__}: target_modules={config.target_modules!r} matched no trainable nn.Linear; "
            f"trainable linear modules include {available}"
        )
    weight_ids = {id(m.weight) for m in linears.values()}
    others = {}
    if config.other_params == "isotropic":
        others = {n: p for n, p in model.named_parameters() if p.requires_grad and id(p) not in weight_ids}
    return ZOTargets(linears=linears, others=others)


def extend_targets(model: nn.Module, targets: ZOTargets, params: Iterable[torch.Tensor], owner: str) -> ZOTargets:
    """``targets`` plus ``params``: an untied ``nn.Linear`` weight joins the linears, any other parameter the others.

    Raises ``ValueError`` naming ``owner`` for a tensor that is not a parameter of ``model``: a
    zeroth-order step can only move what its forwards perturb.
    """
    names: dict[int, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), name)
    shared = _shared_parameter_ids(model)
    linear_of = {id(m.weight): (name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    known = {id(param) for param in targets.parameters()}
    linears, others = dict(targets.linears), dict(targets.others)
    for param in params:
        if id(param) in known:
            continue
        if id(param) not in names:
            raise ValueError(
                f"{owner}: `params` holds a tensor of shape {tuple(param.shape)} that is not a parameter of the "
                "model; a zeroth-order step can only update parameters of the model its forwards perturb"
            )
        if id(param) in linear_of and id(param) not in shared:
            module_name, module = linear_of[id(param)]
            linears[module_name] = module
        else:
            others[names[id(param)]] = param
        known.add(id(param))
    return ZOTargets(linears=linears, others=others)
