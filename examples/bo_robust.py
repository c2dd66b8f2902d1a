"""Robust Bayesian optimization: a Robust Conjugate GP that an infinite observation cannot wreck.

`RobustConjugateGP` is a BoTorch `Model`, so any acquisition function works with it. Here one of
twelve observations of Branin (negated: BoTorch maximizes) is corrupted to +inf, a fake optimum
that would dominate a standard GP; RCGP down-weights it, and UCB proposes the next point. The
whole loop with its adversaries is `hf_ext.companion.bo.BayesianOptimization` / `hf-ext run bo_robust`.
"""

import torch
from botorch.acquisition import UpperConfidenceBound
from botorch.optim import optimize_acqf
from botorch.test_functions import Branin
from botorch.utils.sampling import draw_sobol_samples

from hf_ext.companion.bo import RobustConjugateGP, robust_standardize

branin = Branin(negate=True).to(torch.float64)
d = branin.dim
unit_cube = torch.stack([torch.zeros(d), torch.ones(d)]).double()
train_X = draw_sobol_samples(unit_cube, n=12, q=1, seed=0).squeeze(1)
train_Y = branin(branin.bounds[0] + train_X * (branin.bounds[1] - branin.bounds[0])).unsqueeze(-1)
train_Y[3] = float("inf")  # one corrupted observation

# train_X: n x d in the unit cube; train_Y: n x 1, may hold +-inf or huge values
model = RobustConjugateGP(train_X, robust_standardize(train_Y)[0], c=2.0).fit()
candidate, _ = optimize_acqf(UpperConfidenceBound(model, beta=4.0), unit_cube, q=1, num_restarts=4, raw_samples=256)
print(f"next point (unit cube): {candidate.squeeze(0).tolist()}; the fake optimum was at {train_X[3].tolist()}")
