"""Which parameters a zeroth-order method perturbs: the linear maps it targets and the rest."""

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from hf_ext.models.layout import is_conv1d, model_layout

from .config import ZOConfig
from .experts import moe_matrices

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ZOTargets:
    """The targeted linear maps and the other parameters that get isotropic noise.

    ``linears``: ``nn.Linear`` and GPT-2 ``Conv1D`` modules by name, perturbed through their output.
    ``moe``: MoE router weights and expert tensors by parameter name, with the module whose forward reads
    each; they are perturbed in place around that forward.
    """

    linears: dict[str, nn.Module]
    others: dict[str, nn.Parameter]
    moe: dict[str, nn.Module]

    def parameters(self) -> list[nn.Parameter]:
        """Every parameter that is perturbed and updated: linear weights, MoE tensors, then the others."""
        moe = [module.get_parameter(name.rpartition(".")[2]) for name, module in self.moe.items()]
        return [m.weight for m in self.linears.values()] + moe + list(self.others.values())


def is_linear(module: nn.Module) -> bool:
    """``nn.Linear``, or GPT-2's ``Conv1D``: the same map with its weight stored ``(in, out)``."""
    return isinstance(module, nn.Linear) or is_conv1d(module)


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


def _trainable_linears_under(module: nn.Module, prefix: str) -> dict[str, nn.Module]:
    return {
        ".".join(part for part in (prefix, name) if part): child
        for name, child in module.named_modules()
        if is_linear(child) and child.weight.requires_grad
    }


def _trainable_moe(model: nn.Module, shared: set[int]) -> dict[str, nn.Module]:
    return {
        name: module
        for name, module in moe_matrices(model).items()
        if model.get_parameter(name).requires_grad and id(model.get_parameter(name)) not in shared
    }


def resolve_targets(model: nn.Module, config: ZOConfig) -> ZOTargets:
    """Resolve ``config.target_modules`` on ``model``; raises ``ValueError`` if nothing trainable matches."""
    shared = _shared_parameter_ids(model)
    output_embeddings = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    moe = _trainable_moe(model, shared)
    linears: dict[str, nn.Module] = {}
    if config.target_modules == "all-linear":
        for name, module in _trainable_linears_under(model, "").items():
            if module is not output_embeddings and id(module.weight) not in shared:
                linears[name] = module
    else:
        matched = [name for name, _ in model.named_modules() if name and _matches(name, config.target_modules)]
        for name in matched:
            linears.update(_trainable_linears_under(model.get_submodule(name), name))
        moe = {key: module for key, module in moe.items() if any(key.startswith(name + ".") for name in matched)}
        tied = [name for name, module in linears.items() if id(module.weight) in shared]
        if tied:
            raise ValueError(
                f"{type(config).__name__}: target_modules matched linear layers whose weight is tied to another "
                f"parameter ({tied[:3]}); a forward-time perturbation of a tied weight would miss its other uses"
            )
    if not linears and not moe:
        available = sorted(_trainable_linears_under(model, ""))[:12]
        raise ValueError(
            f"{type(config).__name__}: target_modules={config.target_modules!r} matched no trainable nn.Linear, "
            f"Conv1D or MoE router/expert tensor; trainable linear modules include {available}"
        )
    targeted = {id(m.weight) for m in linears.values()} | {id(model.get_parameter(name)) for name in moe}
    if config.other_params == "isotropic":
        others = {n: p for n, p in model.named_parameters() if p.requires_grad and id(p) not in targeted}
    else:
        others = _untargetable_matrices(model, config, targeted)
        _log_frozen(model, config, targeted | {id(p) for p in others.values()})
    return ZOTargets(linears=linears, others=others, moe=moe)


def _untargetable_matrices(model: nn.Module, config: ZOConfig, targeted: set[int]) -> dict[str, nn.Parameter]:
    """Under ``"all-linear"``, the trainable hidden matrices that are no linear layer, router or expert tensor: they get
    isotropic noise whatever ``other_params`` says (never frozen without a word), and a warning names them."""
    if config.target_modules != "all-linear":
        return {}
    untargetable = {
        name: model.get_parameter(name)
        for name, layout in model_layout(model).items()
        if layout.role == "hidden" and id(model.get_parameter(name)) not in targeted
    }
    if untargetable:
        logger.warning(
            "%s: %d trainable matrices are no nn.Linear, Conv1D or MoE router/expert tensor, so the method has no "
            "linear map to perturb them by; they get isotropic noise: %s",
            type(config).__name__,
            len(untargetable),
            sorted(untargetable)[:8],
        )
    return untargetable


def _log_frozen(model: nn.Module, config: ZOConfig, moved: set[int]) -> None:
    """Name (at info level) what ``other_params="frozen"`` leaves unchanged: biases, norms, embeddings, heads."""
    frozen = [name for name, p in model.named_parameters() if p.requires_grad and id(p) not in moved]
    if frozen:
        logger.info(
            "%s: other_params='frozen' leaves %d trainable parameters unchanged, e.g. %s",
            type(config).__name__,
            len(frozen),
            frozen[:5],
        )


def extend_targets(model: nn.Module, targets: ZOTargets, params: Iterable[torch.Tensor], owner: str) -> ZOTargets:
    """``targets`` plus ``params``: an untied linear weight joins the linears, an untied MoE tensor the MoE tensors,
    any other parameter the others.

    Raises ``ValueError`` naming ``owner`` for a tensor that is not a parameter of ``model``: a
    zeroth-order step can only move what its forwards perturb.
    """
    names: dict[int, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), name)
    shared = _shared_parameter_ids(model)
    linear_of = {id(m.weight): (name, m) for name, m in model.named_modules() if is_linear(m)}
    moe_of = {id(model.get_parameter(name)): (name, m) for name, m in moe_matrices(model).items()}
    known = {id(param) for param in targets.parameters()}
    linears, others, moe = dict(targets.linears), dict(targets.others), dict(targets.moe)
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
        elif id(param) in moe_of and id(param) not in shared:
            name, module = moe_of[id(param)]
            moe[name] = module
        else:
            others[names[id(param)]] = param
        known.add(id(param))
    return ZOTargets(linears=linears, others=others, moe=moe)
