"""Gossip topologies: doubly stochastic mixing matrices ``W``, their validation and spectral gap.

Worker ``i`` averages ``x_i <- sum_j W_ij x_j``. ``W`` must be doubly stochastic (non-negative,
rows and columns summing to 1) so the average over workers is preserved, and its graph
(an edge ``j -> i`` where ``W_ij > 0``) strongly connected so the workers reach consensus. How
fast they do is set by the spectral gap ``1 - ||W - J||_2`` (``J = 11^T / n``): consensus distance
shrinks by at least ``(1 - gap)^2`` per round.

- ``ring``: ``1/3`` to self and each of the two neighbours (``n = 2``: the one neighbour gets ``2/3``);
- ``torus``: an ``r x c`` grid with wrap-around (``r <= c``, ``r`` the largest divisor of ``n`` up to
  ``sqrt(n)``, both at least 2), ``1/5`` to self and each of the four neighbours;
- ``exponential``: worker ``i`` hears from ``i - 2^k`` for ``2^k < n``, equal weights (directed, circulant);
- ``one_peer_exponential``: time-varying, round ``t`` mixes half-half with the single peer
  ``i - 2^(t mod tau)``, ``tau = ceil(log2 n)``; for ``n`` a power of 2 one period averages exactly;
- ``complete``: ``J`` itself, exact averaging (what an all-reduce computes);
- a user-supplied ``n x n`` matrix (nested lists or a tensor), checked as above.

With one worker every named topology is ``[[1]]``: gossip does nothing.
"""

import math
from collections.abc import Sequence

import torch

TOPOLOGIES = ("ring", "torus", "exponential", "one_peer_exponential", "complete")
TOLERANCE = 1e-6


def _circulant(n: int, shifts: Sequence[int], weights: Sequence[float]) -> torch.Tensor:
    """``W_ij = sum of the weights of the shifts s with j = i - s (mod n)``."""
    matrix = torch.zeros(n, n, dtype=torch.float64)
    rows = torch.arange(n)
    for shift, weight in zip(shifts, weights, strict=True):
        matrix[rows, (rows - shift) % n] += weight
    return matrix


def torus_shape(n: int) -> tuple[int, int]:
    """``(rows, columns)`` of the most square ``n``-worker torus; ``ValueError`` if there is none."""
    rows = max((r for r in range(2, math.isqrt(n) + 1) if n % r == 0), default=None)
    if rows is None:
        raise ValueError(
            f"Topology: `topology='torus'` needs a world size r x c with r, c >= 2 (4, 6, 8, 9, ...), got {n} "
            "processes; use 'ring' or 'exponential'"
        )
    return rows, n // rows


def _torus(n: int) -> torch.Tensor:
    rows, cols = torus_shape(n)
    matrix = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        r, c = divmod(i, cols)
        for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
            matrix[i, ((r + dr) % rows) * cols + (c + dc) % cols] += 0.2
    return matrix


def _named(topology: str, n: int, step: int) -> torch.Tensor:
    if n == 1:
        return torch.ones(1, 1, dtype=torch.float64)
    if topology == "ring":
        return _circulant(n, (0, 1, -1), (1 / 3,) * 3)
    if topology == "torus":
        return _torus(n)
    if topology == "complete":
        return torch.full((n, n), 1 / n, dtype=torch.float64)
    if topology == "exponential":
        shifts = [0] + [2**k for k in range(n.bit_length()) if 2**k < n]
        return _circulant(n, shifts, [1 / len(shifts)] * len(shifts))
    period = math.ceil(math.log2(n))
    return _circulant(n, (0, 2 ** (step % period)), (0.5, 0.5))


def strongly_connected(matrix: torch.Tensor) -> bool:
    """Whether every worker reaches every other along edges ``j -> i`` with ``W_ij > 0``."""
    edges = matrix > 0
    for adjacency in (edges, edges.T):
        seen = torch.zeros(len(matrix), dtype=torch.bool)
        seen[0] = True
        while True:
            grown = seen | adjacency[:, seen].any(dim=1)
            if torch.equal(grown, seen):
                break
            seen = grown
        if not seen.all():
            return False
    return True


def check_mixing_matrix(matrix, world_size: int) -> torch.Tensor:
    """``matrix`` as a float64 tensor if it is an ``n x n`` doubly stochastic, strongly connected matrix with
    a positive spectral gap for ``n = world_size``; otherwise ``ValueError`` saying which condition fails."""
    try:
        matrix = torch.as_tensor(matrix, dtype=torch.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"Topology: a mixing matrix must be an n x n array of numbers ({error})") from None
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"Topology: a mixing matrix must be square, got shape {tuple(matrix.shape)}")
    if len(matrix) != world_size:
        raise ValueError(
            f"Topology: the {len(matrix)} x {len(matrix)} mixing matrix needs {len(matrix)} processes, "
            f"but {world_size} exist"
        )
    if not torch.isfinite(matrix).all():
        raise ValueError("Topology: the mixing matrix must be finite, got NaN or inf entries")
    if (matrix < 0).any():
        raise ValueError("Topology: the mixing matrix must be non-negative")
    for axis, name in ((1, "row"), (0, "column")):
        sums = matrix.sum(dim=axis)
        worst = int((sums - 1).abs().argmax())
        if abs(float(sums[worst]) - 1) > TOLERANCE:
            raise ValueError(
                f"Topology: the mixing matrix must be doubly stochastic; {name} {worst} sums to "
                f"{float(sums[worst]):.6g}"
            )
    if not strongly_connected(matrix):
        raise ValueError("Topology: the mixing matrix's graph is not connected; the workers would never agree")
    if spectral_gap(matrix) <= TOLERANCE:
        raise ValueError(
            "Topology: the mixing matrix has spectral gap 0 (periodic, e.g. a pure permutation): gossip would not "
            "converge; add weight on the diagonal"
        )
    return matrix


def spectral_gap(matrix: torch.Tensor) -> float:
    """``1 - ||W - J||_2``: ``1 - max(|lambda_2|, |lambda_n|)`` for a symmetric ``W``, 1 for exact averaging."""
    matrix = torch.as_tensor(matrix, dtype=torch.float64)
    n = len(matrix)
    return 1.0 - float(torch.linalg.matrix_norm(matrix - 1.0 / n, ord=2))


class Topology:
    """The mixing matrix of each gossip round for ``world_size`` workers, validated at construction.

    Args:
        topology: one of :data:`TOPOLOGIES` or an ``n x n`` doubly stochastic matrix.
        world_size: the number of workers (processes).
    """

    def __init__(self, topology: str | Sequence[Sequence[float]] | torch.Tensor, world_size: int):
        if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
            raise ValueError(f"Topology: `world_size` must be a positive integer, got {world_size!r}")
        self.world_size = world_size
        if isinstance(topology, str):
            if topology not in TOPOLOGIES:
                raise ValueError(
                    f"Topology: `topology` must be one of {list(TOPOLOGIES)} or a matrix, got {topology!r}"
                )
            self.name = topology
            self.period = math.ceil(math.log2(world_size)) if topology == "one_peer_exponential" else 1
            self.period = max(1, self.period)
            self._matrices = [_named(topology, world_size, step) for step in range(self.period)]
        else:
            self.name = "custom"
            self.period = 1
            self._matrices = [check_mixing_matrix(topology, world_size)]

    def matrix(self, step: int = 0) -> torch.Tensor:
        """``W`` of gossip round ``step`` (float64, ``n x n``)."""
        return self._matrices[step % self.period]

    def spectral_gap(self) -> float:
        """Per-round gap over one period: ``1 - ||W_{tau-1} ... W_0 - J||_2^(1/tau)``; ``spectral_gap(W)`` if static."""
        product = torch.eye(self.world_size, dtype=torch.float64)
        for matrix in self._matrices:
            product = matrix @ product
        return 1.0 - (1.0 - spectral_gap(product)) ** (1.0 / self.period)

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, world_size={self.world_size}, spectral_gap={self.spectral_gap():.4f})"
