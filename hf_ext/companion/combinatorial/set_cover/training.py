"""Training GLNS's denoiser: (region, HiGHS's bits within a node limit) pairs from small instances, binary
cross-entropy on x_0."""

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from hf_ext._random import seeded_global_rng
from hf_ext._validation import check_finite_fields

from .diffusion import STEPS, ColumnDenoiser, Region, add_noise, region_graph
from .greedy import greedy
from .instance import beasley, rail_like
from .lns import repair
from .neighbourhood import local_neighbourhood

# Raised whenever ``training_examples`` builds other examples from the same settings, so that a default denoiser
# cached before is retrained (2: regions reach incumbent columns through the columns that bridge them)
EXAMPLES_VERSION = 2
# a safety net only: the node limit ends each label's solve. With a 1 s time limit instead, the rail subproblems'
# labels (none solved to optimality in 20 s) were wherever HiGHS's root had got to, and the default denoiser
# differed from one machine, or one load, to the next
LABEL_TIME_LIMIT = 60.0


@dataclass
class DenoiserTrainingConfig:
    examples: int = field(default=60, metadata={"help": "Subproblems HiGHS solves for training (>= 1)."})
    epochs: int = field(default=30, metadata={"help": "Passes over the examples (>= 1)."})
    region_size: int = field(default=200, metadata={"help": "Columns per training region (>= 2)."})
    instance_columns: int = field(default=2000, metadata={"help": "Columns of each small training instance."})
    learning_rate: float = field(default=3e-3, metadata={"help": "Adam's learning rate (> 0)."})
    hidden: int = field(default=32, metadata={"help": "Width of the denoiser's message passing (>= 1)."})
    label_nodes: int = field(
        default=1,
        metadata={
            "help": "HiGHS branch-and-bound nodes per training subproblem (>= 1): a limit on work, so the labels, "
            "and the denoiser, do not depend on the machine's speed (1: the root's solution, about 2 s on a rail "
            "subproblem)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seeds the instances, the regions and the noise."})

    def __post_init__(self):
        check_finite_fields(self)
        for name, low in (
            ("examples", 1),
            ("epochs", 1),
            ("region_size", 2),
            ("instance_columns", 20),
            ("hidden", 1),
            ("label_nodes", 1),
            ("seed", 0),  # numpy's generators take no negative seed
        ):
            if getattr(self, name) < low:
                raise ValueError(
                    f"{type(self).__name__}: `{name}` must be an integer >= {low}, got {getattr(self, name)}"
                )
        if not self.learning_rate > 0:
            raise ValueError(f"{type(self).__name__}: `learning_rate` must be > 0, got {self.learning_rate}")


def training_examples(config: DenoiserTrainingConfig) -> list[tuple[Region, torch.Tensor]]:
    """(region, HiGHS's bits within ``label_nodes`` nodes: optimal on the Beasley-style ones, the root's solution on
    most rail-like ones) pairs on small Beasley-style and rail-like instances around their greedy cover."""
    rng, examples, n = np.random.default_rng(config.seed), [], config.instance_columns
    for k in tqdm(range(config.examples), desc="solving training subproblems"):
        seed = config.seed + k
        instance = beasley(n // 10, n, 0.02, seed=seed) if k % 2 else rail_like(n // 10, n, seed=seed)
        incumbent = greedy(instance)
        columns = local_neighbourhood(instance, incumbent, config.region_size, rng)
        solved = repair(instance, incumbent, columns, LABEL_TIME_LIMIT, node_limit=config.label_nodes).selected
        examples.append((region_graph(instance, incumbent, columns), torch.as_tensor(solved[columns]).float()))
    return examples


def train_denoiser(config: DenoiserTrainingConfig | None = None, history: list | None = None) -> ColumnDenoiser:
    """Fit the denoiser by binary cross-entropy on x_0 at random timesteps (CPU, one to two minutes at the
    defaults); each epoch's mean loss is appended to ``history`` when given."""
    config = config or DenoiserTrainingConfig()
    data = training_examples(config)
    with seeded_global_rng(config.seed):  # torch.nn's initialisers draw from the global generator; left as it was
        model = ColumnDenoiser(hidden=config.hidden)
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    for _ in tqdm(range(config.epochs), desc="training the denoiser"):
        losses = []
        for region, target in data:
            t = int(torch.randint(1, STEPS + 1, (1,), generator=generator))
            loss = nn.functional.binary_cross_entropy_with_logits(
                model(region, add_noise(target, t, generator), t), target
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if history is not None:
            history.append(float(np.mean(losses)))
    return model.eval()
