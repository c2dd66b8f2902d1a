"""The BO loop takes BoTorch-style pieces: a model factory (X, Y) -> Model and an acquisition factory (model, t).

The ready-made names ("rcgp", "gp", "relevance_pursuit"; "ucb", "ts") are factories too
(`RCGPFactory`, `SingleTaskGPFactory`, `UCBFactory`, ...); here RCGP is paired with BoTorch's
LogExpectedImprovement, which the loop did not offer before, on Branin (negated: BoTorch maximizes).
"""

from botorch.acquisition import LogExpectedImprovement
from botorch.test_functions import Branin

from hf_ext.companion.bo import BayesianOptimization, BayesianOptimizationConfig, RCGPFactory

branin = Branin(negate=True)


def log_ei(model, t):  # an acquisition factory: the fitted model and the round -> an AcquisitionFunction
    return LogExpectedImprovement(model, best_f=model.posterior(model.train_X).mean.max())


config = BayesianOptimizationConfig(model=RCGPFactory(c=2.0), acquisition=log_ei, seed=0)
history = BayesianOptimization(branin, branin.bounds, config).run(16)
best = max(e.true for e in history)
print(f"best of {len(history)} evaluations: {best:.3f} (optimum {branin.optimal_value:.3f})")
