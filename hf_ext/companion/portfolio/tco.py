"""TCO1 and TCO2 (Li et al. 2018), as universal-portfolios' ``algos/tco.py`` defines them.

From the drifted portfolio ``b~`` and a prediction ``x^`` of the next relatives, with ``v = x^ / <b~, x^>``:

    b = Proj_simplex(b~ + soft_threshold(eta (v - mean(v)), lambda)),   lambda = lambda_scale * cost.

TCO1 predicts a reversal (``x^ = 1 / x_t``); TCO2 predicts the mean of the last ``window`` prices over today's
(OLMAR's moving average) and keeps the uniform portfolio until ``window`` periods are observed.
"""

from dataclasses import dataclass, field

import numpy as np

from hf_ext._validation import check_finite_fields, check_finite_number

from .simplex import project_simplex

PREDICTORS = ("reversal", "window")


def check_cost(owner: str, cost: float) -> None:
    """Refuse a proportional cost rate that is not a number, NaN, infinite, negative or >= 1, naming ``owner``'s
    field."""
    check_finite_number(owner, "cost", cost)
    if not 0 <= cost < 1:
        raise ValueError(f"{owner}: `cost` must be a rate in [0, 1) (0.0025 = 0.25%), got {cost}")


@dataclass
class TCOConfig:
    """How a TCO strategy predicts the next relatives and trades off a predicted gain against its cost."""

    cost: float = field(default=0.0025, metadata={"help": "Proportional transaction cost rate in [0, 1) (0.25%)."})
    eta: float = field(default=10.0, metadata={"help": "Step on the predicted relative gains (> 0); TCO uses 10."})
    lambda_scale: float = field(
        default=10.0, metadata={"help": "Soft threshold lambda = lambda_scale * cost (>= 0); TCO uses 10."}
    )
    predictor: str = field(
        default="window",
        metadata={"help": f"One of {list(PREDICTORS)}: TCO1's reversal 1 / x_t, or TCO2's moving-average ratio."},
    )
    window: int = field(default=5, metadata={"help": "Prices averaged by the 'window' predictor (>= 2)."})

    def __post_init__(self):
        check_finite_fields(self)
        owner = type(self).__name__
        check_cost(owner, self.cost)
        if not self.eta > 0:
            raise ValueError(f"{owner}: `eta` must be > 0, got {self.eta}")
        if not self.lambda_scale >= 0:
            raise ValueError(f"{owner}: `lambda_scale` must be >= 0, got {self.lambda_scale}")
        if self.predictor not in PREDICTORS:
            raise ValueError(f"{owner}: `predictor` must be one of {list(PREDICTORS)}, got {self.predictor!r}")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 2:
            raise ValueError(f"{owner}: `window` must be an integer >= 2, got {self.window!r}")

    @property
    def warmup(self) -> int:
        """Periods observed before the first prediction (the uniform portfolio is held until then)."""
        return 1 if self.predictor == "reversal" else self.window


def predict(observed: np.ndarray, config: TCOConfig) -> np.ndarray:
    """The predicted next relatives from the relatives ``observed`` so far (at least ``config.warmup`` rows)."""
    if config.predictor == "reversal":
        return 1.0 / observed[-1]
    # price of each of the last `window` periods over today's: 1, 1 / x_t, 1 / (x_t x_{t-1}), ...
    back = np.cumprod(observed[: -config.window : -1], axis=0)
    return (1.0 + (1.0 / back).sum(axis=0)) / config.window


def tco_step(drifted: np.ndarray, prediction: np.ndarray, config: TCOConfig) -> np.ndarray:
    """TCO's rebalancing rule (module docstring)."""
    v = prediction / (drifted @ prediction)
    gain = config.eta * (v - v.mean())
    shrunk = np.sign(gain) * np.maximum(np.abs(gain) - config.lambda_scale * config.cost, 0.0)
    return project_simplex(drifted + shrunk)


class TCO:
    """The TCO strategy of ``config`` (TCO1: ``predictor='reversal'``, TCO2: ``predictor='window'``)."""

    def __init__(self, config: TCOConfig | None = None):
        self.config = config or TCOConfig()

    @property
    def cost(self) -> float:
        """The cost rate this strategy trades for, and the one :func:`~.protocol.backtest` charges it."""
        return self.config.cost

    def start(self, assets: int) -> np.ndarray:
        return np.full(assets, 1.0 / assets)

    def rebalance(self, observed: np.ndarray, previous: np.ndarray, drifted: np.ndarray) -> np.ndarray:
        if len(observed) < self.config.warmup:
            return previous
        return tco_step(drifted, predict(observed, self.config), self.config)
