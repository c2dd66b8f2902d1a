"""Scion: momentum on the gradient, then a step to the linear minimization oracle (LMO) of a per-layer norm ball.

    d <- (1 - alpha) d + alpha g
    x <- x + lr * scale * lmo(d)                  (unconstrained)
    x <- (1 - lr) x + lr * scale * lmo(d)         (constrained: x stays in the ball of radius `scale`)

``lmo(d) = argmin_{||x|| <= 1} <d, x>``: a point of unit norm with ``<d, lmo(d)> = -||d||_*``. Each
parameter has its own norm, chosen for its role (:func:`~hf_ext.models.layout.model_layout`), and a matrix is read
as the linear map ``d_in -> d_out`` however it is stored (GPT-2's ``Conv1D`` holds it transposed):

- ``spectral`` (hidden matrices): ``||x|| = sqrt(d_in/d_out) ||x||_op``, ``lmo(d) = -sqrt(d_out/d_in) U V^T``
  (Newton-Schulz), ``||d||_* = sqrt(d_out/d_in) ||d||_nuclear``;
- ``sign`` (output head): ``||x|| = d_in max|x_ij|``, ``lmo(d) = -sign(d) / d_in``, ``||d||_* = ||d||_1 / d_in``;
- ``colnorm`` (embeddings): ``||x|| = max_j ||x_:j||_2 / sqrt(d_out)``, ``lmo(d)_:j = -sqrt(d_out) d_:j / ||d_:j||_2``,
  ``||d||_* = sqrt(d_out) sum_j ||d_:j||_2``;
- ``rms`` (biases, norm gains): ``||x|| = ||x||_2 / sqrt(n)``, ``lmo(d) = -sqrt(n) d / ||d||_2``,
  ``||d||_* = sqrt(n) ||d||_2``.

A mixture of experts' ``(experts, d_out, d_in)`` tensor is a stack of matrices, each in its own ball: the norm is
the largest expert's, so the LMO is each expert's own (batched, no loop over experts), the dual norm the sum over
experts and the primal norm the max, as for the layers of the product norm.

Why its own optimizer: ``torch.optim.Muon`` has the spectral LMO only (other parameters go to
AdamW) and no constrained variant; Scion gives every layer its geometry, which is what the
batch-size theory of :mod:`hf_ext.optim.scion.critical_batch` measures in.

Sharded parameters (FSDP2): the momentum stays sharded like its parameter. ``sign`` and ``colnorm``
step on each rank's shard when the axis their LMO reads is not the split one (FSDP2's row split of
the head and of the embeddings), and every norm does on a stack of experts split along the experts;
``spectral`` and ``rms`` need each whole matrix, which its owner rank gathers, steps and sends back in
blocks (:class:`~hf_ext.optim.shared.sharding.OwnerExchange`), so the step is one process's.
"""

import math
from collections.abc import Iterable

import torch
from torch import nn

from ..._sharded import local, shard_group, sharding
from ..._validation import check_field_type, check_finite, check_finite_gradients, check_finite_number, check_params
from ...models.layout import ParamLayout, model_layout
from ..shared.batching import apply_batched, scale_
from ..shared.first_step import begin_step
from ..shared.newton_schulz import QUINTIC, newton_schulz
from ..shared.sharding import OwnerExchange

EPS = 1e-12


def _rows_cols(x: torch.Tensor) -> tuple[int, int]:
    return x.shape[-2], x.shape[-1]


class Spectral:
    """Operator norm RMS -> RMS: the hidden matrices' geometry (Muon's update, scaled by sqrt(d_out/d_in)).

    Every norm takes ``(..., d_out, d_in)`` tensors: one matrix, or a stack of matrices each in its own ball.
    """

    reads = (1, 2)  # the axes of the (experts, d_out, d_in) view the LMO reads whole: a split one needs an owner

    def __init__(self, ns_steps: int = 5, coefficients: tuple[float, float, float] = QUINTIC):
        self.ns_steps, self.coefficients = ns_steps, coefficients

    def lmo(self, d: torch.Tensor) -> torch.Tensor:
        rows, cols = _rows_cols(d)
        return -math.sqrt(rows / cols) * newton_schulz(d, self.ns_steps, self.coefficients)

    def dual(self, d: torch.Tensor) -> float:
        rows, cols = _rows_cols(d)
        return math.sqrt(rows / cols) * torch.linalg.svdvals(d.float()).sum().item()

    def primal(self, x: torch.Tensor) -> float:
        rows, cols = _rows_cols(x)
        return math.sqrt(cols / rows) * torch.linalg.matrix_norm(x.float(), ord=2).max().item()

    def init_(self, x: torch.Tensor, generator: torch.Generator | None) -> None:
        rows, cols = _rows_cols(x)
        tall = (*x.shape[:-2], max(rows, cols), min(rows, cols))
        q = torch.linalg.qr(torch.randn(tall, generator=generator, dtype=torch.float64))[0]
        x.copy_((q if rows >= cols else q.mT) * math.sqrt(rows / cols))


class Sign:
    """Max-norm (l1 -> l_inf) times d_in: the output head's geometry (a logit moves by at most the input's mean)."""

    reads = (2,)  # its scale 1/d_in

    def lmo(self, d: torch.Tensor) -> torch.Tensor:
        return -torch.sign(d) / d.shape[-1]

    def dual(self, d: torch.Tensor) -> float:
        return d.abs().sum().item() / d.shape[-1]

    def primal(self, x: torch.Tensor) -> float:
        return x.shape[-1] * x.abs().max().item()

    def init_(self, x: torch.Tensor, generator: torch.Generator | None) -> None:
        x.copy_(torch.sign(torch.randn(x.shape, generator=generator)) / x.shape[-1])


class ColNorm:
    """Largest column RMS (l1 -> RMS): the embeddings' geometry, each token's vector on its own."""

    reads = (1,)  # each column whole

    def lmo(self, d: torch.Tensor) -> torch.Tensor:
        return -math.sqrt(d.shape[-2]) * d / d.norm(dim=-2, keepdim=True).clamp(min=EPS)

    def dual(self, d: torch.Tensor) -> float:
        return math.sqrt(d.shape[-2]) * d.norm(dim=-2).sum().item()

    def primal(self, x: torch.Tensor) -> float:
        return x.norm(dim=-2).max().item() / math.sqrt(x.shape[-2])

    def init_(self, x: torch.Tensor, generator: torch.Generator | None) -> None:
        x.copy_(self.lmo(torch.randn(x.shape, generator=generator)).neg())


class RMS:
    """Root-mean-square norm of each matrix (of the whole tensor, for a vector): biases and norm gains."""

    reads = (1, 2)

    def lmo(self, d: torch.Tensor) -> torch.Tensor:
        rows, cols = _rows_cols(d)
        return -math.sqrt(rows * cols) * d / torch.linalg.matrix_norm(d, keepdim=True).clamp(min=EPS)

    def dual(self, d: torch.Tensor) -> float:
        rows, cols = _rows_cols(d)
        return math.sqrt(rows * cols) * torch.linalg.matrix_norm(d).sum().item()

    def primal(self, x: torch.Tensor) -> float:
        rows, cols = _rows_cols(x)
        return torch.linalg.matrix_norm(x).max().item() / math.sqrt(rows * cols)

    def init_(self, x: torch.Tensor, generator: torch.Generator | None) -> None:
        """Left as the model built it: norm gains start at 1 (unit RMS), biases at 0."""


NORMS = {"spectral": Spectral, "sign": Sign, "colnorm": ColNorm, "rms": RMS}
MATRIX_NORMS = ("spectral", "sign", "colnorm")
CHOICES = (*NORMS, "auto")
ROLE_NORMS = {"hidden": "spectral", "head": "sign", "embedding": "colnorm", "vector": "rms"}


def resolve_norm(name: str, param: torch.Tensor) -> str:
    """``"auto"`` by shape: ``rms`` for vectors, ``spectral`` for matrices; other names as given."""
    if name != "auto":
        return name
    return "rms" if param.dim() < 2 else "spectral"


def scion_param_groups(model: nn.Module, scales: dict[str, float] | None = None) -> list[dict]:
    """Trainable parameters of ``model`` grouped by role (:func:`~hf_ext.models.layout.model_layout`): embeddings
    ``colnorm``, output and classification heads ``sign``, other matrices ``spectral`` (experts' tensors each
    expert's), vectors ``rms``. A head tied to the input embeddings is the head (``sign``).

    ``scales`` maps a norm name to its radius (default 1.0 each). Each group says how its tensors are stored:
    ``transposed`` (``(d_in, d_out)``: ``nn.Embedding``, GPT-2's ``Conv1D``) and ``stacked`` (a leading experts axis).
    """
    scales = scales or {}
    unknown = sorted(set(scales) - set(NORMS))
    if unknown:
        raise ValueError(f"scion_param_groups: `scales` keys must be among {list(NORMS)}, got {unknown}")
    params = dict(model.named_parameters())
    groups: dict[tuple, list] = {}
    for name, layout in model_layout(model).items():
        key = (ROLE_NORMS[layout.role], layout.transposed, layout.stacked)
        groups.setdefault(key, []).append(params[name])
    order = list(NORMS)
    return [
        {"params": group, "norm": norm, "scale": scales.get(norm, 1.0), "transposed": transposed, "stacked": stacked}
        for (norm, transposed, stacked), group in sorted(groups.items(), key=lambda item: order.index(item[0][0]))
    ]


class Scion(torch.optim.Optimizer):
    """Stochastic conditional gradient with momentum over per-layer norm balls (see the module docstring).

    Args:
        params: an ``nn.Module`` (its parameters grouped by role with :func:`scion_param_groups`),
            or parameters / param groups; a group may set ``norm``, ``scale``, ``transposed`` (tensors stored
            ``(d_in, d_out)``), ``stacked`` (a leading experts axis; required for tensors of 3 or more dimensions:
            ``False`` reads a convolution kernel ``(out, in, *k)`` as one matrix) and any argument below.
        lr: step size ``gamma`` (for ``constrained``, the fraction of the way to the LMO point, in [0, 1]).
        alpha: momentum weight of the new gradient in ``d <- (1 - alpha) d + alpha g``, in (0, 1].
        norm: one of ``spectral``, ``sign``, ``colnorm``, ``rms``, or ``auto`` (vectors ``rms``, matrices ``spectral``).
            Given a model, the norms are chosen by role and ``norm`` must stay ``auto``: pass groups to set it.
        scale: the norm ball's radius (> 0); given a model, every role's (``scion_param_groups(model, scales)``
            sets them one by one).
        constrained: the Frank-Wolfe variant ``x <- (1 - lr) x + lr scale lmo(d)``.
        ns_steps: Newton-Schulz steps of the spectral LMO.

    ``step()`` raises ``FloatingPointError`` naming the first parameter whose gradient holds NaN or inf, before
    any weight or momentum changes: one fused reduction over the gradients and one host sync per step, the step's
    only one. The rest is ``foreach`` calls and, for the matrices of one norm, shape and scale, one batched LMO
    (:func:`~hf_ext.optim.shared.batching.apply_batched`); ``torch.compile(optimizer.step)`` compiles on the first
    step and never again.
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
            "stacked": None,
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
        super().__init__(check_params("Scion", params), defaults)

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
            if param.dim() > 2 and not isinstance(group["stacked"], bool):
                raise ValueError(
                    f"Scion: a parameter of shape {tuple(param.shape)} needs its group's `stacked` set: True for a "
                    "stack of matrices along its first axis (mixture-of-experts tensors, each expert in its own "
                    "ball), False for one (out, in * ...) matrix (a convolution kernel); got "
                    f"{group['stacked']!r}. Scion(model) sets it from the model's structure"
                )

    @staticmethod
    def _check_settings(group: dict) -> None:
        """The settings of a group (or the defaults), without its parameters."""
        for name in ("lr", "alpha", "scale"):
            check_finite_number("Scion", name, group[name])
        check_finite("Scion", "ns_steps", group["ns_steps"])
        check_field_type("Scion", "ns_steps", group["ns_steps"], int)
        check_field_type("Scion", "constrained", group["constrained"], bool)
        if group["norm"] not in CHOICES:
            raise ValueError(f"Scion: `norm` must be one of {list(CHOICES)}, got {group['norm']!r}")
        if not group["lr"] >= 0 or (group["constrained"] and group["lr"] > 1):
            allowed = "in [0, 1] when constrained" if group["constrained"] else ">= 0"
            raise ValueError(f"Scion: `lr` must be {allowed}, got {group['lr']}")
        if not 0 < group["alpha"] <= 1:
            raise ValueError(f"Scion: `alpha` must be in (0, 1], got {group['alpha']}")
        if not group["scale"] > 0:
            raise ValueError(f"Scion: `scale` must be > 0, got {group['scale']}")
        if group["ns_steps"] < 1:
            raise ValueError(f"Scion: `ns_steps` must be a positive integer, got {group['ns_steps']!r}")

    @staticmethod
    def _norm(group: dict, param: torch.Tensor):
        name = resolve_norm(group["norm"], param)
        return Spectral(group["ns_steps"]) if name == "spectral" else NORMS[name]()

    @staticmethod
    def _layout(group: dict, tensor: torch.Tensor) -> ParamLayout:
        """How ``tensor`` (a parameter, or its shard) reads as ``(experts, d_out, d_in)`` matrices under ``group``."""
        role = "vector" if tensor.dim() < 2 else "hidden"
        stacked = bool(group.get("stacked"))  # absent from the groups of a checkpoint saved before it existed
        return ParamLayout("", role, tuple(tensor.shape), bool(group["transposed"]), stacked)

    def _init_group(self, group: dict, params: list, grads: list, momenta: list) -> None:
        """Fill ``params``, ``grads`` and ``momenta`` with ``group``'s parameters that have a gradient (momentum created
        at their first step). torch's optimizers' hook: ``torch.compile`` runs it eagerly before tracing the step, so
        the first step's new state is not a reason to compile again."""
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p)
            params.append(p)
            grads.append(p.grad)
            momenta.append(state["momentum_buffer"])

    @torch.no_grad()
    def step(self, closure=None):
        with torch.enable_grad():
            loss = begin_step(self, closure)
        check_finite_gradients("Scion", self.param_groups, shard_group(self._params(), "Scion"))  # the one host sync
        stepped = []
        for group in self.param_groups:
            params, grads, momenta = [], [], []
            self._init_group(group, params, grads, momenta)
            if not params:
                continue
            torch._foreach_lerp_([local(d) for d in momenta], [local(g) for g in grads], group["alpha"])
            if group["constrained"]:
                scale_([local(p) for p in params], 1 - group["lr"])
            stepped.append((group, params, momenta))
        items = [(group, p, d) for group, params, momenta in stepped for p, d in zip(params, momenta, strict=True)]
        directions = iter(self._directions(items))
        for group, params, _ in stepped:
            torch._foreach_add_([local(p) for p in params], [next(directions) for _ in params], alpha=group["lr"])
        return loss

    def _params(self) -> list[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    @classmethod
    def _needs_whole(cls, group: dict, param: torch.Tensor) -> bool:
        """Whether ``param`` is sharded along an axis its LMO reads (then its owner steps it whole); a split of the
        experts axis leaves whole matrices on each rank."""
        layout = sharding(param, "Scion: a parameter")
        if layout is None:
            return False
        split = cls._layout(group, param).matrix_axis(layout.dim)
        return split in NORMS[resolve_norm(group["norm"], param)].reads

    def _directions(self, items: list[tuple[dict, torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
        """``scale * lmo(t)`` of each ``(group, param, t)``, this rank's part of it: those sharded along an axis their
        LMO reads computed whole on their owner ranks, the others on their local shards."""
        # Owners over every parameter that needs its whole tensor, with a gradient this step or not: they stay put.
        whole = [p for group in self.param_groups for p in group["params"] if self._needs_whole(group, p)]
        if not whole:
            return self._lmo_steps([(group, local(p), local(t)) for group, p, t in items])
        position = {id(p): index for index, p in enumerate(whole)}
        directions: list[torch.Tensor | None] = [None] * len(items)
        here = [k for k, (_, p, _) in enumerate(items) if id(p) not in position]
        there = [k for k in range(len(items)) if id(items[k][1]) in position]
        parts = self._lmo_steps([(items[k][0], local(items[k][1]), local(items[k][2])) for k in here])
        for k, part in zip(here, parts, strict=True):
            directions[k] = part
        groups = {position[id(items[k][1])]: items[k][0] for k in there}

        def owned(indices: list[int], wholes: list[list[torch.Tensor]]) -> list[torch.Tensor]:
            return self._lmo_steps([(groups[i], whole[i], t[0]) for i, t in zip(indices, wholes, strict=True)])

        indices = [position[id(items[k][1])] for k in there]
        parts = OwnerExchange(whole, "Scion").run_batched(indices, [[items[k][2]] for k in there], owned)
        for k, part in zip(there, parts, strict=True):
            directions[k] = part
        return directions

    def _lmo_steps(self, items: list[tuple[dict, torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
        """``scale * lmo(t)`` of each ``(group, param, t)``, shaped and laid out like ``param`` (contiguous: a bfloat16
        ``add_`` rounds a strided operand unlike a contiguous one, and the owners' blocks arrive contiguous). The
        matrices of one norm, shape and scale go through their LMO in one batched call (Newton-Schulz included)."""
        layouts = [self._layout(group, param) for group, param, _ in items]
        stacks = [layout.matrices(t) for layout, (_, _, t) in zip(layouts, items, strict=True)]
        keys = [
            (resolve_norm(group["norm"], param), group["ns_steps"], group["scale"], layout.transposed, *stack.shape[1:])
            + (stack.dtype, stack.device)
            for layout, stack, (group, param, _) in zip(layouts, stacks, items, strict=True)
        ]
        blocks = apply_batched(stacks, keys, self._lmo_batch)
        return [block.view(layout.shape) for layout, block in zip(layouts, blocks, strict=True)]

    @staticmethod
    def _lmo_batch(key: tuple, stack: torch.Tensor) -> torch.Tensor:
        """``scale * lmo`` of each matrix of ``stack`` (``(k, d_out, d_in)``), stored as the parameters hold them."""
        name, ns_steps, scale, transposed = key[:4]
        norm = Spectral(ns_steps) if name == "spectral" else NORMS[name]()
        direction = scale * norm.lmo(stack)
        return (direction.mT if transposed else direction).contiguous()

    @torch.no_grad()
    def lmo_direction(self, tensors: dict[torch.Tensor, torch.Tensor]) -> dict[torch.Tensor, torch.Tensor]:
        """``scale_l * lmo_l(t_l)`` for tensors keyed by parameter: a step of unit product norm (no momentum)."""
        items = [(group, p, tensors[p]) for group in self.param_groups for p in group["params"] if p in tensors]
        return {p: direction for (_, p, _), direction in zip(items, self._lmo_steps(items), strict=True)}

    @torch.no_grad()
    def norm_matched_init_(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise every parameter on the sphere of its norm ball (radius ``scale``): orthogonal times
        ``sqrt(d_out/d_in)`` (spectral), ``+-1/d_in`` (sign), unit-RMS columns (colnorm), each expert of a stack on
        its own sphere; ``rms`` ones are kept."""
        for group in self.param_groups:
            for p in group["params"]:
                layout = self._layout(group, p)
                fresh = torch.empty(layout.matrices(p).shape, dtype=torch.float64)
                self._norm(group, p).init_(fresh, generator)
                if resolve_norm(group["norm"], p) != "rms":
                    p.copy_(layout.from_matrices(fresh * group["scale"]))

    def _each(self, tensors: dict[torch.Tensor, torch.Tensor]) -> Iterable[tuple]:
        for group in self.param_groups:
            for p in group["params"]:
                if p in tensors:
                    yield self._norm(group, p), self._layout(group, p).matrices(tensors[p]), group["scale"]

    def dual_norm(self, tensors: dict[torch.Tensor, torch.Tensor]) -> float:
        """``sum_l scale_l ||t_l||_{l,*}``: the dual of the product norm over layers (tensors keyed by parameter); a
        stack of experts counts as one layer per expert (its dual norms summed)."""
        return sum(scale * norm.dual(t) for norm, t, scale in self._each(tensors))

    def primal_norm(self, tensors: dict[torch.Tensor, torch.Tensor]) -> float:
        """``max_l ||t_l||_l / scale_l``: the product norm whose unit ball the LMO step moves in (a stack of experts:
        the largest expert's norm)."""
        return max((norm.primal(t) / scale for norm, t, scale in self._each(tensors)), default=0.0)
