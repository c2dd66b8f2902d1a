"""Gradient smoothing: each repeated block's update becomes a weighted average of its depth neighbours'.

Transformer layers (and ResNet stages) repeat one structure; parameters with the same role in
neighbouring blocks (say ``layers.4.mlp.up_proj.weight`` and ``layers.5.mlp.up_proj.weight``)
tend to want related updates. :class:`GradientSmoothing` wraps any base optimizer and, for every
role, replaces block ``l``'s update ``U_l`` by ``sum_j K(l, j) U_j`` over a depth window:

- ``mode="update"`` (default) smooths what the base optimizer did: parameters are copied before
  the base step and the smoothed update is written after it. Adam's per-parameter scaling or
  Muon's orthogonalisation happen first, per block, and the result is averaged.
- ``mode="gradient"`` smooths the gradients before the base step (the base sees smoothed
  gradients, so its state, e.g. Adam's moments, accumulates them).

Both are depth-wise augmentations of the base method; they differ when the base is nonlinear in
the gradient (Adam, Muon) and coincide for plain SGD without momentum. Parameters outside the
blocks are left to the base optimizer, and so is a parameter that only some blocks hold (T5's
relative attention bias, in its first block): blocks are smoothed on the parameters they share.
A window of width 1 is the base optimizer, bit for bit.

The step costs a few passes over the block parameters and one matmul: every role's blocks are rows of two
``(blocks, N)`` buffers kept between steps (twice the block parameters' memory), mixed by one
:func:`~hf_ext.kernels.depth_smooth` over all roles; a step allocates nothing (on a CPU, the fresh pages of a
parameter-sized temporary cost more than the arithmetic), reads no number back to the host, and
``torch.compile`` of it compiles once.

Sharded models (FSDP2): the smoothing mixes the blocks entry by entry (entry ``j`` of block ``l``'s
update from entry ``j`` of its neighbours'), so it runs on each rank's local shards, with no
communication, provided every block's parameter of one role is split the same way. Identical blocks
sharded by ``fully_shard`` over one mesh are; a role split differently across blocks (some blocks
sharded and others not, another mesh or dimension) is refused at construction.
"""

import math
from collections.abc import Iterable, Sequence

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule

from hf_ext.kernels import depth_smooth

from ..._sharded import local, sharding
from ..._validation import check_count, check_finite_number
from ..shared.first_step import begin_step
from ..shared.held import held_tensors, replaced
from ..shared.wrapper import OptimizerWrapper

KERNELS = ("uniform", "triangular", "gaussian")
MODES = ("update", "gradient")
BOUNDARIES = ("renormalize", "truncate")


def distance_weights(window: int, kernel: str = "uniform", sigma: float | None = None) -> list[float]:
    """Unnormalised weight of a neighbour at depth distance ``0 .. window // 2``.

    ``uniform``: all 1; ``triangular``: ``h + 1 - d``; ``gaussian``: ``exp(-d^2 / (2 sigma^2))``
    (``sigma`` defaults to ``window / 4``).
    """
    if kernel not in KERNELS:
        raise ValueError(f"`kernel` must be one of {list(KERNELS)}, got {kernel!r}")
    if sigma is not None and kernel != "gaussian":  # it was ignored without a word
        raise ValueError(f"`sigma` is the width of kernel='gaussian' only, got sigma={sigma} with kernel={kernel!r}")
    half = window // 2
    if kernel == "uniform":
        return [1.0] * (half + 1)
    if kernel == "triangular":
        return [float(half + 1 - d) for d in range(half + 1)]
    sigma = window / 4 if sigma is None else sigma
    if not sigma > 0:
        raise ValueError(f"`sigma` must be > 0, got {sigma}")
    return [math.exp(-(d**2) / (2 * sigma**2)) for d in range(half + 1)]


def smoothing_matrix(
    depth: int,
    window: int,
    kernel: str = "uniform",
    sigma: float | None = None,
    weights: Sequence[float] | None = None,
    boundary: str = "renormalize",
) -> torch.Tensor:
    """The ``(depth, depth)`` matrix ``K``: ``K(l, j) = w(|l - j|)`` within the window, rows normalised.

    ``weights`` (one per distance ``0 .. window // 2``) overrides ``kernel``. With ``boundary=
    "renormalize"`` every row sums to 1, so the first and last blocks average over the neighbours
    they have; ``"truncate"`` divides every row by the full window's sum, so edge blocks take
    smaller steps.
    """
    if not isinstance(window, int) or window < 1 or window % 2 == 0:
        raise ValueError(f"`window` must be a positive odd integer, got {window!r}")
    if window > depth:
        raise ValueError(f"`window` ({window}) is wider than the depth ({depth} blocks)")
    if boundary not in BOUNDARIES:
        raise ValueError(f"`boundary` must be one of {list(BOUNDARIES)}, got {boundary!r}")
    half = window // 2
    if weights is None:
        weights = distance_weights(window, kernel, sigma)
    weights = [float(w) for w in weights]
    if len(weights) != half + 1:
        raise ValueError(
            f"`weights` must have window // 2 + 1 = {half + 1} entries (distances 0..{half}), got {len(weights)}"
        )
    if any(not math.isfinite(w) or w < 0 for w in weights) or not any(weights):
        raise ValueError(f"`weights` must be finite, non-negative and not all zero, got {weights}")
    index = torch.arange(depth)
    distance = (index[:, None] - index[None, :]).abs()
    table = torch.tensor(weights + [0.0], dtype=torch.float64)
    matrix = table[distance.clamp(max=half + 1)]
    if boundary == "renormalize":
        row_sums = matrix.sum(dim=1, keepdim=True)
        if (row_sums == 0).any():
            raise ValueError(f"`weights` {weights} give some block no neighbour with positive weight")
        return (matrix / row_sums).float()
    return (matrix / (weights[0] + 2 * sum(weights[1:]))).float()


def _block_class(module: nn.Module) -> type:
    """The class a block was built as: FSDP2's ``fully_shard`` swaps it for a subclass named ``FSDP<class>``, so that
    blocks sharded one by one and a block left to the root's shard are still alike."""
    return next(cls for cls in type(module).__mro__ if not issubclass(cls, FSDPModule))


def _shapes(module: nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(p.shape) for name, p in module.named_parameters()}


def _shared_names(blocks: Sequence[nn.Module]) -> list[str]:
    """The parameters every block holds, in block 0's order: the roles smoothed across depth."""
    shared = set.intersection(*(set(_shapes(block)) for block in blocks))
    return [name for name in _shapes(blocks[0]) if name in shared]


def _first_difference(blocks: Sequence[nn.Module]) -> tuple[int, str] | None:
    """``(block index, what)`` where a block differs from block 0 in class or in the shape of a parameter both have.

    A parameter that only some blocks hold (T5's relative attention bias, in block 0) is no difference: the blocks are
    smoothed on the parameters they all share.
    """
    first, shapes = _block_class(blocks[0]), _shapes(blocks[0])
    for index, block in enumerate(blocks[1:], start=1):
        if _block_class(block) is not first:
            return index, _block_class(block).__name__
        differing = [name for name, shape in _shapes(block).items() if shapes.get(name, shape) != shape]
        if differing:
            return index, differing[0]
    return None


def _submodule(model: nn.Module, name: str) -> nn.Module:
    """``model``'s submodule ``name`` for ``blocks``: torch's message names the missing attribute, not the argument."""
    try:
        return model.get_submodule(name)
    except AttributeError as error:
        raise ValueError(
            f"GradientSmoothing: `blocks` names no submodule of {type(model).__name__} ({error}); pass the name of "
            "the nn.ModuleList of blocks (e.g. 'model.layers'), the blocks themselves, or None to find them"
        ) from None


def find_blocks(model: nn.Module) -> tuple[str, nn.ModuleList]:
    """The longest ``nn.ModuleList`` of alike blocks (e.g. ``model.model.layers``): one class, and the parameters
    they share of one shape each."""
    best = None
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) >= 2:
            alike = _first_difference(module) is None and _shared_names(module)
            if alike and (best is None or len(module) > len(best[1])):
                best = (name, module)
    if best is None:
        raise ValueError("GradientSmoothing: found no nn.ModuleList of two or more alike blocks; pass `blocks`")
    return best


def _check_alike(blocks: Sequence[nn.Module]) -> None:
    difference = _first_difference(blocks)
    if difference is not None:
        raise ValueError(
            "GradientSmoothing: `blocks` must be of one class with their shared parameters of one shape; block "
            f"{difference[0]} differs from block 0 at {difference[1]!r}"
        )


def _check_sharded_alike(name: str, params: list[nn.Parameter]) -> None:
    """Refuse a role whose blocks' parameters are split differently across ranks: their shards would not line up."""
    layouts = [sharding(p, f"GradientSmoothing: {name!r}") for p in params]
    differing = next((index for index, layout in enumerate(layouts) if layout != layouts[0]), None)
    if differing is not None:
        raise ValueError(
            f"GradientSmoothing: {name!r} is sharded as {layouts[differing]} in block {differing} but as {layouts[0]} "
            "in block 0; depth smoothing mixes the blocks' local shards entry by entry, so every block must be "
            "sharded alike (fully_shard each block over the same mesh, or none)"
        )


class _DepthStack:
    """Roles of one dtype and device as rows of two ``(blocks, N)`` buffers: row ``l`` holds block ``l``'s parameters
    of every role side by side, so one matmul mixes them all and a step allocates nothing."""

    def __init__(self, roles: list[list[nn.Parameter]], mixing: torch.Tensor):
        self.params = [p for block in zip(*roles, strict=True) for p in block]  # in the buffers' order, block by block
        first = [local(params[0]) for params in roles]
        self.shapes = [t.shape for t in first] * len(roles[0])
        self.sizes = [t.numel() for t in first] * len(roles[0])
        self.mixing = mixing
        self._allocate(first[0], len(roles[0]), sum(t.numel() for t in first))

    def _allocate(self, like: torch.Tensor, depth: int, width: int) -> None:
        """Zeroed buffers on ``like``'s device and dtype (the columns of gradient-less roles are mixed, unread)."""
        self.work = like.new_zeros(depth, width)
        self.mixed = torch.zeros_like(self.work)
        self.zero = like.new_zeros(())  # the gradient of a parameter without one, broadcast to its size
        self.mixing = self.mixing.to(like.device)

    def _rows(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        """``buffer`` cut into views shaped as :attr:`params`, in their order."""
        pieces = buffer.view(-1).split(self.sizes)
        return [piece.view(shape) for piece, shape in zip(pieces, self.shapes, strict=True)]

    def _follow(self, like: torch.Tensor) -> None:
        """Make the buffers again where ``like`` is if the model moved since they were made (accelerate's ``prepare``
        moves a model its optimizer was built on)."""
        if (like.device, like.dtype) != (self.work.device, self.work.dtype):
            self._allocate(like, *self.work.shape)

    @staticmethod
    def _stack(buffer: torch.Tensor, tensors: list[torch.Tensor]) -> None:
        """Write ``tensors`` (one per parameter, in :attr:`params`' order) into ``buffer`` with one ``cat``: a copy into
        each row's view would become, under ``torch.compile``, a rewrite of the whole buffer per parameter (quadratic
        in depth: the compiled step ran 3x eager at 4 layers, 30x at 16)."""
        torch.cat([t.reshape(-1) for t in tensors], out=buffer.view(-1))

    def _locals(self) -> list[torch.Tensor]:
        return [local(p) for p in self.params]

    def keep_parameters(self) -> None:
        """Copy the parameters into the work buffer (before the base step)."""
        params = self._locals()
        self._follow(params[0])
        self._stack(self.work, params)

    def smooth_update(self) -> None:
        """``p_l += sum_j (I - K)(l, j) (before_j - p_j)``, which is ``before_l + sum_j K(l, j) (p_j - before_j)``."""
        params = self._locals()
        self._stack(self.mixed, params)
        self.work.sub_(self.mixed)
        depth_smooth(self.work, self.mixing, out=self.mixed)
        torch._foreach_add_(params, self._rows(self.mixed))

    def smooth_gradients(self) -> None:
        """``g_l <- sum_j K(l, j) g_j`` for the parameters with a gradient (the others' columns, zeros, are mixed
        unread)."""
        have = [index for index, p in enumerate(self.params) if p.grad is not None]
        if not have:
            return
        grads = [local(self.params[index].grad) for index in have]
        self._follow(grads[0])
        pairs = zip(self.params, self.sizes, strict=True)
        self._stack(self.work, [self.zero.expand(n) if p.grad is None else local(p.grad) for p, n in pairs])
        depth_smooth(self.work, self.mixing, out=self.mixed)
        mixed = self._rows(self.mixed)
        torch._foreach_copy_(grads, [mixed[index] for index in have])


def _depth_stacks(roles: list[list[nn.Parameter]], mixing: torch.Tensor) -> list[_DepthStack]:
    """One :class:`_DepthStack` for each dtype and device among the roles (one, unless a model mixes them)."""
    groups = {}
    for params in roles:
        first = local(params[0])
        groups.setdefault((first.dtype, first.device), []).append(params)
    return [_DepthStack(group, mixing) for group in groups.values()]


class GradientSmoothing(OptimizerWrapper):
    """Wraps ``base_optimizer``; after (or before) its step, smooths each block role's update across depth.

    Args:
        base_optimizer: any ``torch.optim.Optimizer`` over (at least) the block parameters.
        model: the model whose repeated blocks are smoothed.
        blocks: the blocks: a ``ModuleList`` / sequence of modules, or a dotted attribute path
            (``"model.layers"``); ``None`` finds the longest list of identical blocks.
        window: odd width of the depth window (1: no smoothing, the base optimizer exactly).
        kernel: the window's weights, with ``sigma``, ``weights`` and ``boundary``: see :func:`smoothing_matrix`.
        sigma: see :func:`smoothing_matrix`.
        weights: see :func:`smoothing_matrix`.
        boundary: see :func:`smoothing_matrix`.
        mode: ``"update"`` or ``"gradient"`` (see the module docstring).

    ``param_groups``, ``state``, ``state_dict()`` and ``load_state_dict()`` are the base
    optimizer's, so learning-rate schedulers, ``Trainer`` checkpoints and resuming work unchanged;
    the smoothing has no state of its own (its two work buffers hold nothing from one step to the next). A
    ``closure`` is evaluated once, before smoothing.
    """

    def __init__(
        self,
        base_optimizer: torch.optim.Optimizer,
        model: nn.Module,
        blocks: str | Sequence[nn.Module] | None = None,
        window: int = 3,
        kernel: str = "uniform",
        sigma: float | None = None,
        weights: Sequence[float] | None = None,
        boundary: str = "renormalize",
        mode: str = "update",
    ):
        super().__init__(base_optimizer)
        if mode not in MODES:
            raise ValueError(f"GradientSmoothing: `mode` must be one of {list(MODES)}, got {mode!r}")
        check_count("GradientSmoothing", "window", window, 1)
        check_finite_number("GradientSmoothing", "sigma", sigma, allow_none=True)
        if weights is not None and (isinstance(weights, str) or not isinstance(weights, Iterable)):
            raise TypeError(f"GradientSmoothing: `weights` must be a sequence of numbers or None, got {weights!r}")
        for weight in weights or ():
            check_finite_number("GradientSmoothing", "weights", weight)
        if blocks is None:
            _, blocks = find_blocks(model)
        elif isinstance(blocks, str):
            blocks = _submodule(model, blocks)
        elif not isinstance(blocks, Iterable):
            raise TypeError(
                f"GradientSmoothing: `blocks` must be a submodule's name, a sequence of modules or None, got {blocks!r}"
            )
        blocks = list(blocks)
        if len(blocks) < 2:
            raise ValueError(f"GradientSmoothing: need at least 2 blocks, got {len(blocks)}")
        _check_alike(blocks)
        self.mode = mode
        self.matrix = smoothing_matrix(len(blocks), window, kernel, sigma, weights, boundary)
        self.is_identity = bool(torch.equal(self.matrix, torch.eye(len(blocks))))
        self._blocks = blocks
        self._plan()

    def _plan(self) -> None:
        """The roles of the blocks' parameters and their work buffers, from the tensors the blocks hold now."""
        self.roles = self._roles(self._blocks)
        # update mode mixes `before - after` by I - K and adds it to `after`: `before + K (after - before)` in place
        mixing = self.matrix if self.mode == "gradient" else torch.eye(len(self._blocks)) - self.matrix
        self._stacks = [] if self.is_identity else _depth_stacks(list(self.roles.values()), mixing)
        self._held = held_tensors(self)

    def _roles(self, blocks: list[nn.Module]) -> dict[str, list[nn.Parameter]]:
        optimized = {id(p) for group in self.base_optimizer.param_groups for p in group["params"]}
        roles = {}
        for name in _shared_names(blocks):
            params = [block.get_parameter(name) for block in blocks]
            if len({id(p) for p in params}) != len(params):
                raise ValueError(f"GradientSmoothing: blocks share the parameter {name!r}; nothing to smooth across")
            inside = [id(p) in optimized for p in params]
            if any(inside) and not all(inside):
                raise ValueError(f"GradientSmoothing: {name!r} is optimized in some blocks but not in others")
            if all(inside):
                _check_sharded_alike(name, params)
                roles[name] = params
        if not roles:
            raise ValueError("GradientSmoothing: `base_optimizer` optimizes no parameter of the blocks")
        return roles

    def _fill_missing_gradients(self) -> None:
        """A role some blocks have a gradient for gets zeros in the others (it moves them by its neighbours' mix); a
        role no block has one for stays without, so the base optimizer skips it."""
        for params in self.roles.values():
            if any(p.grad is not None for p in params):
                for p in params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        with torch.enable_grad():
            loss = begin_step(self, closure)
        # accelerate's FSDP2 `prepare` (the Trainer's path) shards the blocks after this wrapper was built on the whole
        # model: buffers made then would smooth the old tensors, which no gradient reaches (the base alone, silently).
        if replaced(self, self._held):
            self._plan()
        if self.is_identity:
            self.base_optimizer.step()
            return loss
        if self.mode == "gradient":
            self._fill_missing_gradients()
            for stack in self._stacks:
                stack.smooth_gradients()
            self.base_optimizer.step()
            return loss
        for stack in self._stacks:
            stack.keep_parameters()
        self.base_optimizer.step()
        for stack in self._stacks:
            stack.smooth_update()
        return loss

    def __repr__(self) -> str:
        return f"GradientSmoothing(mode={self.mode!r}, blocks={self.matrix.shape[0]}, base={self.base_optimizer!r})"


class GradientSmoothingFactory:
    """Builds a smoothed optimizer for ``Trainer(optimizer_cls_and_kwargs=(GradientSmoothingFactory, kwargs))``.

    transformers treats a non-``Optimizer`` class there as a factory: it instantiates it with no
    arguments and calls it with the model and ``kwargs``: ``base`` (the base optimizer class,
    default ``torch.optim.AdamW``), ``base_kwargs`` (its arguments; ``weight_decay`` applies to
    parameters with 2 or more dimensions only, not to norms and biases) and any
    :class:`GradientSmoothing` argument.
    """

    def __call__(self, model: nn.Module, base=torch.optim.AdamW, base_kwargs: dict | None = None, **smoothing):
        base_kwargs = dict(base_kwargs or {})
        weight_decay = base_kwargs.pop("weight_decay", 0.0)
        trainable = [p for p in model.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in trainable if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0},
        ]
        return GradientSmoothing(base([g for g in groups if g["params"]], **base_kwargs), model, **smoothing)
