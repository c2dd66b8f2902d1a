"""Seeded perturbation directions ``Z`` for zeroth-order estimates, applied without writing weights.

Targeted linear layers are perturbed through forward hooks: the hook adds ``eps * x Z^T`` to the
layer's output, which equals running the layer with weight ``W + eps Z``. Weights are therefore
never modified during the perturbed forwards, so a step skipped on a NaN loss leaves them
bit-identical. Other trainable parameters (``other_params="isotropic"``) are perturbed in place
and restored from a copy taken for that forward. Only :meth:`ZOPerturbation.add_direction_`
(the optimizer's update) writes parameters.

MeZO: ``Z = z``, isotropic Gaussian. AGZO: ``Z = N U^T / sqrt(r)``, ``N (out x r)`` Gaussian and
``U (in x r)`` an orthonormal basis of the layer's input activations, found in the hook during
the first forward of a step (before that layer's perturbation is added). Layers fed the very same
input tensor (a Llama block's q/k/v projections, its gate/up projections) share one basis: the
range finder runs 4 times per block instead of 7, and it was the whole of AGZO's overhead over
MeZO on a GPU. A targeted layer that the capture forward does not call (a frozen head, an unused
branch, an expert no token reached) gets an empty basis ``(in x 0)``: the span of no activations
is ``{0}``, so that layer is neither perturbed nor updated until a later capture sees it used. Its
gradient on those batches is exactly zero; a dense MeZO-style fallback would only add a random
walk to it.

GPT-2's ``Conv1D`` stores its weight ``(in, out)``: its hook adds the ``x Z^T`` of the ``(out, in)`` matrix, and
its update is written through a row-major copy of that matrix, so it gets exactly the perturbation and update of
the ``nn.Linear`` holding the transposed weight (same seed, same kernels, same draws). MoE routers and expert
tensors are read inside their module's forward (the router's output is a top-k choice, the experts' tensors are
sliced per expert), so they are perturbed in place around that forward (a forward pre-hook adds ``scale * Z``,
after capturing AGZO's bases from the module's inputs; a forward hook restores the weights). AGZO gives a router
the basis of the module's input, and each expert the basis of the rows routed to it (``expert_subspaces``, batched
over the experts); the second expert tensor's rows are recomputed from the (perturbed) first one.

Under FSDP2 the forwards see whole weights (gathered for the layer's forward), so the hooks draw the
whole ``Z``; a sharded parameter is written on this rank's block of rows with those rows of the
same ``Z`` (noise keyed by the seed, the parameter and the entry's index in the whole tensor), so
one process and any number of shards perturb and update alike.

The hooks run eagerly under ``torch.compile`` (``torch.compiler.disable``): traced, inductor
would replace the seeded draws with its own random numbers (unless
``torch._inductor.config.fallback_random``), so the forwards would be perturbed along another
direction than the one the update regenerates from the seed, and dynamo would recompile for
every new seed.
"""

import contextlib
import math
import weakref
from collections.abc import Collection, Iterable, Iterator

import torch
from torch import nn

from hf_ext.kernels import lowrank_perturb_, seeded_normal, seeded_perturb_
from hf_ext.models.layout import ParamLayout, model_layout

from .._sharded import flat_shard, local, reshard, sharding
from .config import AGZOConfig, ZOConfig
from .experts import expert_inner_rows, expert_tensor_names, routed_rows
from .subspace import Reduce, activation_subspace, expert_subspaces
from .targets import extend_targets, resolve_targets

_MASK64 = (1 << 64) - 1


def derive_seed(*parts: int) -> int:
    """Mix integers into a seed in ``[0, 2**63)`` (splitmix64), identical on every process."""
    state = 0x9E3779B97F4A7C15
    for part in parts:
        state = (state ^ (part & _MASK64)) * 0xBF58476D1CE4E5B9 & _MASK64
        state = (state ^ (state >> 31)) * 0x94D049BB133111EB & _MASK64
        state ^= state >> 29
    return state >> 1


class ZOPerturbation:
    """The perturbations of one model under one :class:`ZOConfig`.

    Each targeted matrix has a key: a linear layer's module name, a MoE tensor's parameter name.
    ``subspaces`` maps each key to its current basis ``U`` (AGZO only; ``(experts, in, r)`` for expert
    tensors); it is what a checkpoint must keep for an exact resume.
    """

    def __init__(self, model: nn.Module, config: ZOConfig, reduce_sum: Reduce | None = None):
        if not isinstance(config, ZOConfig):  # a dict failed as "'dict' object has no attribute 'target_modules'"
            raise TypeError(
                f"ZOPerturbation: `config` must be an AGZOConfig or MeZOConfig, got {type(config).__name__}"
            )
        self.model = model
        self.config = config
        self.targets = resolve_targets(model, config)
        self.reduce_sum = reduce_sum
        self.subspaces: dict[str, torch.Tensor] = {}
        targets = self.targets
        self._index = {name: i for i, name in enumerate([*targets.linears, *targets.moe, *targets.others])}
        self._seed: int | None = None
        self._scale = 0.0
        self._capture_seed: int | None = None
        self._row_mask: torch.Tensor | None = None
        self._last_capture: tuple[weakref.ref, torch.Tensor] | None = None  # (input, its basis)
        self._restores: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # MoE module -> (weight, original)
        self._index_matrices()

    def _index_matrices(self) -> None:
        """Key -> parameter name and key -> layout of every targeted matrix; MoE modules -> their keys."""
        self.matrix_names = {name: name + ".weight" for name in self.targets.linears} | {
            name: name for name in self.targets.moe
        }
        self._keys = {param: key for key, param in self.matrix_names.items()}
        layouts = model_layout(self.model, trainable_only=False)
        self.layouts: dict[str, ParamLayout] = {key: layouts[param] for key, param in self.matrix_names.items()}
        self._moe_modules: dict[str, list[str]] = {}
        for key in self.targets.moe:
            self._moe_modules.setdefault(key.rpartition(".")[0], []).append(key)

    @property
    def is_subspace(self) -> bool:
        return isinstance(self.config, AGZOConfig)

    def needs_subspaces(self) -> bool:
        """Whether a targeted matrix has not been through a capture forward yet (AGZO only)."""
        return self.is_subspace and any(key not in self.subspaces for key in self.matrix_names)

    def matrix_parameter(self, key: str) -> nn.Parameter:
        """The parameter of targeted matrix ``key`` as the model holds it now (FSDP2 swaps parameters, not modules)."""
        if key in self.targets.linears:
            return self.targets.linears[key].weight
        return self.model.get_parameter(key)

    def subspace_shape(self, key: str) -> tuple[int, ...]:
        """The shape of ``key``'s basis at full rank: ``(in, min(rank, in))``, ``(experts, in, min(rank, in))``."""
        layout = self.layouts[key]
        in_features = layout.matrix_shape[1]
        columns = (in_features, min(self.config.rank, in_features))
        return (layout.num_matrices, *columns) if layout.stacked else columns

    def parameter_seed(self, seed: int, name: str) -> int:
        """Seed of parameter ``name``'s noise within the perturbation drawn from ``seed``."""
        return derive_seed(seed, self._index[name])

    def include(self, params: Iterable[torch.Tensor], owner: str = "ZOPerturbation") -> None:
        """Perturb (and so let the update move) ``params`` too; they must be parameters of the model.

        The weight of an untied linear layer (``nn.Linear``, ``Conv1D``) or MoE tensor gets the method's
        perturbation, any other parameter isotropic noise, whatever ``other_params`` says: adding it asks
        for it to be trained.
        Seeds of the parameters already perturbed do not change.
        """
        self.targets = extend_targets(self.model, self.targets, params, owner)
        for name in (*self.targets.linears, *self.targets.moe, *self.targets.others):
            self._index.setdefault(name, len(self._index))
        self._index_matrices()

    # -- forward-time perturbation -------------------------------------------------------------

    @contextlib.contextmanager
    def perturbed(
        self,
        seed: int,
        scale: float,
        capture_seed: int | None = None,
        row_mask: torch.Tensor | None = None,
    ) -> Iterator[None]:
        """Run forwards at ``theta + scale * Z(seed)`` (``scale`` 0: at ``theta``).

        With ``capture_seed`` (AGZO), each targeted matrix first recomputes its subspace from the
        activations its layer receives, then applies its perturbation in that new subspace; a layer the
        forward does not call is left with an empty basis.
        """
        if capture_seed is not None and not self.is_subspace:
            raise ValueError("subspace capture needs an AGZOConfig")
        self._check_writable()
        if capture_seed is not None:
            self.subspaces = {key: self._empty_basis(key) for key in self.matrix_names}
        self._seed, self._scale, self._capture_seed, self._row_mask = seed, scale, capture_seed, row_mask
        reshard(self.model)  # under FSDP2: perturb and restore the shards, not a gathered root left by a forward
        handles = [module.register_forward_hook(self._make_hook(name)) for name, module in self.targets.linears.items()]
        for name, keys in self._moe_modules.items():
            module = self.model.get_submodule(name)
            handles.append(module.register_forward_pre_hook(self._make_moe_hook(name, keys), with_kwargs=True))
            handles.append(module.register_forward_hook(self._make_restore_hook(name), prepend=True))
        snapshots = []
        try:
            if scale:
                for name, param in self._others().items():
                    snapshots.append((local(param.detach()), local(param.detach()).clone()))
                    _add_noise_(param.detach(), self.parameter_seed(seed, name), scale)
            yield
        finally:
            for handle in handles:
                handle.remove()
            for shard, original in snapshots + [pair for pairs in self._restores.values() for pair in pairs]:
                shard.copy_(original)
            self._restores.clear()
            reshard(self.model)
            self._seed, self._scale, self._capture_seed, self._row_mask = None, 0.0, None, None
            self._last_capture = None

    def _empty_basis(self, key: str) -> torch.Tensor:
        """The basis of a matrix no forward has called: the span of no activations, ``(in, 0)`` (per expert)."""
        shape = self.subspace_shape(key)
        return torch.empty((*shape[:-1], 0), device=local(self.matrix_parameter(key)).device)

    def _check_writable(self) -> None:
        """Refuse, before any forward, a ``Conv1D`` weight that FSDP2 shards: its shard holds columns of the ``(out,
        in)`` matrix, which the seeded kernels (rows, flat runs) cannot address."""
        for key, layout in self.layouts.items():
            if layout.transposed and not layout.stacked and sharding(self.matrix_parameter(key)) is not None:
                raise ValueError(
                    f"ZOPerturbation: `{self.matrix_names[key]}` is a Conv1D weight sharded along its input dimension; "
                    "zeroth-order updates support sharded nn.Linear weights only: leave this layer unsharded"
                )

    def _make_hook(self, name: str):
        @torch.compiler.disable  # see the module docstring: exact seeded draws, no recompiles per seed
        def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
            inputs = args[0]
            if self._capture_seed is not None:
                self.subspaces[name] = self._capture(name, inputs)
            if not self._scale or not self._is_perturbed(name):
                return output
            return output + self._scale * self._output_perturbation(name, module, inputs).to(output.dtype)

        return hook

    def _make_moe_hook(self, name: str, keys: list[str]):
        """Forward pre-hook of a MoE router or experts module: capture its bases (AGZO), then perturb it in place."""

        @torch.compiler.disable  # as the linear hooks
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
            if self._capture_seed is not None:
                tensors = expert_tensor_names(module)
                if tensors is None:  # a router: the basis of the module's input
                    self.subspaces[keys[0]] = self._capture(keys[0], args[0] if args else kwargs["hidden_states"])
                else:
                    self._capture_experts(module, name, tensors, args, kwargs)
                    return
            for key in keys:
                self._perturb_in_place(name, key)

        return hook

    def _make_restore_hook(self, name: str):
        """Forward hook of a MoE module: put back the weights its pre-hook perturbed."""

        @torch.compiler.disable
        def hook(module: nn.Module, args: tuple, output):
            for weight, original in self._restores.pop(name, []):
                weight.copy_(original)

        return hook

    def _capture_experts(self, module: nn.Module, name: str, tensors: tuple[str, str], args: tuple, kwargs: dict):
        """Each expert's bases from the rows routed to it: the first tensor's from the module's input, the second's
        from the first's gated output with the first already perturbed (as a later linear layer sees its input)."""
        arguments = dict(zip(("hidden_states", "top_k_index"), args[:2], strict=False)) | kwargs
        first_key, second_key = (f"{name}.{tensor}" for tensor in tensors)
        first = self.layouts.get(first_key) or model_layout(module, trainable_only=False)[tensors[0]]
        rows, counts = routed_rows(
            arguments["hidden_states"].detach(),
            arguments["top_k_index"],
            first.num_matrices,
            self._row_mask,
            self.config.max_activation_rows,
        )
        if first_key in self.layouts:
            self.subspaces[first_key] = self._expert_subspaces(first_key, rows, counts)
            self._perturb_in_place(name, first_key)
        if second_key in self.layouts:
            inner = expert_inner_rows(module, first.matrices(getattr(module, tensors[0]).detach()), rows, counts)
            self.subspaces[second_key] = self._expert_subspaces(second_key, inner, counts)
            self._perturb_in_place(name, second_key)

    def _expert_subspaces(self, key: str, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Expert tensor ``key``'s bases, its range finders seeded as a linear layer's are."""
        config = self.config
        seed = derive_seed(self._capture_seed, self._index[key])
        return expert_subspaces(rows, counts, config.rank, config.power_iterations, seed, self.reduce_sum)

    def _perturb_in_place(self, name: str, key: str) -> None:
        """Add ``scale * Z`` to MoE tensor ``key`` as its module ``name`` holds it now (gathered, under FSDP2), and
        keep the original for the restore hook."""
        if not self._scale or not self._is_perturbed(key):
            return
        weight = self.model.get_parameter(key).detach()
        self._restores.setdefault(name, []).append((weight, weight.clone()))
        self._add_matrix_direction_(key, weight, self.parameter_seed(self._seed, key), self._scale)

    def _is_perturbed(self, name: str) -> bool:
        """False for an AGZO matrix without a basis, or with an empty one (not called in the capture forward)."""
        if not self.is_subspace:
            return True
        basis = self.subspaces.get(name)
        return basis is not None and basis.shape[-1] > 0

    def _capture(self, name: str, inputs: torch.Tensor) -> torch.Tensor:
        """The basis of ``inputs``, shared with the previous layer when it was fed the same tensor
        (``share_subspaces``, the default).

        Only the last input is remembered (the layers that share one are called one after another),
        by a weak reference, so no activation outlives its use.
        """
        shared = self.config.share_subspaces and self._last_capture is not None
        if shared and self._last_capture[0]() is inputs:
            return self._last_capture[1]
        basis = activation_subspace(
            inputs.detach(),
            self.config.rank,
            self.config.power_iterations,
            self.config.max_activation_rows,
            derive_seed(self._capture_seed, self._index[name]),
            self._row_mask,
            self.reduce_sum,
        )
        self._last_capture = (weakref.ref(inputs), basis)
        return basis

    def _output_perturbation(self, name: str, module: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
        """``inputs @ Z^T`` for the layer's current direction ``Z`` (of its ``(out, in)`` matrix, a Conv1D's too)."""
        seed = self.parameter_seed(self._seed, name)
        shape = self.layouts[name].matrix_shape
        device = module.weight.device
        if self.is_subspace:
            basis = self.subspaces[name]
            noise = seeded_normal((shape[0], basis.shape[1]), seed, device)
            projected = inputs.to(torch.float32) @ basis.to(inputs.device)
            return (projected @ noise.T) / math.sqrt(basis.shape[1])
        noise = seeded_normal(shape, seed, device)
        return inputs.to(torch.float32) @ noise.T

    # -- writing parameters ------------------------------------------------------------------

    @torch.no_grad()
    def add_direction_(
        self,
        seed: int,
        coefficient: float,
        out: dict[str, torch.Tensor] | None = None,
        names: Collection[str] | None = None,
    ) -> None:
        """``theta += coefficient * Z(seed)`` for every perturbed parameter (those in ``names`` if given).

        With ``out`` (name -> tensor shaped like the parameter), the direction is added to those
        tensors instead, e.g. to materialise a gradient estimate.
        """
        for name in self.parameter_names() if names is None else names:
            key = self._keys.get(name)
            if key is None:
                target = self.model.get_parameter(name).detach() if out is None else out[name]
                _add_noise_(target, self.parameter_seed(seed, name), coefficient)
            elif self._is_perturbed(key):
                target = self.matrix_parameter(key).detach() if out is None else out[name]
                self._add_matrix_direction_(key, target, self.parameter_seed(seed, key), coefficient)

    def moves(self, name: str) -> bool:
        """Whether the update can move parameter ``name`` (False: an AGZO matrix with an empty basis)."""
        key = self._keys.get(name)
        return key is None or self._is_perturbed(key)

    def _add_matrix_direction_(self, key: str, target: torch.Tensor, seed: int, coefficient: float) -> None:
        """``target += coefficient * Z(seed)`` for targeted matrix ``key``; ``target`` is stored as its parameter."""
        layout = self.layouts[key]
        if layout.stacked and self.is_subspace:
            self._add_expert_directions_(key, target, seed, coefficient)
        elif layout.transposed and not layout.stacked:
            # Conv1D: through a row-major copy of its (out, in) matrix, the kernels draw its nn.Linear twin's noise.
            matrix = layout.matrices(target)[0]
            row_major = matrix.contiguous()
            self._add_row_major_direction_(key, row_major, seed, coefficient)
            matrix.copy_(row_major)
        else:
            self._add_row_major_direction_(key, target, seed, coefficient)

    def _add_row_major_direction_(self, key: str, target: torch.Tensor, seed: int, coefficient: float) -> None:
        """The ``(out, in)`` matrix (or its FSDP2 block of rows) through the seeded kernels, as for every nn.Linear."""
        if not self.is_subspace:
            _add_noise_(target, seed, coefficient)
            return
        basis = self.subspaces[key]
        shard, first = local(target), flat_shard(target)[1] // max(target.shape[1], 1)
        lowrank_perturb_(shard, basis, seed, coefficient / math.sqrt(basis.shape[1]), first, target.shape[0])

    def _add_expert_directions_(self, key: str, target: torch.Tensor, seed: int, coefficient: float) -> None:
        """Each expert's matrix ``+= coefficient * N_e U_e^T / sqrt(r)``, batched over the experts (a shard's own)."""
        layout, basis = self.layouts[key], self.subspaces[key]
        noise = seeded_normal((layout.num_matrices, layout.matrix_shape[0], basis.shape[-1]), seed, basis.device)
        shard, first = local(target), flat_shard(target)[1] // math.prod(target.shape[1:])
        experts = slice(first, first + shard.shape[0])
        update = noise[experts] @ basis[experts].to(torch.float32).mT
        matrices = layout.matrices(shard)
        scale = coefficient / math.sqrt(basis.shape[-1])
        if shard.dtype == torch.float32:
            matrices.add_(update, alpha=scale)
        else:
            matrices.copy_(matrices.float().add_(update, alpha=scale))

    def _others(self) -> dict[str, nn.Parameter]:
        """The other perturbed parameters as the model holds them now: accelerate shards the model with FSDP2 after
        the optimizer is built, which replaces each parameter by a new ``DTensor`` one (modules stay)."""
        return {name: self.model.get_parameter(name) for name in self.targets.others}

    def named_parameters(self) -> dict[str, nn.Parameter]:
        """Every perturbed parameter by name (as in the model's ``named_parameters``): targeted matrices first."""
        return {param: self.matrix_parameter(key) for key, param in self.matrix_names.items()} | self._others()

    def parameter_names(self) -> list[str]:
        """Names (as in ``named_parameters``) of every perturbed parameter."""
        return list(self.named_parameters())


def _add_noise_(tensor: torch.Tensor, seed: int, scale: float) -> None:
    """``tensor += scale * z(seed)`` on this rank's shard (the whole tensor unless it is FSDP2-sharded), with the
    entries of the whole tensor's ``z`` at the shard's indices."""
    seeded_perturb_(local(tensor), seed, scale, flat_shard(tensor)[1], tensor.numel())
