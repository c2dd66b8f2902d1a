"""``torch.optim.Muon`` on the hidden matrices and AdamW on the rest, as the one optimizer the Trainer takes.

The usual Muon setup (Muon handles 2-D hidden weights only): the outside baseline that the Scion and
symmetry-curvature recipes compare with. The two inner optimizers step with this optimizer's groups and
state (the same objects), so one ``state_dict()``, one learning-rate scheduler and one ``load_state_dict()``
cover both, as for any single ``torch.optim.Optimizer``. The Muon part is :class:`~.sharded.ShardedMuon`:
``torch.optim.Muon`` itself on one process and under DDP, whole matrices on owner ranks under FSDP2.
"""

import torch

from ..._validation import check_finite
from ..shared.first_step import check_first_step
from .sharded import ShardedMuon


class MuonWithAdamW(torch.optim.Optimizer):
    """Muon (``adjust_lr_fn="match_rms_adamw"``) on 2-D weights other than embeddings and the output head, AdamW
    on the rest.

    Every group carries ``use_muon``: ``True`` for Muon's, ``False`` for AdamW's. A group added later
    (``add_param_group``) must say which, and a Muon group holds 2-D parameters only.
    ``optimizers`` are the inner ``torch.optim.Muon`` and ``torch.optim.AdamW``; save and load through this
    optimizer, not through them.
    """

    def __init__(self, model: torch.nn.Module, lr: float):
        output = getattr(model, "get_output_embeddings", lambda: None)()
        special = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
        special |= {id(output.weight)} if output is not None else set()
        params = [p for p in model.parameters() if p.requires_grad]
        hidden = [p for p in params if p.dim() == 2 and id(p) not in special]
        rest = [p for p in params if all(p is not h for h in hidden)]
        self.optimizers: list[torch.optim.Optimizer] = []
        groups = [{"params": hidden, "use_muon": True}, {"params": rest, "use_muon": False}]
        super().__init__([group for group in groups if group["params"]], {"lr": lr})

    def add_param_group(self, param_group: dict) -> None:
        use_muon = param_group.get("use_muon")
        if not isinstance(use_muon, bool):
            raise ValueError(
                f"MuonWithAdamW: a param group must set `use_muon` to True (Muon, 2-D parameters) or False (AdamW), "
                f"got {use_muon!r}"
            )
        lr = param_group.get("lr", self.defaults["lr"])
        check_finite("MuonWithAdamW", "lr", lr)
        if not lr >= 0:
            raise ValueError(f"MuonWithAdamW: `lr` must be >= 0, got {lr}")
        params = param_group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        if use_muon and any(p.dim() != 2 for p in params):
            shapes = [tuple(p.shape) for p in params if p.dim() != 2]
            raise ValueError(f"MuonWithAdamW: a `use_muon=True` group holds 2-D parameters only, got shapes {shapes}")
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
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        check_first_step(self)
        for optimizer in self.optimizers:
            optimizer.step()
        return loss
