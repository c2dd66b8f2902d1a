"""GLNS's generative policy: a small discrete-diffusion denoiser over column bits on the bipartite row-column graph.

Plain torch (two rounds of mean message passing through a sparse incidence matrix), trained on subproblems HiGHS
solves on small instances. At search time it denoises the bits of a local region around the incumbent, scores each
column's instability along the trajectory and grows the neighbourhood from the most unstable one.
"""

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn
from tqdm.auto import tqdm

from hf_ext._files import open_safetensors

from .greedy import greedy
from .instability import instability
from .instance import SetCoverInstance, beasley, rail_like
from .lns import repair
from .neighbourhood import grow_neighbourhood, local_neighbourhood

STEPS = 10  # denoising steps; the uniform-noise schedule keeps a bit with probability 1 - t / STEPS


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


@torch.no_grad()
def trajectory(model: ColumnDenoiser, region: Region, generator: torch.Generator) -> np.ndarray:
    """The predicted p(x_0 = 1) of every region column at each of the STEPS denoising steps, from pure noise."""
    bits = (torch.rand(len(region.columns), generator=generator) < 0.5).float()
    predictions = []
    for t in range(STEPS, 0, -1):
        p = torch.sigmoid(model(region, bits, t))
        predictions.append(p.numpy())
        bits = add_noise((torch.rand(p.shape, generator=generator) < p).float(), t - 1, generator)
    return np.stack(predictions)


class GenerativeNeighbourhood:
    """GLNS's policy: a region ``region_factor`` times the bound around the incumbent, denoised; the neighbourhood
    grows, connected, from the region's most unstable column."""

    def __init__(self, model: ColumnDenoiser, region_factor: int = 2, seed: int = 0):
        self.model, self.region_factor = model.eval(), region_factor
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, instance: SetCoverInstance, incumbent: np.ndarray, size: int, rng) -> np.ndarray:
        columns = local_neighbourhood(instance, incumbent, self.region_factor * size, rng)
        region = region_graph(instance, incumbent, columns)
        scores = np.full(instance.n_columns, -np.inf)
        scores[columns] = instability(trajectory(self.model, region, self.generator))
        allowed = np.zeros(instance.n_columns, dtype=bool)
        allowed[columns] = True
        return grow_neighbourhood(instance, scores, size, int(columns[np.argmax(scores[columns])]), allowed)


def training_examples(count: int, region_size: int = 200, seed: int = 0) -> list[tuple[Region, torch.Tensor]]:
    """(region, HiGHS-optimal bits) pairs on small Beasley-style and rail-like instances around their greedy cover."""
    rng, examples = np.random.default_rng(seed), []
    for k in tqdm(range(count), desc="solving training subproblems"):
        instance = beasley(200, 2000, 0.02, seed=seed + k) if k % 2 else rail_like(200, 2000, seed=seed + k)
        incumbent = greedy(instance)
        columns = local_neighbourhood(instance, incumbent, region_size, rng)
        solved = repair(instance, incumbent, columns, time_limit=1.0)
        examples.append((region_graph(instance, incumbent, columns), torch.as_tensor(solved[columns]).float()))
    return examples


def train_denoiser(examples: int = 60, epochs: int = 30, seed: int = 0) -> ColumnDenoiser:
    """Fit the denoiser by binary cross-entropy on x_0 at random timesteps (CPU, one to two minutes)."""
    if examples < 1 or epochs < 1:
        raise ValueError(f"train_denoiser: `examples` and `epochs` must be integers >= 1, got {examples}, {epochs}")
    torch.manual_seed(seed)
    data, model = training_examples(examples, seed=seed), ColumnDenoiser()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in tqdm(range(epochs), desc="training the denoiser"):
        for region, target in data:
            t = int(torch.randint(1, STEPS + 1, (1,), generator=generator))
            loss = nn.functional.binary_cross_entropy_with_logits(
                model(region, add_noise(target, t, generator), t), target
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def default_denoiser(cache: str | Path | None = None, examples: int = 60, epochs: int = 30) -> ColumnDenoiser:
    """The trained default, built once by ``train_denoiser(examples, epochs)`` and cached as safetensors in
    ``cache`` (``$HF_EXT_CACHE`` or ``~/.cache/hf_ext``); a later call only loads it."""
    root = Path(cache or os.environ.get("HF_EXT_CACHE", Path.home() / ".cache" / "hf_ext"))
    path = root / "set_cover_denoiser.safetensors"
    model = ColumnDenoiser()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(train_denoiser(examples, epochs).state_dict(), str(path))
    with open_safetensors(path, "default_denoiser") as handle:
        model.load_state_dict({key: handle.get_tensor(key) for key in handle.keys()})
    return model.eval()
