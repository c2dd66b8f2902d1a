"""Decentralized SGD: each worker keeps its own model, steps locally and averages with its graph neighbours.

With ``W`` the topology's doubly stochastic mixing matrix (:mod:`hf_ext.optim.decentralized.topology`):

- ``order="atc"`` (adapt-then-combine, default): ``x_i <- sum_j W_ij (x_j - lr g_j)``: the base step,
  then one gossip round;
- ``order="cta"`` (combine-then-adapt): ``x_i <- sum_j W_ij x_j - lr g_i(x_i)``: one gossip round,
  then the base step with the gradient taken before it.

No all-reduce: a round sends the parameters, flattened into a few buckets, to the neighbours only
(:class:`~hf_ext.optim.decentralized.gossip.GossipCommunicator`). The base optimizer's state (momentum, Adam's
moments) stays local. With one process, or ``topology="complete"``, it is the base optimizer on the
exact average (``complete`` costs ``n - 1`` messages per bucket, an all-reduce fewer bytes).
"""

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from ..._validation import check_finite_number
from ..shared.first_step import begin_step
from ..shared.wrapper import OptimizerWrapper
from .gossip import GossipCommunicator
from .topology import Topology

ORDERS = ("atc", "cta")


def _buckets(params: list[nn.Parameter], cap_bytes: float) -> list[list[nn.Parameter]]:
    """Parameters grouped by device and dtype, in order, each group cut into runs of at most ``cap_bytes``."""
    by_kind: dict[tuple, list[list[nn.Parameter]]] = {}
    for p in params:
        runs = by_kind.setdefault((p.device, p.dtype), [[]])
        if runs[-1] and sum(q.numel() * q.element_size() for q in runs[-1]) + p.numel() * p.element_size() > cap_bytes:
            runs.append([])
        runs[-1].append(p)
    return [run for runs in by_kind.values() for run in runs]


class DecentralizedSGD(OptimizerWrapper):
    """Wraps ``base_optimizer``: its local step, then (or before it) gossip averaging with neighbours.

    Args:
        base_optimizer: any ``torch.optim.Optimizer`` (SGD for DSGD proper, or AdamW, Muon, ...).
        topology: ``"ring"``, ``"torus"``, ``"exponential"``, ``"one_peer_exponential"``, ``"complete"``,
            an ``n x n`` doubly stochastic matrix, or a :class:`Topology`.
        order: ``"atc"`` (adapt-then-combine) or ``"cta"`` (combine-then-adapt).
        bucket_cap_mb: parameters are flattened into buckets of at most this many MiB (one message each).
        group: the ``torch.distributed`` process group (default: the world; none initialised: one worker).

    At construction every worker takes rank 0's parameters (as DDP does), so all start from one point.
    ``param_groups`` and ``state`` are the base's; ``state_dict()`` adds the gossip round counter, which
    a time-varying topology needs to resume in phase. ``add_param_group`` is collective (every worker calls it):
    the new parameters start from rank 0's values and are gossiped from then on.
    """

    def __init__(
        self,
        base_optimizer: torch.optim.Optimizer,
        topology: str | list | torch.Tensor | Topology = "ring",
        order: str = "atc",
        bucket_cap_mb: float = 25.0,
        group=None,
    ):
        super().__init__(base_optimizer)
        if any(isinstance(p, DTensor) for group in self.param_groups for p in group["params"]):
            raise ValueError(
                "DecentralizedSGD: the parameters are DTensor shards (FSDP2); decentralized SGD keeps a whole model "
                "on every process and gossips it instead of an all-reduce, so shard nothing and use no DDP "
                "(DecentralizedTrainer keeps the model out of both)"
            )
        if order not in ORDERS:
            raise ValueError(f"DecentralizedSGD: `order` must be one of {list(ORDERS)}, got {order!r}")
        check_finite_number("DecentralizedSGD", "bucket_cap_mb", bucket_cap_mb)
        if not bucket_cap_mb > 0:
            raise ValueError(f"DecentralizedSGD: `bucket_cap_mb` must be > 0, got {bucket_cap_mb}")
        self.communicator = GossipCommunicator(group)
        if not isinstance(topology, Topology):
            topology = Topology(topology, self.communicator.world_size)
        elif topology.world_size != self.communicator.world_size:
            raise ValueError(
                f"DecentralizedSGD: the topology is for {topology.world_size} workers, "
                f"but {self.communicator.world_size} processes exist"
            )
        self.topology = topology
        self.order = order
        self.rounds = 0
        self.bucket_cap_bytes = bucket_cap_mb * 2**20
        self.buckets = _buckets(self._params(), self.bucket_cap_bytes)
        self._take_rank_zeros(self.buckets)

    def _params(self) -> list[nn.Parameter]:
        return [p for group in self.param_groups for p in group["params"]]

    def _take_rank_zeros(self, buckets: list[list[nn.Parameter]]) -> None:
        flats = self._flatten(buckets)
        self.communicator.broadcast_(flats)
        self._unflatten(flats, buckets)

    def add_param_group(self, param_group: dict) -> None:
        """The base's, then its parameters join the gossip, starting from rank 0's values (collective)."""
        super().add_param_group(param_group)
        self.buckets = _buckets(self._params(), self.bucket_cap_bytes)
        self._take_rank_zeros(_buckets(self.param_groups[-1]["params"], self.bucket_cap_bytes))

    def wrapper_state_dict(self) -> dict:
        return {"gossip_rounds": self.rounds}

    def load_wrapper_state_dict(self, state_dict: dict) -> None:
        self.rounds = int(state_dict.get("gossip_rounds", 0))

    def _flatten(self, buckets: list[list[nn.Parameter]] | None = None) -> list[torch.Tensor]:
        return [torch.cat([p.detach().reshape(-1) for p in bucket]) for bucket in buckets or self.buckets]

    def _unflatten(self, flats: list[torch.Tensor], buckets: list[list[nn.Parameter]] | None = None) -> None:
        for bucket, flat in zip(buckets or self.buckets, flats, strict=True):
            for p, part in zip(bucket, flat.split([p.numel() for p in bucket]), strict=True):
                p.detach().copy_(part.view_as(p))

    @torch.no_grad()
    def gossip(self) -> None:
        """One round ``x_i <- sum_j W_ij x_j`` with this round's matrix."""
        flats = self._flatten()
        self.communicator.mix_(flats, self.topology.matrix(self.rounds))
        self._unflatten(flats)
        self.rounds += 1

    @torch.no_grad()
    def step(self, closure=None):
        with torch.enable_grad():
            loss = begin_step(self, closure)
        if self.order == "cta":
            self.gossip()
        self.base_optimizer.step()
        if self.order == "atc":
            self.gossip()
        return loss

    @torch.no_grad()
    def consensus_distance(self) -> float:
        """``(1/n) sum_i ||x_i - x_bar||^2`` over all parameters (collective: every worker calls it)."""
        flats = self._flatten()
        means = [flat.clone() for flat in flats]
        self.communicator.average_(means)
        local = sum(float((flat - mean).double().square().sum()) for flat, mean in zip(flats, means, strict=True))
        return self.communicator.sum(local) / self.communicator.world_size

    @torch.no_grad()
    def average_(self) -> None:
        """Set every worker's parameters to the exact average ``x_bar`` (collective)."""
        flats = self._flatten()
        self.communicator.average_(flats)
        self._unflatten(flats)

    @contextmanager
    def averaged_parameters(self) -> Iterator[None]:
        """Inside the block the model holds ``x_bar`` (to evaluate or save it); each worker's own after (collective)."""
        own = self._flatten()
        self.average_()
        try:
            yield
        finally:
            self._unflatten(own)

    def __repr__(self) -> str:
        return f"DecentralizedSGD({self.topology!r}, order={self.order!r}, base={self.base_optimizer!r})"


class DecentralizedSGDFactory:
    """Builds the optimizer for ``Trainer(optimizer_cls_and_kwargs=(DecentralizedSGDFactory, kwargs))``.

    transformers instantiates a non-``Optimizer`` class there with no arguments and calls it with the model
    and ``kwargs``: ``base`` (the base optimizer class, default ``torch.optim.SGD``), ``base_kwargs`` (its
    arguments) and any :class:`DecentralizedSGD` argument.
    """

    def __call__(self, model: nn.Module, base=torch.optim.SGD, base_kwargs: dict | None = None, **decentralized):
        trainable = [p for p in model.parameters() if p.requires_grad]
        return DecentralizedSGD(base(trainable, **(base_kwargs or {})), **decentralized)


def find_decentralized(optimizer) -> DecentralizedSGD | None:
    """The :class:`DecentralizedSGD` inside ``optimizer`` (accelerate wraps it as ``.optimizer``), or ``None``."""
    while optimizer is not None and not isinstance(optimizer, DecentralizedSGD):
        optimizer = getattr(optimizer, "optimizer", None)
    return optimizer
