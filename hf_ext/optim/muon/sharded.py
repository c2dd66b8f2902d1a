"""``torch.optim.Muon`` batched, and for FSDP2: each matrix orthogonalized whole, on one owner rank.

``torch.optim.Muon`` steps one matrix at a time: a Newton-Schulz call per parameter. :class:`ShardedMuon` takes
the same step with one batched call per map shape (``foreach`` momentum, decay and update), each matrix's result
torch's bit for bit on CPU (the same bfloat16 products; tested), except that it leaves the momentum alone where
torch 2.13 divides a bfloat16 buffer by its norm in place (``nesterov=False``: pytorch/pytorch#194664).

``torch.optim.Muon`` on ``DTensor`` shards orthogonalizes each rank's block of rows, a different and
silently wrong update (1e-2 relative off one process after one step). :class:`ShardedMuon` keeps
torch's momentum, sharded like its parameter, and hands each matrix's Newton-Schulz input to its
owner rank (:class:`~hf_ext.optim.shared.sharding.OwnerExchange`), which orthogonalizes its whole matrices
(batched) and sends each rank its block.

Two group settings say how a group's tensors hold their ``(d_out, d_in)`` maps. ``stacked=True``: a mixture of
experts' ``(experts, out, in)`` tensor, which ``torch.optim.Muon`` refuses, is a stack of matrices, each stepped as
``torch.optim.Muon`` steps that expert alone (its Newton-Schulz through the shared batched
:func:`~hf_ext.optim.shared.newton_schulz.newton_schulz`, its own learning-rate adjustment), batched over the
experts. ``transposed=True``: matrices stored ``(d_in, d_out)`` (GPT-2's ``Conv1D``) are orthogonalized as the
maps they are, so that they step as the equivalent ``nn.Linear`` does: in bfloat16 the iteration on a square
matrix and on its transpose round differently (by up to 14% of the largest entry, measured on GPT-2's ``c_proj``).
"""

import torch
from torch.optim._muon import _adjust_lr

from ..._sharded import local
from ..._validation import check_count, check_field_type, check_finite, check_finite_number, check_params
from ..shared.batching import apply_batched, scale_
from ..shared.first_step import begin_step
from ..shared.newton_schulz import newton_schulz
from ..shared.sharding import OwnerExchange

ADJUST_LR_FNS = (None, "original", "match_rms_adamw")  # torch.optim.Muon's


class ShardedMuon(torch.optim.Muon):
    """``torch.optim.Muon`` (same arguments, state and ``state_dict``) whose step orthogonalizes the matrices of one
    shape in one batched call and, on FSDP2-sharded parameters, is the one-process step bit for bit: torch's
    Newton-Schulz and learning-rate adjustment (read off each ``(d_out, d_in)`` map), on whole matrices."""

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
        for name, value in (("lr", lr), ("weight_decay", weight_decay), ("momentum", momentum), ("eps", eps)):
            check_finite_number("ShardedMuon", name, value)
        check_count("ShardedMuon", "ns_steps", ns_steps, 1)
        check_field_type("ShardedMuon", "nesterov", nesterov, bool)
        check_finite("ShardedMuon", "ns_coefficients", ns_coefficients)
        if not isinstance(ns_coefficients, tuple | list) or len(ns_coefficients) != 3:
            raise TypeError(f"ShardedMuon: `ns_coefficients` must be three numbers (a, b, c), got {ns_coefficients!r}")
        for coefficient in ns_coefficients:
            check_finite_number("ShardedMuon", "ns_coefficients", coefficient)
        for name, value in (("lr", lr), ("weight_decay", weight_decay), ("eps", eps)):
            if not value >= 0:  # torch's own message names neither the optimizer nor the argument
                raise ValueError(f"ShardedMuon: `{name}` must be >= 0, got {value}")
        if not 0 <= momentum < 1:  # torch.optim.Muon refuses only a negative one: 1.5 grows the buffer each step
            raise ValueError(f"ShardedMuon: `momentum` must be in [0, 1), got {momentum}")
        if adjust_lr_fn not in ADJUST_LR_FNS:
            raise ValueError(f"ShardedMuon: `adjust_lr_fn` must be one of {list(ADJUST_LR_FNS)}, got {adjust_lr_fn!r}")
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
        params = check_params("ShardedMuon", params)
        torch.optim.Optimizer.__init__(self, params, {**settings, "stacked": False, "transposed": False})

    def add_param_group(self, param_group: dict) -> None:
        """torch's, then the checks ``torch.optim.Muon`` makes at construction only (``lr``, 2-D parameters, here
        also 3-D ones of a ``stacked=True`` group); a refused group is not kept."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            check_finite_number("ShardedMuon", "lr", group["lr"])
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
        except (TypeError, ValueError):
            self.param_groups.pop()
            raise

    @torch.no_grad()
    def step(self, closure=None):
        with torch.enable_grad():
            loss = begin_step(self, closure)
        params = [p for group in self.param_groups for p in group["params"]]
        position = {id(p): index for index, p in enumerate(params)}
        stepped, updates = [], []
        for group in self.param_groups:
            group_params, grads, buffers = [], [], []
            self._init_group(group, group_params, grads, buffers)  # torch's: momentum created at the first step
            if not group_params:
                continue
            grads, buffers = [local(g) for g in grads], [local(b) for b in buffers]
            torch._foreach_lerp_(buffers, grads, 1 - group["momentum"])
            updates += torch._foreach_lerp(grads, buffers, group["momentum"]) if group["nesterov"] else buffers
            stepped += [(group, p) for p in group_params]
        if not stepped:
            return loss
        groups = {position[id(p)]: group for group, p in stepped}

        def orthogonalize(indices: list[int], wholes: list[list[torch.Tensor]]) -> list[torch.Tensor]:
            return _orthogonalize([(groups[index], whole[0]) for index, whole in zip(indices, wholes, strict=True)])

        exchange = OwnerExchange(params, "ShardedMuon")  # owners over every parameter, so they stay put
        indices = [position[id(p)] for _, p in stepped]
        dtypes = [torch.bfloat16] * len(indices)
        orthogonal = exchange.run_batched(indices, [[u] for u in updates], orthogonalize, dtypes)
        for group in self.param_groups:
            mine = [(p, update) for (owner, p), update in zip(stepped, orthogonal, strict=True) if owner is group]
            if mine:
                self._apply(group, mine)
        return loss

    @staticmethod
    def _apply(group: dict, updates: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """torch's decay and update of each ``(parameter, orthogonalized update)`` of ``group``: one ``foreach`` call
        per learning rate (torch adjusts it to each map's shape)."""
        lr = float(group["lr"])
        scale_([local(p) for p, _ in updates], 1 - lr * group["weight_decay"])
        by_lr: dict[float, tuple[list, list]] = {}
        for p, update in updates:
            rows, cols = _map_shape(group, p)
            # torch's Newton-Schulz returns a tall map's update transposed, and a bfloat16 add_ rounds a strided
            # operand unlike a contiguous one: the update is added in the layout torch adds that map's update in.
            update = update.mT.contiguous().mT if rows > cols else update.contiguous()
            parts, operands = by_lr.setdefault(-_adjust_lr(lr, group["adjust_lr_fn"], (rows, cols)), ([], []))
            parts.append(local(p))
            operands.append(update)
        for alpha, (parts, operands) in by_lr.items():
            torch._foreach_add_(parts, operands, alpha=alpha)


def _map_shape(group: dict, param: torch.Tensor) -> tuple[int, int]:
    """``(d_out, d_in)`` of each map of ``param`` (stored ``(d_in, d_out)`` in a ``transposed`` group)."""
    rows, cols = param.shape[-2:]
    return (cols, rows) if group.get("transposed") else (rows, cols)


def _orthogonalize(items: list[tuple[dict, torch.Tensor]]) -> list[torch.Tensor]:
    """torch's Newton-Schulz (bfloat16) of each ``(d_out, d_in)`` map of each ``(group, update)``: the matrix, its
    transpose for a ``transposed`` group, each matrix of a ``stacked`` one. The maps of one shape and settings go
    through the shared ``newton_schulz`` in one batched call: the same products in the same dtype, so each map's
    result is torch's, bit for bit on CPU (tested)."""
    # A map stored transposed is copied out as torch.optim.Muon gets its nn.Linear twin's: row-major.
    maps = [update.mT.contiguous() if group.get("transposed") else update for group, update in items]
    stacks = [m.reshape(-1, *m.shape[-2:]) for m in maps]
    keys = [
        (tuple(group["ns_coefficients"]), group["ns_steps"], group["eps"], *stack.shape[1:], stack.dtype, stack.device)
        for (group, _), stack in zip(items, stacks, strict=True)
    ]
    blocks = apply_batched(stacks, keys, _newton_schulz_batch)
    orthogonal = [block if m.dim() == 3 else block[0] for m, block in zip(maps, blocks, strict=True)]
    return [o.mT if group.get("transposed") else o for (group, _), o in zip(items, orthogonal, strict=True)]


def _newton_schulz_batch(key: tuple, stack: torch.Tensor) -> torch.Tensor:
    """torch.optim.Muon's iteration (bfloat16) on each matrix of ``stack``, with the settings its key holds."""
    coefficients, steps, eps = key[:3]
    return newton_schulz(stack, steps, coefficients, eps, dtype=torch.bfloat16)
