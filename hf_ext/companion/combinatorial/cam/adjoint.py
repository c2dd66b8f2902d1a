"""The discrete adjoint: the signal of the terminal energy carried backward along a generated trajectory."""

import torch

from .problems import flip_delta
from .sampler import Trajectory


def adjoint_targets(problem: str, batch, trajectory: Trajectory, beta: float) -> torch.Tensor:
    """The discrete adjoint at every visited state, ``(T + 1, K, N)``, carried backward through the chain.

    ``a_T[i] = E(x_T, x_i = 1) - E(x_T, x_i = 0)``, the gradient of the (multilinear) energy at the terminal state.
    One step takes ``x_k`` to ``x_{k+1}`` with independent flips, so ``E[x_{k+1} | x_k] = x_k + (1 - 2 x_k) p_k``
    and, with the rates ``p_k`` held fixed, ``a_k = (1 - 2 p_k) a_{k+1}``: a change now survives the later flips
    with odds ``1 - 2p`` per step. ``E[a_k | x_k]`` is then exactly ``V_k(x, x_i = 1) - V_k(x, x_i = 0)`` with
    ``V_k(x) = E[E(x_T) | x_k = x]`` when the rates do not depend on the state (tested by enumeration); the
    network's own dependence on the state is dropped, as in adjoint matching's lean adjoint.
    """
    terminal = trajectory.states[-1]
    carried = [(1 - 2 * terminal) * flip_delta(problem, batch, terminal, beta)]
    for p in trajectory.probs.flip(0):
        carried.append((1 - 2 * p) * carried[-1])
    return torch.stack(carried[::-1])


def flip_benefit(problem: str, batch, trajectory: Trajectory, beta: float) -> torch.Tensor:
    """How much flipping each node at each step lowers the expected terminal energy, ``(T, K, N)``: flipping node i
    at step k changes it by ``(1 - 2 x_k[i]) a_{k+1}[i]`` (:func:`adjoint_targets`), the benefit is its negative."""
    return -(1 - 2 * trajectory.states[:-1]) * adjoint_targets(problem, batch, trajectory, beta)[1:]
