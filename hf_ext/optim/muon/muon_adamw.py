"""``torch.optim.Muon`` on the hidden matrices and AdamW on the rest, as the one optimizer the Trainer takes.

The usual Muon setup (Muon handles 2-D hidden weights only): the outside baseline that the Scion and
symmetry-curvature recipes compare with. The two inner optimizers step with this optimizer's groups and
state (the same objects), so one ``state_dict()``, one learning-rate scheduler and one ``load_state_dict()``
cover both, as for any single ``torch.optim.Optimizer``. The Muon part is :class:`~.sharded.ShardedMuon`:
``torch.optim.Muon``'s step with the matrices of one shape orthogonalized in one batched call, whole matrices on
owner ranks under FSDP2.
"""

import torch

from ..._validation import check_finite_number
from ...models.layout import model_layout
from ..shared.first_step import begin_step
from .sharded import ShardedMuon


class MuonWithAdamW(torch.optim.Optimizer):
    """Muon (``adjust_lr_fn="match_rms_adamw"``) on the hidden matrices, AdamW on the rest (embeddings, output and
    classification heads, biases and norm gains, convolution kernels), by role
    (:func:`~hf_ext.models.layout.model_layout`).

    A mixture of experts' ``(experts, out, in)`` tensor is a stack of hidden matrices: Muon steps each expert as
    ``torch.optim.Muon`` steps it alone (:class:`~.sharded.ShardedMuon`'s ``stacked=True`` groups). GPT-2's
    ``Conv1D`` weights, stored transposed, step as the equivalent ``nn.Linear``'s (``transposed=True`` groups).

    Every group carries ``use_muon``: ``True`` for Muon's, ``False`` for AdamW's. A group added later
    (``add_param_group``) must say which, and a Muon group holds 2-D parameters (3-D with ``stacked=True``).
    ``optimizers`` are the inner ``torch.optim.Muon`` and ``torch.optim.AdamW``; save and load through this
    optimizer, not through them.
    """

    def __init__(self, model: torch.nn.Module, lr: float):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"MuonWithAdamW takes the model (an nn.Module), got {type(model).__name__}: it reads the model's "
                "structure to send hidden matrices and experts to Muon, and embeddings, heads and vectors to AdamW"
            )
        params = dict(model.named_parameters())
        muon, rest = {}, []
        for name, layout in model_layout(model).items():
            if layout.role == "hidden" and (layout.stacked or len(layout.shape) == 2):
                muon.setdefault((layout.stacked, layout.transposed), []).append(params[name])
            else:
                rest.append(params[name])
        self.optimizers: list[torch.optim.Optimizer] = []
        groups = [
            {"params": group, "use_muon": True, "stacked": stacked, "transposed": transposed}
            for (stacked, transposed), group in muon.items()
        ]
        groups += [{"params": rest, "use_muon": False}] if rest else []
        super().__init__(groups, {"lr": lr})

    def add_param_group(self, param_group: dict) -> None:
        use_muon = param_group.get("use_muon")
        if not isinstance(use_muon, bool):
            raise ValueError(
                f"MuonWithAdamW: a param group must set `use_muon` to True (Muon, 2-D parameters) or False (AdamW), "
                f"got {use_muon!r}"
            )
        lr = param_group.get("lr", self.defaults["lr"])
        check_finite_number("MuonWithAdamW", "lr", lr)
        if not lr >= 0:
            raise ValueError(f"MuonWithAdamW: `lr` must be >= 0, got {lr}")
        params = param_group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        dims = (2, 3) if param_group.get("stacked") is True else (2,)
        if use_muon and any(p.dim() not in dims for p in params):
            shapes = [tuple(p.shape) for p in params if p.dim() not in dims]
            raise ValueError(
                "MuonWithAdamW: a `use_muon=True` group holds 2-D parameters (3-D ones with `stacked=True`: stacks of "
                f"matrices along the first axis, as mixture-of-experts tensors), got shapes {shapes}"
            )
        taken = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in taken for p in params):
            raise ValueError("MuonWithAdamW: some parameters appear in more than one parameter group")
        group = {**param_group, "params": params, "lr": lr}
        kind = ShardedMuon if use_muon else torch.optim.AdamW
        inner = next((o for o in self.optimizers if isinstance(o, kind)), None)
        if inner is None:
            settings = {"adjust_lr_fn": "match_rms_adamw"} if use_muon else {}
            inner = kind([group], lr=lr, weight_decay=0.0, **settings)
            inner.state = self.state
            self.optimizers.append(inner)
        else:
            inner.add_param_group(group)
        self.param_groups.append(inner.param_groups[-1])  # the same dict: a scheduler's lr reaches the inner step

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)  # builds new groups and state: hand them to the inner optimizers
        for inner in self.optimizers:
            use_muon = isinstance(inner, torch.optim.Muon)
            inner.param_groups = [group for group in self.param_groups if group["use_muon"] == use_muon]
            inner.state = self.state

    def __getstate__(self) -> dict:
        # torch keeps only defaults, state and param_groups; the inner optimizers share those (copied once, by memo).
        return {**super().__getstate__(), "optimizers": self.optimizers}

    @torch.no_grad()
    def step(self, closure=None):
        with torch.enable_grad():
            loss = begin_step(self, closure)
        for optimizer in self.optimizers:
            optimizer.step()
        return loss
