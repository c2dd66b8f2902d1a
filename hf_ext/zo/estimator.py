"""Zeroth-order projected-gradient estimates: forward passes only, perturbations from seeds."""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from .config import ZOConfig
from .perturbation import ZOPerturbation, derive_seed
from .subspace import Reduce

LossFn = Callable[[], torch.Tensor]


@dataclass
class ZOEstimate:
    """Projected gradients ``g_i`` (one per perturbation seed) and what the forwards saw.

    The gradient estimate is ``mean_i g_i * Z(seed_i)``. ``finite`` is False when some loss was
    NaN or inf; the step must then be skipped.
    """

    seeds: list[int] = field(default_factory=list)
    projected_grads: list[float] = field(default_factory=list)
    loss: float = math.nan
    forward_passes: int = 0
    finite: bool = True


def _scalar(loss: torch.Tensor, reduce_mean: Reduce | None) -> torch.Tensor:
    """The loss as a float32 0-d tensor (averaged across processes with ``reduce_mean``), left on its device: the
    step reads all its losses on the host at once."""
    if loss.numel() != 1:
        raise ValueError(
            f"zeroth-order step: the loss must be a scalar, got a tensor of shape {tuple(loss.shape)}; reduce it "
            "(e.g. `.mean()`) before returning it"
        )
    loss = loss.detach().float().reshape(())
    return loss if reduce_mean is None else reduce_mean(loss)


@torch.no_grad()
def estimate_projected_gradients(
    perturbation: ZOPerturbation,
    loss_fn: LossFn,
    step_seed: int,
    refresh_subspaces: bool,
    row_mask: torch.Tensor | None = None,
    reduce_mean: Reduce | None = None,
) -> ZOEstimate:
    """Run the forwards of one step and return the projected gradients.

    Two-point: ``g_i = (L(theta + eps Z_i) - L(theta - eps Z_i)) / (2 eps)``, 2q forwards.
    One-point: ``g_i = (L(theta + eps Z_i) - L(theta)) / eps``, q + 1 forwards.
    AGZO recomputes the subspaces in the first forward when ``refresh_subspaces`` (or when it has
    none yet). With ``reduce_mean`` (multi-process), each loss is averaged across processes, so
    every process gets the same ``g_i`` from its own data shard. The losses stay on their device until the last
    forward, then are read together: one host sync per call, not one per forward.
    """
    config: ZOConfig = perturbation.config
    eps = config.eps
    estimate = ZOEstimate()
    capture = perturbation.is_subspace and (refresh_subspaces or perturbation.needs_subspaces())
    capture_seed = derive_seed(step_seed, 1 << 32) if capture else None
    previous_subspaces = dict(perturbation.subspaces)
    one_point = config.estimator == "one_point"
    losses = []  # every forward's, in order: read on the host once, after the last forward
    if one_point:
        with perturbation.perturbed(step_seed, 0.0, capture_seed, row_mask):
            losses.append(_scalar(loss_fn(), reduce_mean))
        capture_seed = None
    for i in range(config.num_perturbations):
        seed = derive_seed(step_seed, i)
        with perturbation.perturbed(seed, eps, capture_seed, row_mask):
            losses.append(_scalar(loss_fn(), reduce_mean))
        capture_seed = None
        if not one_point:
            with perturbation.perturbed(seed, -eps):
                losses.append(_scalar(loss_fn(), reduce_mean))
        estimate.seeds.append(seed)
    estimate.forward_passes = len(losses)
    values = torch.stack(losses).tolist()  # the step's one host sync: the seeded updates take host coefficients
    if one_point:
        base_loss = values[0]
        estimate.projected_grads = [(plus - base_loss) / eps for plus in values[1:]]
        estimate.loss = base_loss
    else:
        pairs = list(zip(values[0::2], values[1::2], strict=True))
        estimate.projected_grads = [(plus - minus) / (2 * eps) for plus, minus in pairs]
        mean_losses = [(plus + minus) / 2 for plus, minus in pairs]
        estimate.loss = sum(mean_losses) / len(mean_losses)
    estimate.finite = math.isfinite(estimate.loss) and all(math.isfinite(g) for g in estimate.projected_grads)
    if not estimate.finite:
        # Subspaces captured from non-finite activations would poison later steps.
        perturbation.subspaces = previous_subspaces
    return estimate


def zo_gradient_estimate(
    model: nn.Module, batch: dict[str, torch.Tensor], config: ZOConfig, seed: int
) -> dict[str, torch.Tensor]:
    """The zeroth-order estimate of the gradient of ``model(**batch).loss``, per parameter name.

    Only perturbed parameters appear (AGZO with ``other_params="frozen"``: targeted linear weights
    only). For analysis and tests: the training path never materialises these tensors.
    """
    was_training = model.training
    model.eval()
    try:
        perturbation = ZOPerturbation(model, config)
        estimate = estimate_projected_gradients(
            perturbation,
            lambda: model(**batch)["loss"],
            step_seed=seed,
            refresh_subspaces=True,
            row_mask=batch.get("attention_mask"),
        )
    finally:
        model.train(was_training)
    if not estimate.finite:
        raise FloatingPointError(f"non-finite loss in a perturbed forward (loss={estimate.loss})")
    params = dict(model.named_parameters())
    grads = {name: torch.zeros_like(params[name], dtype=torch.float32) for name in perturbation.parameter_names()}
    for seed_i, g in zip(estimate.seeds, estimate.projected_grads, strict=True):
        perturbation.add_direction_(seed_i, g / len(estimate.seeds), out=grads)
    return grads
