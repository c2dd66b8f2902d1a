"""Mixture-of-experts layers as zeroth-order methods see them: routers, expert tensors and what each expert reads.

transformers 5 stores a MoE block's experts as 3-D tensors ``(experts, out, in)`` in one module (the experts
interface of ``transformers.integrations.moe.use_experts_implementation``: ``gate_up_proj`` or ``up_proj``, then
``down_proj``) and routes with a sibling module whose 2-D ``weight`` maps the block's input to expert logits
(``F.linear(hidden, weight)``). Expert ``e``'s gradient lies in the span of the rows routed to it, so AGZO
gives each expert the activation subspace of its own rows, batched over the experts.
"""

import torch
from torch import nn

from hf_ext.models.layout import is_conv1d

SECOND_TENSOR = "down_proj"


def expert_tensor_names(module: nn.Module) -> tuple[str, str] | None:
    """The names of the first (``gate_up_proj``, or ``up_proj`` without a gate) and second (``down_proj``) expert
    tensors of a transformers experts module; ``None`` for any other module."""
    if not hasattr(module, "has_gate"):
        return None
    names = ("gate_up_proj" if module.has_gate else "up_proj", SECOND_TENSOR)
    tensors = [module._parameters.get(name) for name in names]
    return names if all(tensor is not None and tensor.dim() == 3 for tensor in tensors) else None


def _is_router(module: nn.Module) -> bool:
    """A module beside the experts that is not a linear or embedding layer and owns a 2-D ``weight`` (the router)."""
    weight = module._parameters.get("weight")
    plain = isinstance(module, (nn.Linear, nn.Embedding)) or is_conv1d(module)
    return not plain and weight is not None and weight.dim() == 2


def moe_matrices(model: nn.Module) -> dict[str, nn.Module]:
    """Each MoE router weight and expert tensor of ``model`` by parameter name, with the module whose forward reads it.

    A router is the 2-D ``weight`` of a sibling of an experts module that is not a linear or embedding layer.
    """
    found: dict[str, nn.Module] = {}
    for name, module in model.named_modules():
        tensors = expert_tensor_names(module)
        if tensors is None:
            continue
        parent = name.rpartition(".")[0]
        for child_name, child in model.get_submodule(parent).named_children():
            if child is not module and _is_router(child):
                found[".".join(filter(None, (parent, child_name, "weight")))] = child
        for tensor in tensors:
            found[f"{name}.{tensor}"] = module
    return found


def routed_rows(
    hidden_states: torch.Tensor,
    top_k_index: torch.Tensor,
    num_experts: int,
    row_mask: torch.Tensor | None,
    max_rows: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows each expert reads, ``(experts, rows, in)`` padded with zero rows, and how many are real ``(experts,)``.

    Token ``t`` goes to each expert in ``top_k_index[t]`` (an index ``>= num_experts``, expert parallelism's
    sentinel, to none); padded tokens (``row_mask`` 0, when its size matches) to none. An expert keeps at most
    ``max_rows`` of its rows, evenly spaced, as :func:`~hf_ext.zo.subspace.activation_subspace` does.
    """
    rows = hidden_states.reshape(-1, hidden_states.shape[-1])
    routed = torch.zeros(rows.shape[0], num_experts + 1, dtype=torch.bool, device=rows.device)
    routed.scatter_(1, top_k_index.reshape(rows.shape[0], -1).clamp(max=num_experts), True)
    routed = routed[:, :num_experts]
    if row_mask is not None and row_mask.numel() == rows.shape[0]:
        routed &= row_mask.reshape(-1, 1).to(device=rows.device, dtype=torch.bool)
    routed = routed.T
    counts = routed.sum(1)
    kept = counts.clamp(max=max_rows)
    slot = torch.arange(int(kept.max()) if num_experts else 0, device=rows.device)
    spacing = (counts - 1).clamp(min=0).double() / max(max_rows - 1, 1)
    position = torch.where(counts[:, None] > max_rows, (slot * spacing[:, None]).round().long(), slot)
    tokens = torch.sort((~routed).to(torch.uint8), dim=1, stable=True).indices  # each expert's own tokens first
    index = tokens.gather(1, position.clamp(max=max(rows.shape[0] - 1, 0)))
    valid = (slot < kept[:, None])[..., None]
    return torch.where(valid, rows[index], 0), kept


def expert_inner_rows(module: nn.Module, first: torch.Tensor, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """What each expert's second tensor reads for ``rows``: the first tensor's output, gated as the experts interface
    computes it (``_apply_gate``, or ``act_fn`` without a gate), padding rows kept zero.

    ``first``: the first tensor as ``(experts, out, in)`` matrices (:meth:`ParamLayout.matrices`).
    """
    projected = torch.bmm(rows.to(first.dtype), first.mT)
    if getattr(module, "has_bias", False):
        name = expert_tensor_names(module)[0]
        projected = projected + getattr(module, f"{name}_bias")[:, None, :]
    inner = module._apply_gate(projected) if module.has_gate else module.act_fn(projected)
    valid = torch.arange(rows.shape[1], device=rows.device) < counts[:, None]
    return torch.where(valid[..., None], inner, 0)
