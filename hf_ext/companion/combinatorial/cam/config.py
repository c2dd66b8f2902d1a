"""CAM's settings: one dataclass, validated at construction."""

import math
from dataclasses import dataclass, field

from hf_ext._validation import check_finite_fields

from .problems import PROBLEMS, check_problem

METHODS = ("cam", "reinforce")
AGGREGATIONS = ("mean", "normalized")
# Measured (docs/results/cam.md, *The method in detail*, Objective): under the uniform chain the next state is
# independent of the current one, so max-cut, whose energy gradient averages to zero over states, gets no training
# signal; a lazy chain gives it one.
DEFAULT_BASE_FLIP = {"mis": 0.5, "maxcut": 0.1}
# Measured (docs/results/cam.md, *Max-cut after the linear loss*): annealed to MIS's 0.2, CAM's max-cut training
# collapsed near its end on 4 of 6 seeds (the chains stop flipping at their first steps); ended at 0.5 it held on all 6.
DEFAULT_TAU_END = {"mis": 0.2, "maxcut": 0.5}
# Measured (docs/results/cam.md, *Dense graphs*): over ER graphs' hundred neighbours the mean blurs one set neighbour
# to 1/100; MIS decoded 3.32% from exact with the normalized sum against 5.96% with the mean. On max-cut's BA graphs
# the two were level.
DEFAULT_AGGREGATION = {"mis": "normalized", "maxcut": "mean"}


def check_aggregation(owner: str, aggregation: str) -> None:
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"{owner}: `aggregation` must be one of {list(AGGREGATIONS)}, got {aggregation!r}")


@dataclass
class CAMConfig:
    """Problem, chain, network and training settings of a discrete diffusion solver (CPU-sized defaults)."""

    problem: str = field(default="mis", metadata={"help": f"One of {list(PROBLEMS)}."})
    beta: float = field(
        default=1.02,
        metadata={"help": "MIS edge penalty: E = -sum x + beta sum_edges x_i x_j (> 0; above 1 every minimum is a "
                  "maximum independent set). The paper's 1.02; 1.5 was 0.33 nodes behind on ER-100 (commit cee81c7)."},
    )
    steps: int = field(default=8, metadata={"help": "Steps T of the chain from the uniform start (>= 1)."})
    chains: int = field(default=8, metadata={"help": "Parallel chains K per graph; best-of-K decoding (>= 1)."})
    hidden: int = field(default=32, metadata={"help": "Width of the GNN (>= 1)."})
    layers: int = field(default=3, metadata={"help": "Message-passing layers of the GNN (>= 1)."})
    aggregation: str | None = field(
        default=None,
        metadata={"help": f"How a node hears its neighbours, one of {list(AGGREGATIONS)}: their mean, or their sum "
                  "over sqrt(degree) standardised over each graph, which dense graphs need; None takes the "
                  "problem's: normalized for MIS (ER graphs), mean for max-cut (docs/cam.md)."},
    )
    method: str = field(
        default="cam",
        metadata={"help": f"Training signal, one of {list(METHODS)}: adjoint matching, or the REINFORCE baseline."},
    )
    learning_rate: float = field(default=1e-2, metadata={"help": "Adam learning rate (> 0)."})
    train_steps: int = field(default=200, metadata={"help": "Gradient steps (>= 1)."})
    train_seconds: float = field(
        default=math.inf, metadata={"help": "Stop training after this many seconds (> 0; inf = no limit)."}
    )
    graphs_per_step: int = field(default=2, metadata={"help": "Training graphs per step (>= 1)."})
    tau_start: float = field(
        default=2.0, metadata={"help": "Temperature (entropy weight) at the start of training (> 0)."}
    )
    tau_end: float | None = field(
        default=None,
        metadata={"help": "Temperature at the end, annealed geometrically, in (0, tau_start]; None takes the "
                  "problem's: 0.2 for MIS, 0.5 for max-cut, whose training collapsed near its end at 0.2."},
    )
    base_flip: float | None = field(
        default=None,
        metadata={"help": "Flip probability of the reference chain the entropy term is measured against and the "
                  "network starts from, in (0, 1); None takes the problem's: 0.5 (the uniform chain) for MIS, "
                  "0.1 for max-cut, which gets no signal under the uniform chain."},
    )
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient-norm clip (> 0)."})
    seed: int = field(default=0, metadata={"help": "Seeds the network, the graph sampling and the chains."})

    def __post_init__(self):
        check_finite_fields(self, allow_infinite=("train_seconds",))
        owner = type(self).__name__  # also a recipe's subclass
        check_problem(owner, self.problem)
        if self.method not in METHODS:
            raise ValueError(f"{owner}: `method` must be one of {list(METHODS)}, got {self.method!r}")
        if self.aggregation is not None:
            check_aggregation(owner, self.aggregation)
        for name in ("steps", "chains", "hidden", "layers", "train_steps", "graphs_per_step"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{owner}: `{name}` must be an integer >= 1, got {value!r}")
        for name in ("beta", "learning_rate", "train_seconds", "tau_start", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{owner}: `{name}` must be > 0, got {getattr(self, name)!r}")
        if self.tau_end is not None and not self.tau_end > 0:
            raise ValueError(f"{owner}: `tau_end` must be > 0, got {self.tau_end!r}")
        if self.base_flip is not None and not 0 < self.base_flip < 1:
            raise ValueError(f"{owner}: `base_flip` must be in (0, 1), got {self.base_flip!r}")
        if self.final_temperature > self.tau_start:
            raise ValueError(
                f"{owner}: `tau_end` must be <= tau_start ({self.tau_start}), got {self.final_temperature}"
            )

    @property
    def reference_flip(self) -> float:
        """The reference chain's flip probability: ``base_flip``, or the problem's default where it is None."""
        return DEFAULT_BASE_FLIP[self.problem] if self.base_flip is None else self.base_flip

    @property
    def final_temperature(self) -> float:
        """The temperature training ends at: ``tau_end``, or the problem's default where it is None."""
        return DEFAULT_TAU_END[self.problem] if self.tau_end is None else self.tau_end

    @property
    def neighbour_aggregation(self) -> str:
        """How the network hears its neighbours: ``aggregation``, or the problem's default where it is None."""
        return DEFAULT_AGGREGATION[self.problem] if self.aggregation is None else self.aggregation
