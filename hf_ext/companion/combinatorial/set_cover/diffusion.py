"""GLNS's generative policy: a small discrete-diffusion denoiser over column bits on the bipartite row-column graph.

Plain torch (two rounds of mean message passing through a sparse incidence matrix), trained on subproblems HiGHS
solves on small instances (``training.py``). At search time it denoises the bits of a local region around the
incumbent, scores each column's instability along the trajectory and grows the neighbourhood from the most unstable
one.
"""

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from hf_ext._validation import check_count, check_field_type

from .instability import instability
from .instance import SetCoverInstance
from .neighbourhood import grow_in_region, local_neighbourhood

STEPS = 10  # denoising steps; the uniform-noise schedule keeps a bit with probability 1 - t / STEPS


def check_steps(owner: str, name: str, steps) -> None:
    """Refuse, naming ``owner``'s ``name``, a number of denoiser calls per trajectory outside 2..STEPS (from pure
    noise to a prediction, at most one call per noise level): GLNS's one check of it, wherever it is set."""
    check_count(owner, name, steps, 2, STEPS)


@dataclass
class Region:
    """A local subgraph: columns ``columns`` of the instance, the rows they touch, and their features."""

    columns: np.ndarray
    incidence: torch.Tensor  # sparse (rows x columns) float
    column_features: torch.Tensor  # cost / mean cost, incumbent bit
    row_features: torch.Tensor  # covered by a fixed column outside the region, 1 / degree


def region_graph(instance: SetCoverInstance, incumbent: np.ndarray, columns: np.ndarray) -> Region:
    sub = instance.matrix[:, columns]
    rows = np.unique(sub.indices)
    sub = instance.rows_to_columns[rows][:, columns].tocoo()
    outside = incumbent.copy()
    outside[columns] = False
    covered = instance.coverage(outside)[rows] > 0
    degree = np.maximum(np.bincount(sub.row, minlength=len(rows)), 1)
    index = torch.as_tensor(np.vstack([sub.row, sub.col]), dtype=torch.long)
    shape = (len(rows), len(columns))
    incidence = torch.sparse_coo_tensor(index, torch.ones(sub.nnz), shape, check_invariants=True).coalesce()
    costs = instance.costs[columns]
    column_features = np.stack([costs / max(costs.mean(), 1e-12), incumbent[columns]], axis=1)
    row_features = np.stack([covered, 1.0 / degree], axis=1)
    return Region(columns, incidence, torch.as_tensor(column_features).float(), torch.as_tensor(row_features).float())


class ColumnDenoiser(nn.Module):
    """Predicts each column's clean bit x_0 from its noisy bit x_t, the timestep and the region's graph."""

    def __init__(self, hidden: int = 32, rounds: int = 2):
        super().__init__()
        check_count("ColumnDenoiser", "hidden", hidden, 1)
        check_count("ColumnDenoiser", "rounds", rounds, 0)
        self.hidden, self.rounds = hidden, rounds  # saved in the checkpoint's config.json
        self.column_in, self.row_in = nn.Linear(4, hidden), nn.Linear(2, hidden)
        self.to_rows = nn.ModuleList(nn.Linear(2 * hidden, hidden) for _ in range(rounds))
        self.to_columns = nn.ModuleList(nn.Linear(2 * hidden, hidden) for _ in range(rounds))
        self.out = nn.Linear(hidden, 1)

    def forward(self, region: Region, bits: torch.Tensor, t: int) -> torch.Tensor:
        n = len(region.columns)
        columns = torch.cat([region.column_features, bits[:, None], torch.full((n, 1), t / STEPS)], dim=1)
        columns, rows = torch.relu(self.column_in(columns)), torch.relu(self.row_in(region.row_features))
        a = region.incidence
        row_degree = torch.sparse.sum(a, 1).to_dense().clamp(min=1)[:, None]
        column_degree = torch.sparse.sum(a, 0).to_dense().clamp(min=1)[:, None]
        for to_rows, to_columns in zip(self.to_rows, self.to_columns, strict=True):
            rows = torch.relu(to_rows(torch.cat([rows, torch.sparse.mm(a, columns) / row_degree], dim=1)))
            columns = torch.relu(to_columns(torch.cat([columns, torch.sparse.mm(a.t(), rows) / column_degree], 1)))
        return self.out(columns).squeeze(-1)


def add_noise(bits: torch.Tensor, t: int, generator: torch.Generator) -> torch.Tensor:
    """q(x_t | x_0): keep each bit with probability 1 - t / STEPS, else replace it by a fair coin."""
    keep = torch.rand(bits.shape, generator=generator) >= t / STEPS
    coin = (torch.rand(bits.shape, generator=generator) < 0.5).float()
    return torch.where(keep, bits, coin)


def keep(t: int) -> float:
    """The probability that a bit survives from step 0 to step ``t`` (else it is a fair coin)."""
    return 1.0 - t / STEPS


def posterior(p_x0: torch.Tensor, bits: torch.Tensor, t: int, s: int) -> torch.Tensor:
    """p(x_s = 1 | x_t = bits) for s < t: the exact D3PM posterior q(x_s | x_t, x_0), mixed over the predicted
    p(x_0 = 1). Both steps are uniform noise: q(x_t | x_s) keeps a bit with probability keep(t) / keep(s)."""
    step = keep(t) / keep(s)

    def likelihood(a: int) -> torch.Tensor:  # q(x_t = bits | x_s = a)
        return step * (bits == a).float() + (1 - step) / 2

    def prior(a: int, x0: int) -> float:  # q(x_s = a | x_0)
        return keep(s) * (a == x0) + (1 - keep(s)) / 2

    ones = [likelihood(1) * prior(1, x0) for x0 in (0, 1)]
    given = [one / (one + likelihood(0) * prior(0, x0)) for one, x0 in zip(ones, (0, 1), strict=True)]
    return p_x0 * given[1] + (1 - p_x0) * given[0]


@torch.no_grad()
def trajectory(model: ColumnDenoiser, region: Region, generator: torch.Generator, steps: int = STEPS) -> np.ndarray:
    """The predicted p(x_0 = 1) of every region column at each of ``steps`` denoising steps (evenly spaced from
    STEPS down to 1), from pure noise; between them x_s is drawn from the exact posterior."""
    check_steps("trajectory", "steps", steps)
    times = np.unique(np.round(np.linspace(STEPS, 1, steps)).astype(int))[::-1].tolist() + [0]
    bits = (torch.rand(len(region.columns), generator=generator) < 0.5).float()
    predictions = []
    for t, s in zip(times[:-1], times[1:], strict=True):
        p = torch.sigmoid(model(region, bits, t))
        predictions.append(p.numpy())
        bits = (torch.rand(p.shape, generator=generator) < posterior(p, bits, t, s)).float()
    return np.stack(predictions)


class GenerativeNeighbourhood:
    """GLNS's policy: a region ``region_factor`` times the bound around the incumbent, denoised in ``steps`` model
    calls; the neighbourhood grows, connected, from the region's most unstable column.

    Parameters
    ----------
    model : ColumnDenoiser
        The trained denoiser (``default_denoiser()`` or ``load_denoiser(path)``).
    region_factor : int, default=2
        The region's size in neighbourhood sizes (>= 1).
    steps : int, default=10
        Denoiser calls per neighbourhood (2..10), evenly spaced over the noise levels.
    seed : int, default=0
        Seeds the denoising trajectories.
    """

    def __init__(self, model: ColumnDenoiser, region_factor: int = 2, steps: int = STEPS, seed: int = 0):
        check_count("GenerativeNeighbourhood", "region_factor", region_factor, 1)
        check_steps("GenerativeNeighbourhood", "steps", steps)
        check_field_type("GenerativeNeighbourhood", "seed", seed, int)
        self.model, self.region_factor, self.steps = model.eval(), region_factor, steps
        self.generator = torch.Generator().manual_seed(seed)

    def scores(self, region: Region) -> np.ndarray:
        """Each region column's instability along one denoising trajectory."""
        return instability(trajectory(self.model, region, self.generator, self.steps))

    def __call__(self, instance: SetCoverInstance, incumbent: np.ndarray, size: int, rng) -> np.ndarray:
        return self.choose(instance, incumbent, size, rng)[2]

    def choose(
        self, instance: SetCoverInstance, incumbent: np.ndarray, size: int, rng
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The region's columns, their scores, and the neighbourhood grown from them (what ``__call__`` frees);
        the first two let a diagnostic ask whether the score points at the columns a solver changes."""
        columns = local_neighbourhood(instance, incumbent, self.region_factor * size, rng)
        scores = self.scores(region_graph(instance, incumbent, columns))
        return columns, scores, grow_in_region(instance, columns, scores, size)
