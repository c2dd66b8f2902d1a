"""K-sparse TCO: TCO's trade-off of predicted gain against transaction cost, holding at most K assets.

Each period, from the drifted portfolio ``b~`` and TCO's centred relative prediction ``v`` (see ``tco.py``):

    minimise  F(b) = 1/2 ||b - b~||^2 - eta <v, b> + lambda ||b - b~||_1   over the simplex, with ||b||_0 <= K.

(TCO's own rule is F's minimiser without the cardinality constraint, approximated by a soft threshold followed
by a projection.) On the simplex ``||b||_0 <= K`` iff ``1 - topK(b) = 0`` (``simplex.py``), and for ``rho`` large
enough the constrained problem equals the DC problem ``F(b) + rho (1 - topK(b))``. PSGA linearises the concave
``-rho topK(b)`` at ``b^k`` (subgradient: the indicator ``g^k`` of the K largest entries) and takes a proximal
step of size ``alpha``:

    b^{k+1} = argmin_simplex F(b) - rho <g^k, b> + 1/(2 alpha) ||b - b^k||^2
            = argmin_simplex beta/2 ||b - c||^2 + lambda ||b - b~||_1,
      beta = 1 + 1/alpha,  c = (b~ + eta v + rho g^k + b^k / alpha) / beta,

a proximity operator of the transaction-cost term plus the simplex, computed by ADMM (``prox_cost_simplex``).
PSGA starts from the convex problem's minimiser (``rho = 0``, the exact TCO step) and stops when no weight moves
by more than ``psga_tol``; a portfolio the penalty left with more than K assets is then projected onto the
K-sparse simplex (``project_k_sparse``), and ``penalty_sparse`` counts the periods that needed no projection.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from .simplex import project_k_sparse, project_simplex, top_k_indicator
from .tco import TCOConfig, predict

NONZERO = 1e-9


@dataclass
class SparseTCOConfig(TCOConfig):
    """TCO's settings plus the cardinality ``k``, the DC penalty and the PSGA/ADMM step and stopping rules."""

    k: int = field(default=5, metadata={"help": "Most assets held (>= 1, at most the number of assets)."})
    rho: float = field(
        default=1.0,
        metadata={"help": "DC penalty weight on 1 - topK(b) (>= 0); exact for large enough rho, 0 = dense TCO."},
    )
    step: float = field(default=1.0, metadata={"help": "PSGA proximal step alpha (> 0)."})
    psga_tol: float = field(default=1e-6, metadata={"help": "PSGA stops when max |b^{k+1} - b^k| <= psga_tol (> 0)."})
    psga_max_iter: int = field(default=200, metadata={"help": "PSGA iterations per period at most (>= 1)."})
    admm_penalty: float = field(default=1.0, metadata={"help": "ADMM's augmented-Lagrangian penalty sigma (> 0)."})
    admm_tol: float = field(default=1e-9, metadata={"help": "ADMM stops when both residuals are <= admm_tol (> 0)."})
    admm_max_iter: int = field(default=1000, metadata={"help": "ADMM iterations per proximal step at most (>= 1)."})

    def __post_init__(self):
        super().__post_init__()
        owner = type(self).__name__
        for name in ("k", "psga_max_iter", "admm_max_iter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{owner}: `{name}` must be an integer >= 1, got {value!r}")
        if not self.rho >= 0:
            raise ValueError(f"{owner}: `rho` must be >= 0, got {self.rho}")
        for name in ("step", "psga_tol", "admm_penalty", "admm_tol"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{owner}: `{name}` must be > 0, got {getattr(self, name)}")


def check_k(owner: str, k: int, assets: int) -> None:
    """Refuse a cardinality ``k`` outside [1, assets], naming ``owner``'s field ``k``."""
    if not 1 <= k <= assets:
        raise ValueError(f"{owner}: `k` must be between 1 and the number of assets ({assets}), got {k}")


def prox_cost_simplex(
    center: np.ndarray,
    anchor: np.ndarray,
    beta: float,
    lam: float,
    config: SparseTCOConfig,
    warm: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray], int]:
    """``argmin_simplex beta/2 ||b - center||^2 + lam ||b - anchor||_1`` by ADMM on the split ``b = z``:

        b <- anchor + soft(m - anchor, lam / (beta + sigma)),  m = (beta center + sigma (z - u)) / (beta + sigma)
        z <- Proj_simplex(b + u);   u <- u + b - z.

    Returns ``z`` (on the simplex), the state ``(z, u)`` to warm-start the next call, and the iterations.
    """
    sigma = config.admm_penalty
    z, u = warm if warm is not None else (project_simplex(center), np.zeros_like(center))
    iterations, residual = 0, np.inf
    while residual > config.admm_tol and iterations < config.admm_max_iter:
        m = (beta * center + sigma * (z - u)) / (beta + sigma)
        b = anchor + np.sign(m - anchor) * np.maximum(np.abs(m - anchor) - lam / (beta + sigma), 0.0)
        z_previous, z = z, project_simplex(b + u)
        u = u + b - z
        residual = max(np.abs(b - z).max(), sigma * np.abs(z - z_previous).max())  # primal, dual
        iterations += 1
    return z, (z, u), iterations


class SparseTCO:
    """K-sparse TCO (module docstring); after a run, ``iterations``, ``admm_iterations`` and ``seconds`` hold
    each rebalance's PSGA iterations, ADMM iterations and wall time, ``penalty_sparse`` how many rebalances the
    penalty alone made K-sparse."""

    def __init__(self, config: SparseTCOConfig | None = None):
        self.config = config or SparseTCOConfig()
        self.iterations: list[int] = []
        self.admm_iterations: list[int] = []
        self.seconds: list[float] = []
        self.penalty_sparse = 0

    @property
    def cost(self) -> float:
        """The cost rate this strategy trades for, and the one :func:`~.protocol.backtest` charges it."""
        return self.config.cost

    def start(self, assets: int) -> np.ndarray:
        check_k(type(self.config).__name__, self.config.k, assets)
        self._warm = None
        return sparse_start(assets, self.config.k)

    def rebalance(self, observed: np.ndarray, previous: np.ndarray, drifted: np.ndarray) -> np.ndarray:
        config = self.config
        if len(observed) < config.warmup:
            return previous
        started = time.perf_counter()
        prediction = predict(observed, config)
        v = prediction / (drifted @ prediction)
        gain = drifted + config.eta * (v - v.mean())
        lam = config.lambda_scale * config.cost
        b, self._warm, admm = prox_cost_simplex(gain, drifted, 1.0, lam, config, self._warm)
        beta = 1.0 + 1.0 / config.step
        iterations, moved = 0, np.inf
        while moved > config.psga_tol and iterations < config.psga_max_iter:
            center = (gain + config.rho * top_k_indicator(b, config.k) + b / config.step) / beta
            b_next, self._warm, inner = prox_cost_simplex(center, drifted, beta, lam, config, self._warm)
            admm += inner
            moved, b = np.abs(b_next - b).max(), b_next
            iterations += 1
        if (b > NONZERO).sum() <= config.k:
            self.penalty_sparse += 1
            b = np.where(b > NONZERO, b, 0.0) / np.where(b > NONZERO, b, 0.0).sum()
        else:
            b = project_k_sparse(b, config.k)
        self.iterations.append(iterations)
        self.admm_iterations.append(admm)
        self.seconds.append(time.perf_counter() - started)
        return b


def sparse_start(assets: int, k: int) -> np.ndarray:
    """The first K-sparse portfolio, before anything is observed: equal weights on the first ``k`` assets."""
    start = np.zeros(assets)
    start[:k] = 1.0 / k
    return start
