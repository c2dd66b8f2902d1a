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

The step works on many parameters at once: the diagonal-``S`` parameters in ``foreach`` form, and the matrices of
one param group, group and shape stacked, their estimates and inverse roots in one batched call each (chunks of
at most :data:`BATCH_ELEMENTS` numbers of ``S``, for memory). It reads nothing back from the device, and keeps
``step`` (float32, on each parameter's device) and ``lr`` (a number, or a tensor for a scheduler) as tensors where
torch's optimizers do, so ``torch.compile(optimizer.step)`` compiles once. The eigendecompositions dominate its
cost: the default hidden group has two ``d_in x d_in`` roots per matrix (the rows' mean and its complement), a
one-sided Shampoo one, so the step costs about twice Shampoo's (``group="orthogonal"``: the same).

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
import math
from dataclasses import dataclass

import torch
from torch import nn

from ..._sharded import local, shard_group, squared_norm_parts, sum_across
from ..._validation import check_finite, check_finite_number, check_params
from ...models.layout import ParamLayout, model_layout
from ..shared.first_step import begin_step
from ..shared.held import held_tensors, replaced
from ..shared.sharding import OwnerExchange
from ..shared.state import restore_state
from .groups import GROUPS, SymmetryGroup, _per_matrix

FALLBACK = ("scaling", "scaling")  # vectors, embeddings and heads: the diagonal (Adam-like) estimate
HIDDEN = ("permutation", "identity")  # "auto" on a matrix with at least 2 output units
STATISTICS = ("exp_avg", "moment", "mean_square")  # state kept in float32 (or the parameter's wider dtype)
# The most numbers of S whose inverse roots one batched call computes: 128 MiB in float64 (30 of SmolLM2-135M's
# 1536 x 1536 S pairs at once would need 4.5 GB for the input, eigenvectors and roots).
BATCH_ELEMENTS = 2**24


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
            "betas": tuple(betas) if isinstance(betas, tuple | list) else betas,  # else refused by name in _check
            "damping": damping,
            "weight_decay": weight_decay,
            "transposed": False,
            "stacked": False,
        }
        super().__init__(check_params("SymmetryCurvature", params), defaults)

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
        self._plan()

    @staticmethod
    def _check(group: dict, index: int) -> None:
        check_finite_number("SymmetryCurvature", "lr", group["lr"])
        lr = float(group["lr"])  # a tensor lr (for a scheduler under torch.compile) is read here, never in a step
        for name in ("damping", "weight_decay"):
            check_finite_number("SymmetryCurvature", name, group[name])
        if not isinstance(group["betas"], tuple | list) or not all(isinstance(b, int | float) for b in group["betas"]):
            raise TypeError(f"SymmetryCurvature: `betas` must be two numbers in [0, 1), got {group['betas']!r}")
        check_finite("SymmetryCurvature", "betas", group["betas"])
        for name, allowed, ok in (
            ("lr", ">= 0", lr >= 0),
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

    def _plan(self) -> None:
        """How each parameter steps, fixed by the groups' settings and the parameters' shapes: its layout, symmetry
        group, and for a whole-matrix one its index among the matrices (owners, batching); rebuilt whenever
        ``param_groups`` change (in :meth:`_init_group` when other tensors took their parameters' place), never
        elsewhere in a step (so that ``torch.compile`` finds it as it was)."""
        self._entries, matrices, costs = [], [], []
        for index, group in enumerate(self.param_groups):
            entries = []
            for p, layout in zip(group["params"], group_layouts(group, index), strict=True):
                symmetry = SymmetryGroup(*resolve_group(group["group"], layout))
                # A diagonal S steps each shard alone; an expert tensor's needs each expert's own mean of g^2.
                if symmetry.elementwise and not layout.stacked:
                    entries.append(_Entry(layout, symmetry))
                    continue
                # Its S's shape, from a gradient on the meta device; an owner keeps the matrix's momentum and S:
                # balance both (S of an (out, in) layer grows as in^2).
                moment = symmetry.second_moment(layout.matrices(torch.empty(p.shape, device="meta"))).shape
                entries.append(_Entry(layout, symmetry, len(matrices), tuple(moment)))
                matrices.append(p)
                costs.append(p.numel() + moment.numel())
            self._entries.append(entries)
        # Owners over every whole-matrix parameter, with a gradient this step or not, so that they stay put.
        self._exchange = OwnerExchange(matrices, "SymmetryCurvature", costs)
        self._held = held_tensors(self)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._plan()

    def _init_group(
        self, group: dict, index: int, params: list, steps: list, exp_avgs: list, moments: list, mean_squares: list
    ) -> None:
        """``group``'s parameters with a gradient and their state: ``step`` (float32, on its device; every rank counts
        every parameter's steps), and the momentum (shaped like the parameter), ``S`` and the mean of ``g^2`` of each
        of its matrices, in :func:`statistics_dtype`, where this rank steps it (a diagonal ``S`` sharded like the
        parameter; a whole matrix on its owner; ``None`` elsewhere), each made at the parameter's first step.

        As torch's optimizers do, in a method named so, handing the state over in lists: ``torch.compile`` runs it as
        Python when it traces the step, and the step reads the state only from these lists (in ``self.state`` the
        trace would not see what the call for a later group makes, and gave up the step of two or more groups).

        The first group's call first makes the plan again if ``param_groups`` hold other tensors than it was made on:
        accelerate's FSDP2 ``prepare`` (the ``Trainer``'s path) puts the shards there after the optimizer was built on
        the whole model, and owners assigned then would take each shard for a whole matrix."""
        if index == 0 and replaced(self, self._held):
            self._plan()
        for p, entry in zip(group["params"], self._entries[index], strict=True):
            if p.grad is None:
                continue
            state = self.state[p]
            if "step" not in state:
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                dtype = statistics_dtype(p.dtype)
                if entry.matrix is None:
                    zeros = (torch.zeros_like(p, dtype=dtype), torch.zeros_like(p, dtype=dtype))
                    self._init_statistics(state, *zeros, 1)
                elif self._exchange.owns(entry.matrix):
                    exp_avg = torch.zeros(p.shape, dtype=dtype, device=p.device)
                    moment = torch.zeros(entry.moment, dtype=dtype, device=p.device)
                    self._init_statistics(state, exp_avg, moment, entry.layout.num_matrices)
            params.append(p)
            steps.append(state["step"])
            for values, name in ((exp_avgs, "exp_avg"), (moments, "moment"), (mean_squares, "mean_square")):
                values.append(state.get(name))

    @staticmethod
    def _init_statistics(state: dict, exp_avg: torch.Tensor, moment: torch.Tensor, matrices: int) -> None:
        """The momentum (shaped like the parameter), ``S`` and the mean of ``g^2`` of each of its ``matrices``."""
        state["exp_avg"] = exp_avg
        state["moment"] = moment
        state["mean_square"] = torch.zeros(matrices, dtype=exp_avg.dtype, device=exp_avg.device)

    @torch.no_grad()
    def step(self, closure=None):
        with torch.enable_grad():
            loss = begin_step(self, closure)
        elementwise, matrices = [], []
        for index, group in enumerate(self.param_groups):
            params, steps, exp_avgs, moments, mean_squares = [], [], [], [], []
            self._init_group(group, index, params, steps, exp_avgs, moments, mean_squares)
            entries = [e for p, e in zip(group["params"], self._entries[index], strict=True) if p.grad is not None]
            for entry, *tensors in zip(entries, params, steps, exp_avgs, moments, mean_squares, strict=True):
                (elementwise if entry.matrix is None else matrices).append(_Stepped(index, entry, *tensors))
        if not elementwise and not matrices:
            return loss
        torch._foreach_add_([item.step for item in elementwise + matrices], 1)
        stepped = elementwise + matrices
        directions = self._elementwise_directions(elementwise) + self._matrix_directions(matrices)
        for index, group in enumerate(self.param_groups):
            mine = [(local(item.param), d) for item, d in zip(stepped, directions, strict=True) if item.group == index]
            if mine:
                params, group_directions = (list(column) for column in zip(*mine, strict=True))
                self._apply(group, params, group_directions)
        return loss

    def _elementwise_directions(self, stepped: list["_Stepped"]) -> list[torch.Tensor]:
        """The diagonal-``S`` directions on this rank's shards, as :meth:`SymmetryGroup.precondition` computes them
        for ``("scaling", "scaling")`` but in ``foreach`` form on tensors as they are; the mean of ``g^2`` over each
        whole parameter comes from one ``all_reduce`` for all of them."""
        if not stepped:
            return []
        params = [item.param for item in stepped]
        process_group = shard_group(params, "SymmetryCurvature")
        squares = sum_across(squared_norm_parts([p.grad for p in params], process_group), process_group)
        means = torch._foreach_div(list(squares.unbind()), [float(p.numel()) for p in params])
        directions = [None] * len(stepped)
        for index, positions in _by_group(stepped).items():
            group, items = self.param_groups[index], [stepped[k] for k in positions]
            beta1, beta2 = group["betas"]
            dtypes = [item.exp_avg.dtype for item in items]
            grads = [local(item.param.grad).to(dtype) for item, dtype in zip(items, dtypes, strict=True)]
            exp_avgs, moments = [local(item.exp_avg) for item in items], [local(item.moment) for item in items]
            mean_squares = [item.mean_square for item in items]
            torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
            torch._foreach_lerp_(moments, torch._foreach_mul(grads, grads), 1 - beta2)
            new_means = [means[k].to(dtype) for k, dtype in zip(positions, dtypes, strict=True)]
            torch._foreach_lerp_(mean_squares, new_means, 1 - beta2)
            bias1, bias2 = _bias_corrections([item.step for item in items], group["betas"])
            roots = torch._foreach_div(moments, bias2)
            torch._foreach_clamp_min_(roots, 0)
            damping = torch._foreach_div(mean_squares, bias2)
            torch._foreach_mul_(damping, group["damping"])
            torch._foreach_add_(damping, [torch.finfo(dtype).tiny for dtype in dtypes])
            torch._foreach_add_(roots, damping)
            torch._foreach_pow_(roots, -0.5)
            group_directions = torch._foreach_div(exp_avgs, bias1)
            torch._foreach_mul_(group_directions, roots)
            for k, direction in zip(positions, group_directions, strict=True):
                directions[k] = direction
        return directions

    def _matrix_directions(self, stepped: list["_Stepped"]) -> list[torch.Tensor]:
        """The whole-matrix directions, each matrix on its owner: those of one group, symmetry, shape and dtype
        batched (:meth:`_batched_directions`), in chunks of at most :data:`BATCH_ELEMENTS` numbers of ``S``."""
        if not stepped:
            return []
        by_matrix = {item.entry.matrix: item for item in stepped}

        def compute(batch: list[int], wholes: list[list[torch.Tensor]]) -> list[torch.Tensor]:
            buckets: dict[tuple, list[int]] = {}
            for position, (matrix, (grad,)) in enumerate(zip(batch, wholes, strict=True)):
                item = by_matrix[matrix]
                symmetry = (item.entry.symmetry.rows.name, item.entry.symmetry.cols.name)
                key = (item.group, symmetry, item.entry.layout.matrix_shape, grad.dtype, grad.device)
                buckets.setdefault(key, []).append(position)
            results = [None] * len(batch)
            for positions in buckets.values():
                for chunk in _chunks(positions, [math.prod(by_matrix[batch[k]].entry.moment) for k in positions]):
                    items, grads = [by_matrix[batch[k]] for k in chunk], [wholes[k][0] for k in chunk]
                    for k, direction in zip(chunk, self._batched_directions(items, grads), strict=True):
                        results[k] = direction
            return results

        indices = [item.entry.matrix for item in stepped]
        dtypes = [statistics_dtype(item.param.grad.dtype) for item in stepped]  # added as one process adds it
        return self._exchange.run_batched(indices, [[item.param.grad] for item in stepped], compute, dtypes)

    def _batched_directions(self, stepped: list["_Stepped"], grads: list[torch.Tensor]) -> list[torch.Tensor]:
        """One step of the module docstring's estimates for whole gradients of one group, symmetry and matrix shape,
        stacked along the matrices (each parameter's experts in turn): the moments and inverse roots of all of
        them in one batched call; the directions, shaped like the parameters, in :func:`statistics_dtype`."""
        group, symmetry = self.param_groups[stepped[0].group], stepped[0].entry.symmetry
        beta1, beta2 = group["betas"]
        layouts = [item.entry.layout for item in stepped]
        sizes = [layout.num_matrices for layout in layouts]
        dtype = stepped[0].moment.dtype
        g = torch.cat([layout.matrices(grad).to(dtype) for layout, grad in zip(layouts, grads, strict=True)])
        exp_avgs = [layout.matrices(item.exp_avg) for layout, item in zip(layouts, stepped, strict=True)]
        moments, mean_squares = [item.moment for item in stepped], [item.mean_square for item in stepped]
        torch._foreach_lerp_(exp_avgs, list(g.split(sizes)), 1 - beta1)
        torch._foreach_lerp_(moments, list(symmetry.second_moment(g).split(sizes)), 1 - beta2)
        torch._foreach_lerp_(mean_squares, list(g.square().mean((-2, -1)).split(sizes)), 1 - beta2)
        bias1, bias2 = (
            torch.cat([c.to(dtype).expand(n) for c, n in zip(bias, sizes, strict=True)])
            for bias in _bias_corrections([item.step for item in stepped], group["betas"])
        )
        damping = group["damping"] * torch.cat(mean_squares) / bias2 + torch.finfo(dtype).tiny  # one per matrix
        moment = torch.cat(moments) / _per_matrix(bias2, moments[0].dim())
        exp_avg = torch.cat(exp_avgs) / _per_matrix(bias1, 3)
        direction = symmetry.precondition(moment, exp_avg, damping=damping)
        return [layout.from_matrices(d) for layout, d in zip(layouts, direction.split(sizes), strict=True)]

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, which casts every floating state tensor to its parameter's dtype, with the float32 state
        restored as saved (a bfloat16 model's would otherwise be rounded on every resume) and ``step`` on each
        parameter's device (a state saved with Python numbers too)."""
        super().load_state_dict(state_dict)
        self._plan()

        def dtype(name: str, p: torch.Tensor) -> torch.dtype | None:
            return torch.float32 if name == "step" else statistics_dtype(p.dtype) if name in STATISTICS else None

        restore_state(self, state_dict, dtype)

    @staticmethod
    def _apply(group: dict, params: list[torch.Tensor], directions: list[torch.Tensor]) -> None:
        """Decoupled weight decay, then the step, on this rank's parts of ``params`` (``directions``: those parts'
        entries, changed here); ``lr`` may be a tensor."""
        if group["weight_decay"]:
            torch._foreach_mul_(params, 1 - group["lr"] * group["weight_decay"])
        directions = [d.reshape(p.shape) for p, d in zip(params, directions, strict=True)]
        torch._foreach_mul_(directions, group["lr"])
        torch._foreach_sub_(params, directions)


@dataclass(frozen=True)
class _Entry:
    """How one parameter steps (:meth:`SymmetryCurvature._plan`): ``matrix`` is its index among the whole-matrix
    parameters (``None``: a diagonal ``S``, stepped elementwise) and ``moment`` the shape of its ``S``."""

    layout: ParamLayout
    symmetry: SymmetryGroup
    matrix: int | None = None
    moment: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Stepped:
    """A parameter with a gradient this step: its group's index, its :class:`_Entry`, the parameter and its state
    (:meth:`SymmetryCurvature._init_group`; the statistics ``None`` where another rank keeps them)."""

    group: int
    entry: _Entry
    param: torch.Tensor
    step: torch.Tensor
    exp_avg: torch.Tensor | None
    moment: torch.Tensor | None
    mean_square: torch.Tensor | None


def _by_group(stepped: list[_Stepped]) -> dict[int, list[int]]:
    """The positions in ``stepped`` of each group's parameters."""
    positions: dict[int, list[int]] = {}
    for k, item in enumerate(stepped):
        positions.setdefault(item.group, []).append(k)
    return positions


def _bias_corrections(steps: list[torch.Tensor], betas: tuple[float, float]) -> tuple[list, list]:
    """Adam's ``1 - beta^step`` for each of the ``steps`` and each beta (float64 0-d tensors)."""
    stacked = torch.stack(steps).double()
    return tuple(list((1 - beta**stacked).unbind()) for beta in betas)


def _chunks(positions: list[int], sizes: list[int]) -> list[list[int]]:
    """``positions`` in consecutive runs of at most :data:`BATCH_ELEMENTS` in ``sizes`` (at least one each)."""
    chunks, total = [], 0
    for position, size in zip(positions, sizes, strict=True):
        if not chunks or total + size > BATCH_ELEMENTS:
            chunks.append([])
            total = 0
        chunks[-1].append(position)
        total += size
    return chunks
