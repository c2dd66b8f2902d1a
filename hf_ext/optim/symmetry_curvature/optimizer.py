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

A group acts on the linear map ``d_in -> d_out`` a weight holds (:mod:`hf_ext.models.layout`), not on the tensor as
stored: a GPT-2 ``Conv1D`` weight, stored ``(in, out)``, steps as the transpose of its ``nn.Linear`` twin's, and a
mixture-of-experts tensor ``(experts, out, in)`` is that many matrices, each with its own ``S`` (state shaped
``(experts, ...)``, estimates and roots batched over the experts), stepping as each expert alone would. A param
group states this with ``transposed`` and ``stacked`` (:func:`symmetry_param_groups` fills them from the model).

Every group's step has entries of RMS about 1, like Adam's, so learning rates carry over. The state (``S``, the
momentum, the mean of ``g^2``) and the inverse roots are float32 for bfloat16/float16 parameters (the roots'
eigendecompositions float64), as in Shampoo implementations: ``S`` is singular or nearly so (one gradient's ``S``
has rank 1 per block), and ``S^(-1/2)`` multiplies whatever of the momentum lies outside its range by up to
``damping^(-1/2)``; a bfloat16 ``S`` or momentum puts 2^-8 of it there, which made the first step of a bfloat16
8 x 8 layer twice the float32 one. The momentum and ``S`` thus cost float32 memory.

Sharded parameters (FSDP2): ``("scaling", "scaling")`` layers (the fallback: embeddings, heads, norms; an expert
tensor excepted, whose damping is each expert's own) step on each rank's shard, their state sharded like the
parameter; every other group needs the whole gradient, so each such matrix has an owner rank
(:class:`~hf_ext.optim.shared.sharding.OwnerExchange`) that gathers its gradient, keeps its whole ``exp_avg``,
``moment`` and ``mean_square`` (every rank counts the ``step``) and sends back each rank's block of the
direction: one process's step, with the state split across ranks matrix by matrix. Saved with
torch.distributed.checkpoint, it reloads at the same world size (the owners follow from the parameters' sizes
and the number of ranks).

Why its own optimizer: Shampoo, Muon and KFAC each fix one structure; here the structure is derived
from a symmetry group the user picks per layer.
"""

import fnmatch
from itertools import chain

import torch
from torch import nn

from ..._sharded import local, shard_group, squared_norm_part, sum_across
from ..._validation import check_finite
from ...models.layout import ParamLayout, model_layout
from ..shared.first_step import check_first_step
from ..shared.sharding import OwnerExchange
from .groups import GROUPS, SymmetryGroup

FALLBACK = ("scaling", "scaling")  # vectors, embeddings and heads: the diagonal (Adam-like) estimate
HIDDEN = ("permutation", "identity")  # "auto" on a matrix with at least 2 output units
STATISTICS = ("exp_avg", "moment", "mean_square")  # state kept in float32 (or the parameter's wider dtype)


def statistics_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the state and roots of a parameter of ``dtype`` are computed in: float32 at least."""
    return torch.promote_types(dtype, torch.float32)


def check_spec(spec, owner: str, field: str) -> None:
    """Raise ``ValueError`` naming ``field`` and the allowed values unless ``spec`` is a group spec."""
    pair = isinstance(spec, (tuple, list)) and len(spec) == 2 and all(side in GROUPS for side in spec)
    if not (pair or (isinstance(spec, str) and (spec == "auto" or spec in GROUPS))):
        raise ValueError(f"{owner}: {field} must be 'auto', one of {list(GROUPS)} or a pair of them, got {spec!r}")


def resolve_group(spec, layout: ParamLayout) -> tuple[str, str]:
    """A group spec as ``(rows, cols)`` for the parameter of ``layout``: ``"auto"`` is :data:`HIDDEN` for matrices
    with at least 2 output units and :data:`FALLBACK` otherwise; one name acts on the rows (output units), with the
    identity on the columns."""
    if spec == "auto":
        return HIDDEN if layout.matrix_shape[0] >= 2 else FALLBACK
    if isinstance(spec, str):
        return (spec, "identity")
    return tuple(spec)


def group_layouts(group: dict, index: int) -> list[ParamLayout]:
    """How each parameter of ``param_groups[index]`` reads as ``(matrices, out, in)``: as the group's ``transposed``
    and ``stacked`` say (:func:`symmetry_param_groups` sets them from the model); by default as stored."""
    names = group.get("param_names") or [f"param_groups[{index}][{i}]" for i in range(len(group["params"]))]
    return [
        ParamLayout(name, "hidden" if p.dim() >= 2 else "vector", tuple(p.shape), group["transposed"], group["stacked"])
        for name, p in zip(names, group["params"], strict=True)
    ]


def symmetry_param_groups(model: nn.Module, hidden="auto", overrides: dict | None = None) -> list[dict]:
    """Trainable parameters of ``model`` grouped by the symmetry group of each, with their names and layouts.

    Roles and shapes come from :func:`~hf_ext.models.layout.model_layout`. Hidden matrices get ``hidden`` (a name:
    on their output units, identity on the inputs; or ``(rows, cols)``; ``"auto"``: :data:`HIDDEN`, or
    :data:`FALLBACK` for a matrix with one output unit); vectors, embeddings, the output head and classification
    heads get :data:`FALLBACK`. ``overrides`` maps a name pattern (``fnmatch``, e.g. ``"*.mlp.down_proj.weight"``)
    to a group spec; the first matching pattern wins. Each group's ``transposed`` (a weight stored ``(in, out)``,
    as GPT-2's ``Conv1D``) and ``stacked`` (a mixture-of-experts tensor, one matrix per expert along its first axis)
    tell the optimizer how its parameters read as matrices.
    """
    check_spec(hidden, "symmetry_param_groups", "`hidden`")
    for pattern, spec in (overrides or {}).items():
        check_spec(spec, "symmetry_param_groups", f"`overrides[{pattern!r}]`")
    params = dict(model.named_parameters())
    groups: dict[tuple, dict] = {}
    for name, layout in model_layout(model).items():
        spec = next((s for pattern, s in (overrides or {}).items() if fnmatch.fnmatchcase(name, pattern)), None)
        if spec is None:
            spec = hidden if layout.role == "hidden" else FALLBACK
        spec = resolve_group(spec, layout)
        reading = {"transposed": layout.transposed, "stacked": layout.stacked}
        entry = groups.setdefault((spec, *reading.values()), {"params": [], "param_names": [], "group": spec} | reading)
        entry["params"].append(params[name])
        entry["param_names"].append(name)
    return list(groups.values())


class SymmetryCurvature(torch.optim.Optimizer):
    """Steps with ``S^(-1/2)`` times the momentum, ``S`` the symmetry-averaged gradient second moment (module doc).

    Args:
        params: an ``nn.Module`` (grouped by :func:`symmetry_param_groups`, its hidden matrices given ``group``), or
            parameters / param groups; a group may set ``group``, any argument below, and ``transposed`` /
            ``stacked`` (how its tensors read as matrices, see :func:`symmetry_param_groups`; default: as stored,
            ``(out, in, ...)``).
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
        check_spec(group, "SymmetryCurvature", "`group`")
        if isinstance(params, nn.Module):
            params = symmetry_param_groups(params, hidden=group)
        defaults = {
            "lr": lr,
            "group": group,
            "betas": tuple(betas),
            "damping": damping,
            "weight_decay": weight_decay,
            "transposed": False,
            "stacked": False,
        }
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        """torch's, then the group's checks; a refused group is not kept."""
        if self.param_groups and isinstance(param_group, dict):
            named = "param_names" in self.param_groups[0]
            if ("param_names" in param_group) != named:
                advice = "pass `param_names` (one name per parameter)" if named else "leave out `param_names`"
                raise ValueError(
                    f"SymmetryCurvature.add_param_group: {advice}, as the optimizer's other groups "
                    f"{'do' if named else 'do not'}"
                )
        super().add_param_group(param_group)
        try:
            self._check(self.param_groups[-1], len(self.param_groups) - 1)
        except (TypeError, ValueError):
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
        for name in ("transposed", "stacked"):
            if not isinstance(group[name], bool):
                raise TypeError(
                    f"SymmetryCurvature: `{name}` of param_groups[{index}] must be True or False, got {group[name]!r}"
                )
        check_spec(group["group"], "SymmetryCurvature", f"`group` of param_groups[{index}]")
        for layout, param in zip(group_layouts(group, index), group["params"], strict=True):
            if layout.stacked and param.dim() != 3:
                raise ValueError(
                    f"SymmetryCurvature: param_groups[{index}] is `stacked` (experts, out, in), but parameter "
                    f"{layout.name!r} has shape {layout.shape}"
                )
            try:
                symmetry = SymmetryGroup(*resolve_group(group["group"], layout))
            except ValueError as error:
                where = f"parameter {layout.name!r} of shape {layout.shape}"
                raise ValueError(f"SymmetryCurvature: {where}: {error}") from None
            symmetry.check(layout.name, layout.shape, (layout.num_matrices, *layout.matrix_shape))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        check_first_step(self)
        groups, layouts = {}, {}
        for index, group in enumerate(self.param_groups):
            for p, layout in zip(group["params"], group_layouts(group, index), strict=True):
                groups[p], layouts[p] = group, layout
        symmetries = {p: SymmetryGroup(*resolve_group(group["group"], layouts[p])) for p, group in groups.items()}
        # A diagonal S steps each shard alone; an expert tensor's needs each expert's own mean of g^2, so it goes whole.
        elementwise = {p for p, symmetry in symmetries.items() if symmetry.elementwise and not layouts[p].stacked}
        # Owners over every whole-matrix parameter, with a gradient this step or not, so that they stay put.
        matrices = [p for p in symmetries if p not in elementwise]
        # An owner keeps the matrix's momentum and S: balance both (S of an (out, in) layer grows as in^2). Their
        # sizes from shapes alone: S of a gradient on the meta device.
        meta = [layouts[p].matrices(torch.empty(p.shape, device="meta")) for p in matrices]
        costs = [p.numel() + symmetries[p].second_moment(g).numel() for p, g in zip(matrices, meta, strict=True)]
        exchange = OwnerExchange(matrices, "SymmetryCurvature", costs)
        stepped = [p for p in groups if p.grad is not None]
        for p in stepped:  # every rank counts every parameter's steps; a matrix's owner alone keeps its tensors
            self.state[p]["step"] = self.state[p].get("step", 0) + 1
        self._step_elementwise([p for p in stepped if p in elementwise], groups)

        def direction(index: int, whole: list[torch.Tensor]) -> torch.Tensor:
            p = matrices[index]
            layout, state = layouts[p], self.state[p]
            g = layout.matrices(whole[0])
            if "exp_avg" not in state:
                dtype = statistics_dtype(g.dtype)
                moment = symmetries[p].second_moment(g.to(dtype))
                exp_avg = torch.zeros(p.shape, dtype=dtype, device=g.device)
                self._init_state(state, exp_avg, torch.zeros_like(moment), layout.num_matrices)
            exp_avg = layout.matrices(state["exp_avg"])
            return layout.from_matrices(self._direction(groups[p], symmetries[p], state, exp_avg, state["moment"], g))

        pending = [p for p in stepped if p not in elementwise]
        position = {id(p): index for index, p in enumerate(matrices)}
        indices = [position[id(p)] for p in pending]
        dtypes = [statistics_dtype(p.grad.dtype) for p in pending]  # the direction, added as one process adds it
        steps = exchange.run(indices, [[p.grad] for p in pending], direction, dtypes)
        for p, step in zip(pending, steps, strict=True):
            self._apply(groups[p], p, step)
        return loss

    @staticmethod
    def _init_state(state: dict, exp_avg: torch.Tensor, moment: torch.Tensor, matrices: int) -> None:
        """The momentum (shaped like the parameter), ``S`` and the mean of ``g^2`` of each of its ``matrices``."""
        state["exp_avg"] = exp_avg
        state["moment"] = moment
        state["mean_square"] = torch.zeros(matrices, dtype=exp_avg.dtype, device=exp_avg.device)

    def _step_elementwise(self, params: list[torch.Tensor], groups: dict) -> None:
        """Diagonal-``S`` parameters on this rank's shards, their state shaped and sharded like them; the mean of
        ``g^2`` over each whole parameter comes from one ``all_reduce`` for all of them."""
        if not params:
            return
        process_group, diagonal = shard_group(params, "SymmetryCurvature"), SymmetryGroup(*FALLBACK)
        squares = sum_across(torch.stack([squared_norm_part([p.grad], process_group) for p in params]), process_group)
        for p, square_sum in zip(params, squares, strict=True):
            state = self.state[p]
            if "exp_avg" not in state:
                dtype = statistics_dtype(p.dtype)
                contiguous = {"dtype": dtype, "memory_format": torch.contiguous_format}  # so that _one_row is a view
                self._init_state(state, torch.zeros_like(p, **contiguous), torch.zeros_like(p, **contiguous), 1)
            g = _one_row(local(p.grad))
            views = [_one_row(local(state[name])) for name in ("exp_avg", "moment")]
            mean_square = (square_sum / p.numel()).to(statistics_dtype(g.dtype))
            self._apply(groups[p], p, self._direction(groups[p], diagonal, state, *views, g, mean_square))

    @staticmethod
    def _direction(group: dict, symmetry: SymmetryGroup, state: dict, exp_avg, moment, g, mean_square=None):
        """One step of the module docstring's estimates for the gradient matrices ``g`` (``(matrices, out, in)``,
        whole, or a shard as one row for a diagonal ``S``; ``mean_square``: the mean of ``g^2`` over the whole
        parameter, default each matrix's own); returns the direction, shaped like ``g``, in :func:`statistics_dtype`."""
        beta1, beta2 = group["betas"]
        t = state["step"]
        g = g.to(moment.dtype)
        exp_avg.lerp_(g, 1 - beta1)
        moment.lerp_(symmetry.second_moment(g), 1 - beta2)
        state["mean_square"].lerp_(g.square().mean((-2, -1)) if mean_square is None else mean_square, 1 - beta2)
        correction = 1 - beta2**t
        damping = group["damping"] * state["mean_square"] / correction + torch.finfo(g.dtype).tiny  # one per matrix
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


def _one_row(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor as one ``1 x numel`` matrix (a diagonal ``S`` acts entry by entry: shapes do not matter); a view of
    a contiguous tensor."""
    return tensor.reshape(1, 1, tensor.numel())
