"""SymmetryCurvature: precondition each layer by its gradient second moment averaged over the layer's symmetries.

    S <- beta2 S + (1 - beta2) R2(g g^T)         R2: the closed-form group average (.groups)
    m <- beta1 m + (1 - beta1) g
    x <- x - lr (S_hat + damping * mean(g^2)_hat I)^(-1/2) m_hat - lr * weight_decay * x

``S`` lives in the group's commutant, so it is stored, and ``H^-1 = S^(-1/2)`` applied, in that
structure (hats: Adam's bias corrections; ``damping`` is relative to the mean eigenvalue of ``S``,
``tr(S) / numel``, which is the running mean of ``g^2``). The group sets the estimate:

- ``("orthogonal" | "signed_permutation", "identity")``: ``S = I kron G^T G / out``, the step is
  ``sqrt(out) U V^T`` for one gradient (Muon; Shampoo's ``L^-1/4 G R^-1/4`` up to scale);
- ``("permutation", "identity")`` (hidden units): that step on the rows' mean and, separately, on its complement;
- ``("scaling", "scaling")``: the diagonal, Adam with the damping inside the root, ``m_hat / sqrt(v_hat + damping *
  mean(v_hat))`` (``torch.optim.Adam(eps=0)`` only as ``damping -> 0``);
- ``("orthogonal", "orthogonal")``: normalised SGD.

Every group's step has entries of RMS about 1, like Adam's, so learning rates carry over. The state (``S``, the
momentum, the mean of ``g^2``) and the inverse roots are float32 for bfloat16/float16 parameters (the roots'
eigendecompositions float64), as in Shampoo implementations: ``S`` is singular or nearly so (one gradient's ``S``
has rank 1 per block), and ``S^(-1/2)`` multiplies whatever of the momentum lies outside its range by up to
``damping^(-1/2)``; a bfloat16 ``S`` or momentum puts 2^-8 of it there, which made the first step of a bfloat16
8 x 8 layer twice the float32 one. The momentum and ``S`` thus cost float32 memory.

Sharded parameters (FSDP2): ``("scaling", "scaling")`` layers (the fallback: embeddings, head, norms)
step on each rank's shard, their state sharded like the parameter; every other group needs the whole
gradient, so each such matrix has an owner rank (:class:`~hf_ext.optim.shared.sharding.OwnerExchange`)
that gathers its gradient, keeps its whole ``exp_avg``, ``moment`` and ``mean_square`` (every rank
counts the ``step``) and sends back each rank's block of the direction: one process's step, with the
state split across ranks matrix by matrix. Saved with torch.distributed.checkpoint, it reloads at the
same world size (the owners follow from the parameters' sizes and the number of ranks).

Why its own optimizer: Shampoo, Muon and KFAC each fix one structure; here the structure is derived
from a symmetry group the user picks per layer.
"""

import fnmatch
from itertools import chain

import torch
from torch import nn

from ..._sharded import local, shard_group, squared_norm_part, sum_across
from ..._validation import check_finite
from ..shared.first_step import check_first_step
from ..shared.sharding import OwnerExchange
from .groups import GROUPS, SymmetryGroup

FALLBACK = ("scaling", "scaling")  # vectors, embeddings and the output head: the diagonal (Adam-like) estimate
STATISTICS = ("exp_avg", "moment", "mean_square")  # state kept in float32 (or the parameter's wider dtype)


def statistics_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the state and roots of a parameter of ``dtype`` are computed in: float32 at least."""
    return torch.promote_types(dtype, torch.float32)


def resolve_group(spec, param: torch.Tensor) -> tuple[str, str]:
    """A group spec as ``(rows, cols)``: ``"auto"`` is ``("permutation", "identity")`` for matrices with at least
    2 rows and :data:`FALLBACK` otherwise; one name acts on the rows (output units), with the identity on the
    columns."""
    if spec == "auto":
        return ("permutation", "identity") if param.dim() >= 2 and param.shape[0] >= 2 else FALLBACK
    if isinstance(spec, str):
        return (spec, "identity")
    return tuple(spec)


def as_matrix(tensor: torch.Tensor) -> torch.Tensor:
    """A parameter as the ``(out, in)`` matrix the groups act on: vectors are one row, conv kernels flattened."""
    return tensor.reshape(1, -1) if tensor.dim() < 2 else tensor.reshape(tensor.shape[0], -1)


def symmetry_param_groups(model: nn.Module, hidden="permutation", overrides: dict | None = None) -> list[dict]:
    """Trainable parameters of ``model`` grouped by the symmetry group of each, with their names.

    Hidden matrices get ``hidden`` (a name: on their output units, identity on the inputs; or ``(rows, cols)``);
    vectors, embeddings and the output head get :data:`FALLBACK`. ``overrides`` maps a name pattern
    (``fnmatch``, e.g. ``"*.mlp.down_proj.weight"``) to a group spec; the first matching pattern wins.
    """
    output = getattr(model, "get_output_embeddings", lambda: None)()
    special = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    special |= {id(output.weight)} if output is not None else set()
    groups: dict[tuple, dict] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        spec = next((s for pattern, s in (overrides or {}).items() if fnmatch.fnmatchcase(name, pattern)), None)
        if spec is None:
            spec = FALLBACK if param.dim() < 2 or id(param) in special else hidden
        spec = resolve_group(spec, param)
        entry = groups.setdefault(spec, {"params": [], "param_names": [], "group": spec})
        entry["params"].append(param)
        entry["param_names"].append(name)
    return list(groups.values())


class SymmetryCurvature(torch.optim.Optimizer):
    """Steps with ``S^(-1/2)`` times the momentum, ``S`` the symmetry-averaged gradient second moment (module doc).

    Args:
        params: an ``nn.Module`` (grouped by :func:`symmetry_param_groups`), or parameters / param groups;
            a group may set ``group`` and any argument below.
        lr: step size (>= 0); steps have Adam-like RMS, so Adam's learning rates are the place to start.
        group: ``"auto"``, a name from :data:`~hf_ext.optim.symmetry_curvature.groups.GROUPS` (acting on the rows),
            or ``(rows, cols)``.
        betas: EMA weights of the momentum and of ``S``, each in [0, 1).
        damping: added to ``S``'s eigenvalues, relative to their mean (> 0).
        weight_decay: decoupled, times ``lr``.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        group: str | tuple[str, str] = "auto",
        betas: tuple[float, float] = (0.9, 0.95),
        damping: float = 1e-6,
        weight_decay: float = 0.0,
    ):
        if isinstance(params, nn.Module):
            params = symmetry_param_groups(params)
        defaults = {"lr": lr, "group": group, "betas": tuple(betas), "damping": damping, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        """torch's, then the group's checks; a refused group is not kept."""
        super().add_param_group(param_group)
        try:
            self._check(self.param_groups[-1], len(self.param_groups) - 1)
        except ValueError:
            self.param_groups.pop()
            raise

    @staticmethod
    def _check(group: dict, index: int) -> None:
        for name in ("lr", "betas", "damping", "weight_decay"):
            check_finite("SymmetryCurvature", name, group[name])
        for name, allowed, ok in (
            ("lr", ">= 0", group["lr"] >= 0),
            ("damping", "> 0", group["damping"] > 0),
            ("weight_decay", ">= 0", group["weight_decay"] >= 0),
            ("betas", "two numbers in [0, 1)", len(group["betas"]) == 2 and all(0 <= b < 1 for b in group["betas"])),
        ):
            if not ok:
                raise ValueError(f"SymmetryCurvature: `{name}` must be {allowed}, got {group[name]!r}")
        names = group.get("param_names") or [f"param_groups[{index}][{i}]" for i in range(len(group["params"]))]
        for name, param in zip(names, group["params"], strict=True):
            spec = resolve_group(group["group"], param)
            if len(spec) != 2 or any(side not in GROUPS for side in spec):
                raise ValueError(
                    f"SymmetryCurvature: `group` of {name!r} must be 'auto', one of {list(GROUPS)} or a pair of "
                    f"them, got {group['group']!r}"
                )
            try:
                symmetry = SymmetryGroup(*spec)
            except ValueError as error:
                shape = tuple(param.shape)
                raise ValueError(f"SymmetryCurvature: parameter {name!r} of shape {shape}: {error}") from None
            symmetry.check(tuple(param.shape), name)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        check_first_step(self)
        groups = {p: group for group in self.param_groups for p in group["params"]}
        symmetries = {p: SymmetryGroup(*resolve_group(group["group"], p)) for p, group in groups.items()}
        # Owners over every whole-matrix parameter, with a gradient this step or not, so that they stay put.
        matrices = [p for p, symmetry in symmetries.items() if not symmetry.elementwise]
        # An owner keeps the matrix's momentum and S: balance both (S of an (out, in) layer grows as in^2). Their
        # sizes from shapes alone: S of a gradient on the meta device.
        moments = [symmetries[p].second_moment(as_matrix(torch.empty(p.shape, device="meta"))) for p in matrices]
        costs = [p.numel() + moment.numel() for p, moment in zip(matrices, moments, strict=True)]
        exchange = OwnerExchange(matrices, "SymmetryCurvature", costs)
        stepped = [p for p in groups if p.grad is not None]
        for p in stepped:  # every rank counts every parameter's steps; a matrix's owner alone keeps its tensors
            self.state[p]["step"] = self.state[p].get("step", 0) + 1
        self._step_elementwise([p for p in stepped if symmetries[p].elementwise], groups)

        def direction(index: int, whole: list[torch.Tensor]) -> torch.Tensor:
            p = matrices[index]
            g, state = as_matrix(whole[0]), self.state[p]
            if "exp_avg" not in state:
                g = g.to(statistics_dtype(g.dtype))
                self._init_state(state, torch.zeros_like(g), torch.zeros_like(symmetries[p].second_moment(g)))
            step = self._direction(groups[p], symmetries[p], state, state["exp_avg"], state["moment"], g)
            return step.reshape(p.shape)

        pending = [p for p in stepped if not symmetries[p].elementwise]
        position = {id(p): index for index, p in enumerate(matrices)}
        indices = [position[id(p)] for p in pending]
        dtypes = [statistics_dtype(p.grad.dtype) for p in pending]  # the direction, added as one process adds it
        steps = exchange.run(indices, [[p.grad] for p in pending], direction, dtypes)
        for p, step in zip(pending, steps, strict=True):
            self._apply(groups[p], p, step)
        return loss

    @staticmethod
    def _init_state(state: dict, exp_avg: torch.Tensor, moment: torch.Tensor) -> None:
        state["exp_avg"] = exp_avg
        state["moment"] = moment
        state["mean_square"] = torch.zeros((), dtype=exp_avg.dtype, device=exp_avg.device)

    def _step_elementwise(self, params: list[torch.Tensor], groups: dict) -> None:
        """Diagonal-``S`` parameters on this rank's shards, their state shaped and sharded like them; the mean of
        ``g^2`` over each whole parameter comes from one ``all_reduce`` for all of them."""
        if not params:
            return
        process_group = shard_group(params, "SymmetryCurvature")
        squares = sum_across(torch.stack([squared_norm_part([p.grad], process_group) for p in params]), process_group)
        for p, square_sum in zip(params, squares, strict=True):
            state = self.state[p]
            if "exp_avg" not in state:
                dtype = statistics_dtype(p.dtype)
                self._init_state(state, torch.zeros_like(p, dtype=dtype), torch.zeros_like(p, dtype=dtype))
            g = as_matrix(local(p.grad))
            views = [as_matrix(local(state[name])) for name in ("exp_avg", "moment")]
            symmetry = SymmetryGroup(*resolve_group(groups[p]["group"], p))
            mean_square = (square_sum / p.numel()).to(statistics_dtype(g.dtype))
            self._apply(groups[p], p, self._direction(groups[p], symmetry, state, *views, g, mean_square))

    @staticmethod
    def _direction(group: dict, symmetry: SymmetryGroup, state: dict, exp_avg, moment, g, mean_square=None):
        """One step of the module docstring's estimates for the gradient matrix ``g`` (whole, or a shard for a
        diagonal ``S``; ``mean_square``: the mean of ``g^2`` over the whole parameter, default ``g``'s own);
        returns the direction, a matrix like ``g`` in :func:`statistics_dtype`."""
        beta1, beta2 = group["betas"]
        t = state["step"]
        g = g.to(moment.dtype)
        exp_avg.lerp_(g, 1 - beta1)
        moment.lerp_(symmetry.second_moment(g), 1 - beta2)
        state["mean_square"].lerp_(g.square().mean() if mean_square is None else mean_square, 1 - beta2)
        correction = 1 - beta2**t
        damping = group["damping"] * state["mean_square"].item() / correction + torch.finfo(g.dtype).tiny
        return symmetry.precondition(moment / correction, exp_avg / (1 - beta1**t), damping=damping)

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, which casts every floating state tensor to its parameter's dtype, with the float32 state
        restored as saved (a bfloat16 model's would otherwise be rounded on every resume)."""
        saved = [entry for entry in state_dict["state"].items() if isinstance(entry[1], dict)]
        super().load_state_dict(state_dict)
        ids = chain.from_iterable(group["params"] for group in state_dict["param_groups"])
        params = dict(zip(ids, chain.from_iterable(group["params"] for group in self.param_groups), strict=True))
        for key, value in saved:
            for name in STATISTICS:
                if key in params and name in value:
                    dtype = statistics_dtype(params[key].dtype)
                    self.state[params[key]][name] = value[name].to(device=params[key].device, dtype=dtype)

    @staticmethod
    def _apply(group: dict, p: torch.Tensor, direction: torch.Tensor) -> None:
        """Decoupled weight decay, then the step, on this rank's part of ``p`` (``direction``: that part's entries)."""
        part = local(p)
        part.mul_(1 - group["lr"] * group["weight_decay"])
        part.add_(direction.reshape(part.shape), alpha=-group["lr"])
