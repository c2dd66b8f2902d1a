"""The check every optimizer of hf_ext makes at its first step: that the gradients reach the tensors it steps.

An optimizer built before ``fully_shard`` holds the model's old tensors: FSDP2 gives the module new ``DTensor``
parameters, backward fills their gradients, and the old tensors never get one. torch's optimizers then skip every
parameter and train on without moving the weights (measured: SPS, Scion, SymmetryCurvature, MuonWithAdamW and
GradientSmoothing, 4 steps on 2 processes, 0 movement, 0 state entries). No gradient on any parameter at the first
step says so, whatever the model, for the cost of one pass over the parameters once.
"""

import torch


def check_first_step(optimizer: torch.optim.Optimizer) -> None:
    """Raise ``RuntimeError`` at ``optimizer``'s first step (after its closure ran) when none of its parameters has a
    gradient; later steps only read a flag."""
    if getattr(optimizer, "_first_step_checked", False):
        return
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if params and all(p.grad is None for p in params):
        raise RuntimeError(
            f"{type(optimizer).__name__}.step(): none of its {len(params)} parameters has a gradient, so the step "
            "would move nothing. Built before `fully_shard`? FSDP2 gives the model new DTensor parameters and "
            "backward fills their gradients, not those of the tensors this optimizer holds: shard the model first, "
            "then build the optimizer on it (otherwise, build it on the model whose loss you backpropagate)."
        )
    optimizer._first_step_checked = True


def begin_step(optimizer: torch.optim.Optimizer, closure) -> torch.Tensor | None:
    """The loss of ``closure`` (``None`` without one), then :func:`check_first_step`: how every step of hf_ext begins.

    Call it as ``with torch.enable_grad(): loss = begin_step(self, closure)``, the grad mode named in the step itself:
    ``torch.compile`` of a step whose code names no ``torch`` module (a wrapper's, which only calls methods) gives up
    tracing it as one frame after torch's step wrapper breaks the graph, and compiles each call it makes apart."""
    loss = closure() if closure is not None else None
    check_first_step(optimizer)
    return loss
