"""What an ES run found, under pycma's names: ``es.result.xbest``, ``.fbest``, ``.xfavorite``, ..."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class ESResult:
    """The fields of pycma's ``CMAEvolutionStrategy.result`` that our ES has, as attributes.

    Two recommendations: ``xbest``, the best point evaluated, and ``xfavorite``, the distribution mean.
    Without noise ``xbest`` is the better one. Under noise ``fbest`` is the luckiest evaluation (biased
    low) and ``xbest`` the point that drew it, while the mean averages the selection of many candidates.
    """

    xbest: np.ndarray | None  # None until a finite value has been told
    fbest: float  # the value observed at xbest (+inf before)
    evals_best: int  # the evaluation (1-based, re-evaluations counted) that observed fbest; 0 before
    evaluations: int
    iterations: int  # generations completed
    xfavorite: np.ndarray  # the distribution mean
    stds: np.ndarray  # sigma * sqrt(diag C): the sampling spread per coordinate


@dataclass(frozen=True, eq=False)
class MinimizeResult(ESResult):
    """What :func:`~hf_ext.companion.es.minimize` found over all its restarts.

    ``xbest``/``fbest``/``evals_best``/``evaluations``/``iterations`` cover every run; ``xfavorite`` and
    ``stds`` are the last run's (as pycma's ``fmin`` reports them), so a restart cut short by the budget
    leaves a mean that may be far worse than ``xbest``.
    """

    restarts: int = 0
    nan_values: int = 0  # evaluations that returned NaN (each counted as the worst of its generation)
