"""``torch.optim.Muon`` on the hidden matrices and AdamW on the rest, as the one optimizer the Trainer takes.

The usual Muon setup (Muon handles 2-D hidden weights only): the outside baseline that the Scion and
symmetry-curvature recipes compare with.
"""

import torch


class MuonWithAdamW(torch.optim.Optimizer):
    """Muon (``adjust_lr_fn="match_rms_adamw"``) on 2-D weights other than embeddings and the output head, AdamW
    on the rest; the groups are the two optimizers' own, so the Trainer's scheduler drives both."""

    def __init__(self, model: torch.nn.Module, lr: float):
        output = getattr(model, "get_output_embeddings", lambda: None)()
        special = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
        special |= {id(output.weight)} if output is not None else set()
        params = [p for p in model.parameters() if p.requires_grad]
        hidden = [p for p in params if p.dim() == 2 and id(p) not in special]
        rest = [p for p in params if all(p is not h for h in hidden)]
        self.optimizers = [
            torch.optim.Muon(hidden, lr=lr, weight_decay=0.0, adjust_lr_fn="match_rms_adamw"),
            torch.optim.AdamW(rest, lr=lr, weight_decay=0.0),
        ]
        super().__init__([{"params": hidden}, {"params": rest}], {"lr": lr})
        self.param_groups = [group for optimizer in self.optimizers for group in optimizer.param_groups]

    @torch.no_grad()
    def step(self, closure=None):
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self, set_to_none: bool = True):
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)
