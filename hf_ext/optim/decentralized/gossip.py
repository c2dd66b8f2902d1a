"""One gossip round ``x_i <- sum_j W_ij x_j`` over ``torch.distributed`` point-to-point messages.

Each worker sends its buffers to the workers that listen to it (``W_ki > 0``) and receives those
it listens to (``W_ij > 0``), all in one ``batch_isend_irecv``, then combines locally: no
all-reduce, no parameter server. Works on gloo (CPU) and NCCL (GPU) alike. Our own rather than
Bluefog's or Decent-DP's: those bring their own launchers and communicators, this one runs in
whatever process group ``torchrun``/``accelerate launch`` set up.
"""

import torch
import torch.distributed as dist


class GossipCommunicator:
    """Mixes flat buffers with neighbours by a mixing matrix; counts the bytes this worker sends.

    Args:
        group: the process group (default: the world); without an initialised process group the
            communicator is a single worker and every round leaves the buffers unchanged.
    """

    def __init__(self, group: dist.ProcessGroup | None = None):
        self.distributed = dist.is_available() and dist.is_initialized()
        self.group = group
        self.rank = dist.get_rank(group) if self.distributed else 0
        self.world_size = dist.get_world_size(group) if self.distributed else 1
        nccl = self.distributed and dist.get_backend(group) == "nccl"
        self.device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
        self.bytes_sent = 0

    def _global(self, rank: int) -> int:
        return dist.get_global_rank(self.group, rank) if self.group is not None else rank

    def mix_(self, buffers: list[torch.Tensor], matrix: torch.Tensor) -> None:
        """Replace each of this worker's ``buffers`` by ``sum_j W_ij buffers_j`` (row ``i`` = this rank)."""
        if self.world_size == 1:
            return
        i = self.rank
        sources = [j for j in range(self.world_size) if j != i and matrix[i, j] > 0]
        targets = [k for k in range(self.world_size) if k != i and matrix[k, i] > 0]
        received = {j: [torch.empty_like(b) for b in buffers] for j in sources}
        ops = []
        for tag, buffer in enumerate(buffers):
            ops += [dist.P2POp(dist.isend, buffer, self._global(k), self.group, tag) for k in targets]
            ops += [dist.P2POp(dist.irecv, received[j][tag], self._global(j), self.group, tag) for j in sources]
        if ops:
            for request in dist.batch_isend_irecv(ops):
                request.wait()
        self.bytes_sent += len(targets) * sum(b.numel() * b.element_size() for b in buffers)
        for tag, buffer in enumerate(buffers):
            buffer.mul_(float(matrix[i, i]))
            for j in sources:
                buffer.add_(received[j][tag], alpha=float(matrix[i, j]))

    def average_(self, buffers: list[torch.Tensor]) -> None:
        """Replace each buffer by its exact mean over workers (an all-reduce; for metrics and saving)."""
        if self.world_size == 1:
            return
        for buffer in buffers:
            dist.all_reduce(buffer, group=self.group)
            buffer.div_(self.world_size)

    def broadcast_(self, buffers: list[torch.Tensor]) -> None:
        """Overwrite each buffer with rank 0's."""
        if self.world_size == 1:
            return
        for buffer in buffers:
            dist.broadcast(buffer, self._global(0), group=self.group)

    def sum(self, value: float) -> float:
        """The sum of a number over workers."""
        if self.world_size == 1:
            return value
        total = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(total, group=self.group)
        return float(total)
