"""What a chain ends in before decoding, and where along it the training signal is.

The decoder turns any MIS state into an independent set, so decoded sizes cannot tell a chain that learned to
end conflict-free from one the decoder repairs; these numbers can (docs/results/cam.md, *Why MIS did not learn*).
"""

import torch

from .adjoint import flip_benefit
from .graphs import GraphBatch
from .problems import energy, per_graph
from .sampler import Trajectory


def conflicting_edges(batch: GraphBatch, x: torch.Tensor) -> torch.Tensor:
    """Edges with both ends set, per chain and graph, ``(K, G)``."""
    inside = x[:, batch.edges[:, 0]] * x[:, batch.edges[:, 1]]
    out = inside.new_zeros(x.shape[0], batch.num_graphs)
    return out.index_add_(1, batch.graph_of[batch.edges[:, 0]], inside)


def chain_diagnostics(problem: str, batch: GraphBatch, trajectory: Trajectory, beta: float) -> dict:
    """Per-node means over the chains of one rollout: ``energy_per_node`` of ``x_T``; for MIS also
    ``set_per_node`` and ``conflicts_per_node`` of ``x_T``, ``conflict_free`` (the fraction of chains and graphs
    whose ``x_T`` is an independent set) and ``expected_conflicts_per_node`` of the rounded expected terminal state
    the decoder is given; per step k, ``flip_rate`` (mean ``p_k``) and ``adjoint_signal`` (mean ``|benefit_k|``, the
    expected-energy change of a flip that CAM's targets are tilted by: zero means step k gets no signal)."""
    n = max(batch.num_nodes, 1)
    terminal = trajectory.states[-1]
    out = {"energy_per_node": energy(problem, batch, terminal, beta).sum(1).mean().item() / n}
    if problem == "mis":
        conflicts = conflicting_edges(batch, terminal)
        rounded = (trajectory.expected_terminal() > 0.5).float()
        out |= {
            "set_per_node": per_graph(batch, terminal).sum(1).mean().item() / n,
            "conflicts_per_node": conflicts.sum(1).mean().item() / n,
            "conflict_free": (conflicts == 0).float().mean().item(),
            "expected_conflicts_per_node": conflicting_edges(batch, rounded).sum(1).mean().item() / n,
        }
    benefit = flip_benefit(problem, batch, trajectory, beta)
    out["flip_rate"] = trajectory.probs.mean((1, 2)).tolist()
    out["adjoint_signal"] = benefit.abs().mean((1, 2)).tolist()
    return out
