"""The ES loop's settings: one dataclass, validated at construction."""

import math
from dataclasses import dataclass, field

import numpy as np

from hf_ext._validation import check_finite_fields

WEIGHTS = ("log", "rb_pem", "unbiased_pem", "probe_switch")
MAX_UNBIASED_REEVALUATIONS = 12  # unbiased_pem averages 2^max_reevaluations rankings
RESTARTS = ("ipop", "none")


def default_popsize(dimension: int) -> int:
    """CMA-ES's default population size for ``dimension`` variables, ``4 + floor(3 ln n)`` (Hansen's tutorial)."""
    return 4 + int(3 * np.log(dimension))


def check_popsize(owner: str, popsize: int | None, optional: bool = True) -> None:
    """Refuse a population size that is not an integer >= 2 (or None, :func:`default_popsize`, when ``optional``),
    naming ``owner``."""
    if (popsize is None and optional) or (_is_int(popsize) and popsize >= 2):
        return
    default = " or None (CMA-ES's default)" if optional else ""
    raise ValueError(f"{owner}: `popsize` must be an integer >= 2{default}, got {popsize!r}")


@dataclass
class ESConfig:
    """How :class:`~hf_ext.companion.es.SepCMAES` samples, weights and restarts (defaults: Hansen's tutorial)."""

    sigma0: float = field(default=2.0, metadata={"help": "Initial step size (> 0), in the units of x."})
    popsize: int | None = field(
        default=None, metadata={"help": "Offspring per generation (>= 2); None = 4 + floor(3 ln n)."}
    )
    weights: str = field(
        default="log",
        metadata={
            "help": f"Recombination weights, one of {list(WEIGHTS)}: hard log-rank weights, RB-PEM expected "
            "weights, PEM weights averaged over random re-evaluations (unbiased on any noise), or probe-and-switch "
            "between hard and RB-PEM weights."
        },
    )
    resamples: int = field(
        default=1, metadata={"help": "Evaluations of each candidate, averaged (>= 1; the resampling baseline)."}
    )
    replicates: int = field(default=64, metadata={"help": "Bootstrap replicates B of the ranking (>= 1)."})
    band: int = field(
        default=1, metadata={"help": "Re-evaluate the candidates ranked within `band` of the elite boundary mu (>= 0)."}
    )
    max_reevaluations: int = field(
        default=2, metadata={"help": "Cap on the extra evaluations per generation (>= 0): the bootstrap's overhead."}
    )
    pool_size: int = field(
        default=40, metadata={"help": "Residuals kept (the latest) to fit the noise model s0 + s1 |f| (>= 2)."}
    )
    switch_threshold: float = field(
        default=0.1,
        metadata={"help": "probe_switch: PEM weights while the elite-flip rate exceeds this, in [0, 1]."},
    )
    probe_interval: int = field(
        default=5, metadata={"help": "probe_switch: generations between probes while on hard weights (>= 1)."}
    )
    lower: float = field(default=-5.0, metadata={"help": "Box lower bound of every coordinate (may be -inf)."})
    upper: float = field(default=5.0, metadata={"help": "Box upper bound of every coordinate (may be inf)."})
    max_evaluations: int | None = field(
        default=None,
        metadata={"help": "Stop after this many evaluations, re-evaluations included (>= 1); None = no cap."},
    )
    restarts: str = field(
        default="ipop", metadata={"help": f"One of {list(RESTARTS)}: IPOP doubles popsize at each restart."}
    )
    max_restarts: int = field(default=9, metadata={"help": "Restarts after the first run (>= 0)."})
    tolx: float = field(default=1e-11, metadata={"help": "Stop when sigma * max sqrt(diag C) falls below (>= 0)."})
    seed: int = field(default=0, metadata={"help": "Seeds sampling and the bootstrap."})

    def __post_init__(self):
        check_finite_fields(self, allow_infinite=("lower", "upper"))
        owner = type(self).__name__
        for name, allowed in (("weights", WEIGHTS), ("restarts", RESTARTS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{owner}: `{name}` must be one of {list(allowed)}, got {getattr(self, name)!r}")
        if not 0 < self.sigma0 < math.inf:
            raise ValueError(f"{owner}: `sigma0` must be a positive number, got {self.sigma0}")
        if not self.lower < self.upper:
            raise ValueError(f"{owner}: `lower` must be < `upper`, got {self.lower} and {self.upper}")
        if not 0 <= self.switch_threshold <= 1:
            raise ValueError(f"{owner}: `switch_threshold` must be in [0, 1], got {self.switch_threshold}")
        check_popsize(owner, self.popsize)
        for name, least in (
            ("resamples", 1),
            ("replicates", 1),
            ("band", 0),
            ("max_reevaluations", 0),
            ("pool_size", 2),
            ("probe_interval", 1),
            ("max_evaluations", 1),
            ("max_restarts", 0),
            ("seed", 0),  # numpy's generators take no negative seed
        ):
            value = getattr(self, name)
            if name == "max_evaluations" and value is None:
                continue
            if not _is_int(value) or value < least:
                raise ValueError(f"{owner}: `{name}` must be an integer >= {least}, got {value!r}")
        if self.weights == "unbiased_pem" and self.resamples != 1:
            raise ValueError(f"{owner}: `resamples` must be 1 with weights='unbiased_pem', got {self.resamples}")
        if self.weights == "unbiased_pem" and self.max_reevaluations > MAX_UNBIASED_REEVALUATIONS:
            raise ValueError(
                f"{owner}: `max_reevaluations` must be <= {MAX_UNBIASED_REEVALUATIONS} with weights='unbiased_pem' "
                f"(it averages 2^max_reevaluations rankings), got {self.max_reevaluations}"
            )
        if not self.tolx >= 0:
            raise ValueError(f"{owner}: `tolx` must be >= 0, got {self.tolx}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
