"""``torch.optim.Muon`` for FSDP2: each matrix orthogonalized whole, on one owner rank.

``torch.optim.Muon`` on ``DTensor`` shards orthogonalizes each rank's block of rows, a different and
silently wrong update (1e-2 relative off one process after one step). :class:`ShardedMuon` keeps
torch's momentum, sharded like its parameter, and hands each matrix's Newton-Schulz input to its
owner rank (:class:`~hf_ext.optim.shared.sharding.OwnerExchange`), which runs torch's own
orthogonalization (bfloat16) on the whole matrix and sends each rank its block; on tensors that are
not sharded it is ``torch.optim.Muon``'s step.
"""

import torch
from torch.optim._muon import _adjust_lr, _zeropower_via_newtonschulz

from ..._sharded import local, sharding
from ..._validation import check_finite
from ..shared.first_step import check_first_step
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
        super().__init__(
            params,
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            ns_coefficients=ns_coefficients,
            eps=eps,
            ns_steps=ns_steps,
            adjust_lr_fn=adjust_lr_fn,
        )

    def add_param_group(self, param_group: dict) -> None:
        """torch's, then the checks ``torch.optim.Muon`` makes at construction only (``lr``, 2-D parameters); a
        refused group is not kept."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            check_finite("ShardedMuon", "lr", group["lr"])
            if not group["lr"] >= 0:
                raise ValueError(f"ShardedMuon: `lr` must be >= 0, got {group['lr']}")
            shapes = [tuple(p.shape) for p in group["params"] if p.dim() != 2]
            if shapes:
                raise ValueError(f"ShardedMuon: Muon steps 2-D parameters only, got shapes {shapes}")
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
        if all(sharding(p, "ShardedMuon: a parameter") is None for p in params):
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
                return _zeropower_via_newtonschulz(whole[0], group["ns_coefficients"], group["ns_steps"], group["eps"])

            indices, inputs = [position[id(p)] for p in stepped], [[u] for u in updates]
            orthogonal = exchange.run(indices, inputs, orthogonalize, [torch.bfloat16] * len(stepped))
            lr = float(group["lr"])
            for p, update in zip(stepped, orthogonal, strict=True):
                if p.shape[0] > p.shape[1]:
                    # torch's Newton-Schulz returns a tall matrix transposed, and a bfloat16 add_ rounds a strided
                    # operand unlike a contiguous one: the update in that layout is added as one process adds it.
                    update = update.T.contiguous().T
                part = local(p)
                part.mul_(1 - lr * group["weight_decay"])
                part.add_(update, alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape))
        return loss
