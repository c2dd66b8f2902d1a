"""``torch.optim.Muon`` for FSDP2: each matrix orthogonalized whole, on one owner rank.

``torch.optim.Muon`` on ``DTensor`` shards orthogonalizes each rank's block of rows, a different and
silently wrong update (1e-2 relative off one process after one step). :class:`ShardedMuon` keeps
torch's momentum, sharded like its parameter, and hands each matrix's Newton-Schulz input to its
owner rank (:class:`~hf_ext.optim.shared.sharding.OwnerExchange`), which runs torch's own
orthogonalization (bfloat16) on the whole matrix and sends each rank its block; on tensors that are
not sharded it is ``torch.optim.Muon``'s step.

Two group settings say how a group's tensors hold their ``(d_out, d_in)`` maps. ``stacked=True``: a mixture of
experts' ``(experts, out, in)`` tensor, which ``torch.optim.Muon`` refuses, is a stack of matrices, each stepped as
``torch.optim.Muon`` steps that expert alone (its Newton-Schulz through the shared batched
:func:`~hf_ext.optim.shared.newton_schulz.newton_schulz`, its own learning-rate adjustment), batched over the
experts. ``transposed=True``: matrices stored ``(d_in, d_out)`` (GPT-2's ``Conv1D``) are orthogonalized as the
maps they are, so that they step as the equivalent ``nn.Linear`` does: in bfloat16 the iteration on a square
matrix and on its transpose round differently (by up to 14% of the largest entry, measured on GPT-2's ``c_proj``).
"""

import torch
from torch.optim._muon import _adjust_lr, _zeropower_via_newtonschulz

from ..._sharded import local, sharding
from ..._validation import check_finite
from ..shared.first_step import check_first_step
from ..shared.newton_schulz import newton_schulz
from ..shared.sharding import OwnerExchange


def _without_hooks(step):
    """``step`` without the wrapper that runs the step hooks, which torch puts on a class's ``step`` once an instance
    of the class exists: this step's own wrapper has run them already."""
    return step.__wrapped__ if getattr(step, "hooked", False) else step


class ShardedMuon(torch.optim.Muon):
    """``torch.optim.Muon`` (same arguments, state and ``state_dict``) whose step on FSDP2-sharded parameters is
    the one-process step, bit for bit: torch's own Newton-Schulz and learning-rate adjustment, on whole matrices."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = (3.4445, -4.775, 2.0315),
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = None,
    ):
        """torch's arguments and defaults; a NaN/inf number is refused by name first (torch's own checks let a NaN
        ``lr`` through to a comparison message and do not look at ``eps``)."""
        numbers = {"lr": lr, "weight_decay": weight_decay, "momentum": momentum, "eps": eps, "ns_steps": ns_steps}
        for name, value in (*numbers.items(), ("ns_coefficients", list(ns_coefficients))):
            check_finite("ShardedMuon", name, value)
        # torch's checks and defaults, read off a Muon of one placeholder matrix: torch.optim.Muon's constructor
        # refuses 3-D parameters, which add_param_group takes here (stacks of experts).
        settings = torch.optim.Muon(
            [torch.zeros(1, 1)],
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            ns_coefficients=ns_coefficients,
            eps=eps,
            ns_steps=ns_steps,
            adjust_lr_fn=adjust_lr_fn,
        ).defaults
        torch.optim.Optimizer.__init__(self, params, {**settings, "stacked": False, "transposed": False})

    def add_param_group(self, param_group: dict) -> None:
        """torch's, then the checks ``torch.optim.Muon`` makes at construction only (``lr``, 2-D parameters, here
        also 3-D ones of a ``stacked=True`` group); a refused group is not kept."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            check_finite("ShardedMuon", "lr", group["lr"])
            if not group["lr"] >= 0:
                raise ValueError(f"ShardedMuon: `lr` must be >= 0, got {group['lr']}")
            dims = (2, 3) if group["stacked"] is True else (2,)
            shapes = [tuple(p.shape) for p in group["params"] if p.dim() not in dims]
            if shapes:
                raise ValueError(
                    "ShardedMuon: Muon steps 2-D parameters, and 3-D ones in a group with `stacked=True` (a stack of "
                    f"matrices along the first axis, as mixture-of-experts tensors), got shapes {shapes} in a group "
                    f"with `stacked={group['stacked']!r}`"
                )
        except ValueError:
            self.param_groups.pop()
            raise

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        check_first_step(self)
        params = [p for group in self.param_groups for p in group["params"]]
        # .get: the groups of a checkpoint saved before these settings existed lack them
        plain = not any(group.get("stacked") or group.get("transposed") for group in self.param_groups)
        if plain and all(sharding(p, "ShardedMuon: a parameter") is None for p in params):
            _without_hooks(torch.optim.Muon.step)(self)
            return loss
        exchange = OwnerExchange(params, "ShardedMuon")  # owners over every parameter, so they stay put
        position = {id(p): index for index, p in enumerate(params)}
        for group in self.param_groups:
            stepped = [p for p in group["params"] if p.grad is not None]
            updates = []
            for p in stepped:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad)
                buffer = state["momentum_buffer"].lerp_(p.grad, 1 - group["momentum"])
                updates.append(p.grad.lerp(buffer, group["momentum"]) if group["nesterov"] else buffer)

            def orthogonalize(index: int, whole: list[torch.Tensor], group=group) -> torch.Tensor:
                return _orthogonalize(whole[0], group)

            indices, inputs = [position[id(p)] for p in stepped], [[u] for u in updates]
            orthogonal = exchange.run(indices, inputs, orthogonalize, [torch.bfloat16] * len(stepped))
            lr = float(group["lr"])
            for p, update in zip(stepped, orthogonal, strict=True):
                # torch's Newton-Schulz returns a tall map's update transposed, and a bfloat16 add_ rounds a strided
                # operand unlike a contiguous one: the update is added in the layout torch adds that map's update in.
                rows, cols = reversed(p.shape[-2:]) if group.get("transposed") else p.shape[-2:]
                update = update.mT.contiguous().mT if rows > cols else update.contiguous()
                part = local(p)
                part.mul_(1 - lr * group["weight_decay"])
                part.add_(update, alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape[-2:]))  # per expert
        return loss


def _orthogonalize(update: torch.Tensor, group: dict) -> torch.Tensor:
    """torch's Newton-Schulz (bfloat16) of each ``(d_out, d_in)`` map of ``update``: the matrix, its transpose for a
    ``transposed`` group, or each matrix of a ``stacked`` one, batched through the shared ``newton_schulz`` (the same
    products in the same dtype: each expert's result is torch's, bit for bit on CPU)."""
    coefficients, steps, eps = group["ns_coefficients"], group["ns_steps"], group["eps"]
    maps = update.mT if group.get("transposed") else update
    if maps.dim() == 2:
        orthogonal = _zeropower_via_newtonschulz(maps, coefficients, steps, eps)
    else:
        orthogonal = newton_schulz(maps, steps, coefficients, eps, dtype=torch.bfloat16)
    return orthogonal.mT if group.get("transposed") else orthogonal
