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

from .._sharded import flat_shard, local, reshard
from .config import AGZOConfig, ZOConfig
from .subspace import Reduce, activation_subspace
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

    ``subspaces`` maps each targeted linear's name to its current basis ``U`` (AGZO only); it is
    what a checkpoint must keep for an exact resume.
    """

    def __init__(self, model: nn.Module, config: ZOConfig, reduce_sum: Reduce | None = None):
        self.model = model
        self.config = config
        self.targets = resolve_targets(model, config)
        self.reduce_sum = reduce_sum
        self.subspaces: dict[str, torch.Tensor] = {}
        self._index = {name: i for i, name in enumerate([*self.targets.linears, *self.targets.others])}
        self._seed: int | None = None
        self._scale = 0.0
        self._capture_seed: int | None = None
        self._row_mask: torch.Tensor | None = None
        self._last_capture: tuple[weakref.ref, torch.Tensor] | None = None  # (input, its basis)

    @property
    def is_subspace(self) -> bool:
        return isinstance(self.config, AGZOConfig)

    def needs_subspaces(self) -> bool:
        """Whether a targeted layer has not been through a capture forward yet (AGZO only)."""
        return self.is_subspace and any(name not in self.subspaces for name in self.targets.linears)

    def parameter_seed(self, seed: int, name: str) -> int:
        """Seed of parameter ``name``'s noise within the perturbation drawn from ``seed``."""
        return derive_seed(seed, self._index[name])

    def include(self, params: Iterable[torch.Tensor], owner: str = "ZOPerturbation") -> None:
        """Perturb (and so let the update move) ``params`` too; they must be parameters of the model.

        The weight of an untied ``nn.Linear`` gets the method's perturbation, any other parameter
        isotropic noise, whatever ``other_params`` says: adding it asks for it to be trained.
        Seeds of the parameters already perturbed do not change.
        """
        self.targets = extend_targets(self.model, self.targets, params, owner)
        for name in (*self.targets.linears, *self.targets.others):
            self._index.setdefault(name, len(self._index))

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

        With ``capture_seed`` (AGZO), each targeted layer first recomputes its subspace from the
        activations it receives, then applies its perturbation in that new subspace; a layer the
        forward does not call is left with an empty basis.
        """
        if capture_seed is not None and not self.is_subspace:
            raise ValueError("subspace capture needs an AGZOConfig")
        if capture_seed is not None:
            self.subspaces = {
                name: torch.empty((module.weight.shape[1], 0), device=local(module.weight).device)
                for name, module in self.targets.linears.items()
            }
        self._seed, self._scale, self._capture_seed, self._row_mask = seed, scale, capture_seed, row_mask
        reshard(self.model)  # under FSDP2: perturb and restore the shards, not a gathered root left by a forward
        handles = [module.register_forward_hook(self._make_hook(name)) for name, module in self.targets.linears.items()]
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
            for shard, original in snapshots:
                shard.copy_(original)
            reshard(self.model)
            self._seed, self._scale, self._capture_seed, self._row_mask = None, 0.0, None, None
            self._last_capture = None

    def _make_hook(self, name: str):
        @torch.compiler.disable  # see the module docstring: exact seeded draws, no recompiles per seed
        def hook(module: nn.Linear, args: tuple, output: torch.Tensor) -> torch.Tensor:
            inputs = args[0]
            if self._capture_seed is not None:
                self.subspaces[name] = self._capture(name, inputs)
            if not self._scale or not self._is_perturbed(name):
                return output
            return output + self._scale * self._output_perturbation(name, module, inputs).to(output.dtype)

        return hook

    def _is_perturbed(self, name: str) -> bool:
        """False for an AGZO layer without a basis, or with an empty one (not called in the capture forward)."""
        if not self.is_subspace:
            return True
        basis = self.subspaces.get(name)
        return basis is not None and basis.shape[1] > 0

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

    def _output_perturbation(self, name: str, module: nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
        """``inputs @ Z^T`` for the layer's current direction ``Z``."""
        seed = self.parameter_seed(self._seed, name)
        weight = module.weight
        if self.is_subspace:
            basis = self.subspaces[name]
            noise = seeded_normal((weight.shape[0], basis.shape[1]), seed, weight.device)
            projected = inputs.to(torch.float32) @ basis.to(inputs.device)
            return (projected @ noise.T) / math.sqrt(basis.shape[1])
        noise = seeded_normal(tuple(weight.shape), seed, weight.device)
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
        for name, module in self.targets.linears.items():
            if (names is not None and name + ".weight" not in names) or not self._is_perturbed(name):
                continue
            target = module.weight.detach() if out is None else out[name + ".weight"]
            seed_p = self.parameter_seed(seed, name)
            if self.is_subspace:
                basis = self.subspaces[name]
                shard, first = local(target), flat_shard(target)[1] // max(target.shape[1], 1)
                lowrank_perturb_(shard, basis, seed_p, coefficient / math.sqrt(basis.shape[1]), first, target.shape[0])
            else:
                _add_noise_(target, seed_p, coefficient)
        for name, param in self._others().items():
            if names is not None and name not in names:
                continue
            _add_noise_(param.detach() if out is None else out[name], self.parameter_seed(seed, name), coefficient)

    def _others(self) -> dict[str, nn.Parameter]:
        """The other perturbed parameters as the model holds them now: accelerate shards the model with FSDP2 after
        the optimizer is built, which replaces each parameter by a new ``DTensor`` one (modules stay)."""
        return {name: self.model.get_parameter(name) for name in self.targets.others}

    def named_parameters(self) -> dict[str, nn.Parameter]:
        """Every perturbed parameter by name (as in the model's ``named_parameters``), linear weights first."""
        return {name + ".weight": module.weight for name, module in self.targets.linears.items()} | self._others()

    def parameter_names(self) -> list[str]:
        """Names (as in ``named_parameters``) of every perturbed parameter."""
        return list(self.named_parameters())


def _add_noise_(tensor: torch.Tensor, seed: int, scale: float) -> None:
    """``tensor += scale * z(seed)`` on this rank's shard (the whole tensor unless it is FSDP2-sharded), with the
    entries of the whole tensor's ``z`` at the shard's indices."""
    seeded_perturb_(local(tensor), seed, scale, flat_shard(tensor)[1], tensor.numel())
