"""Scion: momentum on the gradient, then a step to the linear minimization oracle (LMO) of a per-layer norm ball.

    d <- (1 - alpha) d + alpha g
    x <- x + lr * scale * lmo(d)                  (unconstrained)
    x <- (1 - lr) x + lr * scale * lmo(d)         (constrained: x stays in the ball of radius `scale`)

``lmo(d) = argmin_{||x|| <= 1} <d, x>``: a point of unit norm with ``<d, lmo(d)> = -||d||_*``. Each
parameter has its own norm, chosen for its role (a matrix is read as the linear map ``d_in -> d_out``):

- ``spectral`` (hidden matrices): ``||x|| = sqrt(d_in/d_out) ||x||_op``, ``lmo(d) = -sqrt(d_out/d_in) U V^T``
  (Newton-Schulz), ``||d||_* = sqrt(d_out/d_in) ||d||_nuclear``;
- ``sign`` (output head): ``||x|| = d_in max|x_ij|``, ``lmo(d) = -sign(d) / d_in``, ``||d||_* = ||d||_1 / d_in``;
- ``colnorm`` (embeddings): ``||x|| = max_j ||x_:j||_2 / sqrt(d_out)``, ``lmo(d)_:j = -sqrt(d_out) d_:j / ||d_:j||_2``,
  ``||d||_* = sqrt(d_out) sum_j ||d_:j||_2``;
- ``rms`` (biases, norm gains): ``||x|| = ||x||_2 / sqrt(n)``, ``lmo(d) = -sqrt(n) d / ||d||_2``,
  ``||d||_* = sqrt(n) ||d||_2``.

Why its own optimizer: ``torch.optim.Muon`` has the spectral LMO only (other parameters go to
AdamW) and no constrained variant; Scion gives every layer its geometry, which is what the
batch-size theory of :mod:`hf_ext.optim.scion.critical_batch` measures in.

Sharded parameters (FSDP2): the momentum stays sharded like its parameter. ``sign`` and ``colnorm``
step on each rank's shard when the axis their LMO reads is not the split one (FSDP2's row split of
the head and of the embeddings); ``spectral`` and ``rms`` need the whole tensor, which its owner rank
gathers, steps and sends back in blocks (:class:`~hf_ext.optim.shared.sharding.OwnerExchange`), so the
step is one process's.
"""

import math
from collections.abc import Iterable

import torch
from torch import nn

from ..._sharded import local, sharding
from ..._validation import check_finite
from ..shared.first_step import check_first_step
from ..shared.newton_schulz import QUINTIC, newton_schulz
from ..shared.sharding import OwnerExchange

EPS = 1e-12


class Spectral:
    """Operator norm RMS -> RMS: the hidden matrices' geometry (Muon's update, scaled by sqrt(d_out/d_in))."""

    reads_axis = None  # the axis of the (d_out, d_in) view each LMO entry reads whole; None: the whole tensor

    def __init__(self, ns_steps: int = 5, coefficients: tuple[float, float, float] = QUINTIC):
        self.ns_steps, self.coefficients = ns_steps, coefficients

    def lmo(self, d: torch.Tensor) -> torch.Tensor:
        return -math.sqrt(d.shape[0] / d.shape[1]) * newton_schulz(d, self.ns_steps, self.coefficients)

    def dual(self, d: torch.Tensor) -> float:
        return math.sqrt(d.shape[0] / d.shape[1]) * torch.linalg.svdvals(d.float()).sum().item()

    def primal(self, x: torch.Tensor) -> float:
        return math.sqrt(x.shape[1] / x.shape[0]) * torch.linalg.matrix_norm(x.float(), ord=2).item()

    def init_(self, x: torch.Tensor, generator: torch.Generator | None) -> None:
        q = torch.linalg.qr(torch.randn(max(x.shape), min(x.shape), generator=generator, dtype=torch.float64))[0]
        x.copy_((q if x.shape[0] >= x.shape[1] else q.T) * math.sqrt(x.shape[0] / x.shape[1]))


class Sign:
    """Max-norm (l1 -> l_inf) times d_in: the output head's geometry (a logit moves by at most the input's mean)."""

    reads_axis = 1

    def lmo(self, d: torch.Tensor) -> torch.Tensor:
        return -torch.sign(d) / d.shape[1]

    def dual(self, d: torch.Tensor) -> float:
        return d.abs().sum().item() / d.shape[1]

    def primal(self, x: torch.Tensor) -> float:
        return x.shape[1] * x.abs().max().item()

    def init_(self, x: torch.Tensor, generator: torch.Generator | None) -> None:
        x.copy_(torch.sign(torch.randn(x.shape, generator=generator)) / x.shape[1])


class ColNorm:
    """Largest column RMS (l1 -> RMS): the embeddings' geometry, each token's vector on its own."""

    reads_axis = 0

    def lmo(self, d: torch.Tensor) -> torch.Tensor:
        return -math.sqrt(d.shape[0]) * d / d.norm(dim=0, keepdim=True).clamp(min=EPS)

    def dual(self, d: torch.Tensor) -> float:
        return math.sqrt(d.shape[0]) * d.norm(dim=0).sum().item()

    def primal(self, x: torch.Tensor) -> float:
        return x.norm(dim=0).max().item() / math.sqrt(x.shape[0])

    def init_(self, x: torch.Tensor, generator: torch.Generator | None) -> None:
        x.copy_(self.lmo(torch.randn(x.shape, generator=generator)).neg())


class RMS:
    """Root-mean-square norm of the whole tensor: biases and norm gains."""

    reads_axis = None

    def lmo(self, d: torch.Tensor) -> torch.Tensor:
        return -math.sqrt(d.numel()) * d / d.norm().clamp(min=EPS)

    def dual(self, d: torch.Tensor) -> float:
        return math.sqrt(d.numel()) * d.norm().item()

    def primal(self, x: torch.Tensor) -> float:
        return x.norm().item() / math.sqrt(x.numel())

    def init_(self, x: torch.Tensor, generator: torch.Generator | None) -> None:
        """Left as the model built it: norm gains start at 1 (unit RMS), biases at 0."""


NORMS = {"spectral": Spectral, "sign": Sign, "colnorm": ColNorm, "rms": RMS}
MATRIX_NORMS = ("spectral", "sign", "colnorm")
CHOICES = (*NORMS, "auto")


def resolve_norm(name: str, param: torch.Tensor) -> str:
    """``"auto"`` by shape: ``rms`` for vectors, ``spectral`` for matrices; other names as given."""
    if name != "auto":
        return name
    return "rms" if param.dim() < 2 else "spectral"


def scion_param_groups(model: nn.Module, scales: dict[str, float] | None = None) -> list[dict]:
    """Trainable parameters of ``model`` grouped by role: embeddings ``colnorm``, output head ``sign``, other
    matrices ``spectral``, vectors ``rms``. A head tied to the input embeddings is the head (``sign``).

    ``scales`` maps a norm name to its radius (default 1.0 each). ``nn.Embedding`` weights are stored
    ``(vocab, dim)``, the transpose of their linear map, hence ``transposed=True`` in their group.
    """
    scales = scales or {}
    unknown = sorted(set(scales) - set(NORMS))
    if unknown:
        raise ValueError(f"scion_param_groups: `scales` keys must be among {list(NORMS)}, got {unknown}")
    output = getattr(model, "get_output_embeddings", lambda: None)()
    head = {id(output.weight)} if output is not None else set()
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)} - head
    groups = {name: [] for name in NORMS}
    for param in (p for p in model.parameters() if p.requires_grad):
        if id(param) in head:
            groups["sign"].append(param)
        elif id(param) in embeddings:
            groups["colnorm"].append(param)
        else:
            groups[resolve_norm("auto", param)].append(param)
    return [
        {"params": params, "norm": name, "scale": scales.get(name, 1.0), "transposed": name == "colnorm"}
        for name, params in groups.items()
        if params
    ]


class Scion(torch.optim.Optimizer):
    """Stochastic conditional gradient with momentum over per-layer norm balls (see the module docstring).

    Args:
        params: an ``nn.Module`` (its parameters grouped by role with :func:`scion_param_groups`),
            or parameters / param groups; a group may set ``norm``, ``scale``, ``transposed`` and any argument below.
        lr: step size ``gamma`` (for ``constrained``, the fraction of the way to the LMO point, in [0, 1]).
        alpha: momentum weight of the new gradient in ``d <- (1 - alpha) d + alpha g``, in (0, 1].
        norm: one of ``spectral``, ``sign``, ``colnorm``, ``rms``, or ``auto`` (vectors ``rms``, matrices ``spectral``).
            Given a model, the norms are chosen by role and ``norm`` must stay ``auto``: pass groups to set it.
        scale: the norm ball's radius (> 0); given a model, every role's (``scion_param_groups(model, scales)``
            sets them one by one).
        constrained: the Frank-Wolfe variant ``x <- (1 - lr) x + lr scale lmo(d)``.
        ns_steps: Newton-Schulz steps of the spectral LMO.
    """

    def __init__(
        self,
        params,
        lr: float = 0.01,
        alpha: float = 0.1,
        norm: str = "auto",
        scale: float = 1.0,
        constrained: bool = False,
        ns_steps: int = 5,
    ):
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "norm": norm,
            "scale": scale,
            "constrained": constrained,
            "ns_steps": ns_steps,
            "transposed": False,
        }
        self._check_settings(defaults)
        if isinstance(params, nn.Module):
            if norm != "auto":
                raise ValueError(
                    f"Scion: given a model, the norms are chosen by role (embeddings 'colnorm', output head 'sign', "
                    f"other matrices 'spectral', vectors 'rms'), so `norm` must be 'auto', got {norm!r}; pass "
                    "parameter groups (scion_param_groups(model) edited, or your own) to choose norms"
                )
            params = scion_param_groups(params, scales=dict.fromkeys(NORMS, scale))
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        """torch's, then the group's checks; a refused group is not kept."""
        super().add_param_group(param_group)
        try:
            self._check(self.param_groups[-1])
        except ValueError:
            self.param_groups.pop()
            raise

    @classmethod
    def _check(cls, group: dict) -> None:
        cls._check_settings(group)
        for param in group["params"]:
            if group["norm"] in MATRIX_NORMS and param.dim() < 2:
                raise ValueError(
                    f"Scion: norm {group['norm']!r} needs a matrix, got a parameter of shape {tuple(param.shape)}; "
                    "use 'rms' or 'auto' for vectors"
                )

    @staticmethod
    def _check_settings(group: dict) -> None:
        """The settings of a group (or the defaults), without its parameters."""
        for name in ("lr", "alpha", "scale", "ns_steps"):
            check_finite("Scion", name, group[name])
        if group["norm"] not in CHOICES:
            raise ValueError(f"Scion: `norm` must be one of {list(CHOICES)}, got {group['norm']!r}")
        if not group["lr"] >= 0 or (group["constrained"] and group["lr"] > 1):
            allowed = "in [0, 1] when constrained" if group["constrained"] else ">= 0"
            raise ValueError(f"Scion: `lr` must be {allowed}, got {group['lr']}")
        if not 0 < group["alpha"] <= 1:
            raise ValueError(f"Scion: `alpha` must be in (0, 1], got {group['alpha']}")
        if not group["scale"] > 0:
            raise ValueError(f"Scion: `scale` must be > 0, got {group['scale']}")
        if not isinstance(group["ns_steps"], int) or group["ns_steps"] < 1:
            raise ValueError(f"Scion: `ns_steps` must be a positive integer, got {group['ns_steps']!r}")

    @staticmethod
    def _norm(group: dict, param: torch.Tensor):
        name = resolve_norm(group["norm"], param)
        return Spectral(group["ns_steps"]) if name == "spectral" else NORMS[name]()

    @staticmethod
    def _view(group: dict, param: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (shaped like ``param``) as its norm sees it: a ``(d_out, d_in)`` map, or as is for ``rms``."""
        if resolve_norm(group["norm"], param) == "rms":
            return tensor
        matrix = tensor.reshape(tensor.shape[0], -1)
        return matrix.T if group["transposed"] else matrix

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        check_first_step(self)
        # Owners over every parameter that needs its whole tensor, with a gradient this step or not: they stay put.
        whole = [p for group in self.param_groups for p in group["params"] if self._needs_whole(group, p)]
        position = {id(p): index for index, p in enumerate(whole)}
        groups, pending = {}, []
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                d = state["momentum_buffer"].lerp_(p.grad, group["alpha"])
                if group["constrained"]:
                    local(p).mul_(1 - group["lr"])
                if id(p) in position:
                    groups[id(p)] = group
                    pending.append((p, d))
                else:
                    local(p).add_(self._direction(group, local(p), local(d)), alpha=group["lr"])
        directions = OwnerExchange(whole, "Scion").run(
            [position[id(p)] for p, _ in pending],
            [[d] for _, d in pending],
            lambda index, tensors: self._direction(groups[id(whole[index])], whole[index], tensors[0]),
        )
        for (p, _), direction in zip(pending, directions, strict=True):
            local(p).add_(direction, alpha=groups[id(p)]["lr"])
        return loss

    @staticmethod
    def _needs_whole(group: dict, param: torch.Tensor) -> bool:
        """Whether ``param`` is sharded along an axis its LMO reads (then its owner steps it whole)."""
        layout = sharding(param, "Scion: a parameter")
        if layout is None:
            return False
        name = resolve_norm(group["norm"], param)
        axis = NORMS[name].reads_axis
        split = min(layout.dim, 1)  # the (d_out, d_in) view's axis the shards split
        if group["transposed"]:
            split = 1 - split
        return axis is None or axis == split

    def _direction(self, group: dict, param: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        """``scale * lmo(d)``, shaped like ``param``."""
        direction = self._norm(group, param).lmo(self._view(group, param, d))
        if group["transposed"] and resolve_norm(group["norm"], param) != "rms":
            direction = direction.T
        return group["scale"] * direction.reshape(param.shape)

    @torch.no_grad()
    def lmo_direction(self, tensors: dict[torch.Tensor, torch.Tensor]) -> dict[torch.Tensor, torch.Tensor]:
        """``scale_l * lmo_l(t_l)`` for tensors keyed by parameter: a step of unit product norm (no momentum)."""
        return {
            p: self._direction(group, p, tensors[p])
            for group in self.param_groups
            for p in group["params"]
            if p in tensors
        }

    @torch.no_grad()
    def norm_matched_init_(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise every parameter on the sphere of its norm ball (radius ``scale``): orthogonal times
        ``sqrt(d_out/d_in)`` (spectral), ``+-1/d_in`` (sign), unit-RMS columns (colnorm); ``rms`` ones are kept."""
        for group in self.param_groups:
            for p in group["params"]:
                view = self._view(group, p, p)
                fresh = torch.empty(view.shape, dtype=torch.float64)
                self._norm(group, p).init_(fresh, generator)
                if resolve_norm(group["norm"], p) != "rms":
                    view.copy_(fresh * group["scale"])

    def _each(self, tensors: dict[torch.Tensor, torch.Tensor]) -> Iterable[tuple]:
        for group in self.param_groups:
            for p in group["params"]:
                if p in tensors:
                    yield self._norm(group, p), self._view(group, p, tensors[p]), group["scale"]

    def dual_norm(self, tensors: dict[torch.Tensor, torch.Tensor]) -> float:
        """``sum_l scale_l ||t_l||_{l,*}``: the dual of the product norm over layers (tensors keyed by parameter)."""
        return sum(scale * norm.dual(t) for norm, t, scale in self._each(tensors))

    def primal_norm(self, tensors: dict[torch.Tensor, torch.Tensor]) -> float:
        """``max_l ||t_l||_l / scale_l``: the product norm whose unit ball the LMO step moves in."""
        return max((norm.primal(t) / scale for norm, t, scale in self._each(tensors)), default=0.0)
