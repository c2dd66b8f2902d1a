"""``SingleIndexRegressor``: ``phi(<w, x>)``, ``w`` on the sphere, ``phi`` in a Hermite RKHS; a scikit-learn estimator.

Its hyperparameters are its ``__init__`` arguments, stored unchanged and checked in ``fit``: scikit-learn's
convention (``get_params``, ``clone``, grid search), deliberately instead of the one config dataclass that
companion loops take. The maths is in :mod:`.core`.
"""

import math
import numbers
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from hf_ext._validation import check_finite

from .core import alternating_fit
from .hermite import hermite_features

# A column is flagged when a standardised moment is this many standard errors from N(0, 1)'s: over 512
# Gaussian columns the largest of them is about 3.3, so a Gaussian design is almost never flagged.
GAUSSIAN_Z_LIMIT = 6.0


class NonGaussianInputWarning(UserWarning):
    """The inputs do not look like N(0, I) draws, which the method (and its theory) assumes."""


def warn_if_not_gaussian(X: np.ndarray) -> None:
    """Warn when a column's mean, variance, skewness or excess kurtosis is far from the standard normal's.

    The test is per column (a correlated Gaussian design passes): each moment is compared with its
    standard error under N(0, 1), ``1``, ``sqrt(2)``, ``sqrt(6)``, ``sqrt(24)`` over ``sqrt(n)``.
    """
    n = len(X)
    mean, var = X.mean(0), X.var(0)
    centred = (X - mean) / np.sqrt(np.maximum(var, 1e-300))
    moments = {
        "mean": mean,
        "variance - 1": var - 1,
        "skewness": (centred**3).mean(0),
        "excess kurtosis": (centred**4).mean(0) - 3,
    }
    errors = {"mean": 1.0, "variance - 1": math.sqrt(2), "skewness": math.sqrt(6), "excess kurtosis": math.sqrt(24)}
    for name, values in moments.items():
        z = np.abs(values) * math.sqrt(n) / errors[name]
        column = int(z.argmax())
        if z[column] > GAUSSIAN_Z_LIMIT:
            warnings.warn(
                f"SingleIndexRegressor: the inputs do not look N(0, I): column {column} has {name} "
                f"{values[column]:.3g} ({z[column]:.1f} standard errors from N(0, 1)'s); the method assumes "
                "standard Gaussian inputs (standardise them, and expect slower or no recovery otherwise)",
                NonGaussianInputWarning,
                stacklevel=3,
            )
            return


class SingleIndexRegressor(RegressorMixin, BaseEstimator):
    """Joint learning of a direction ``w`` (unit norm) and a link ``phi`` from Gaussian inputs.

    Alternates kernel ridge regression of ``y`` on ``<w, x>`` in the RKHS of
    ``k(s, t) = sum_{j <= max_degree} (1 + j)^-kernel_decay h_j(s) h_j(t)`` (``h_j`` the normalised Hermite
    polynomials) with a Riemannian gradient step ``w <- normalise(w - learning_rate (I - w w^T) grad)``.

    Parameters
    ----------
    max_degree : int, default=6
        Largest Hermite degree of the link; the final degree is chosen in ``1..max_degree`` by validation.
    ridges : tuple of float, default=(1e-4, 1e-3, 1e-2, 1e-1)
        Candidate ridge penalties (> 0), chosen by validation at every link update.
    kernel_decay : float, default=1.0
        ``lambda_j = (1 + j)^-kernel_decay``: how much more norm a high degree costs (>= 0; 0 is plain ridge).
    learning_rate : float, default=0.5
        Step of the direction on the sphere (> 0).
    link_step : float, default=1.0
        In (0, 1]: the link moves this fraction of the way to its kernel ridge fit per iteration;
        ``link_step / learning_rate`` is the time-scale ratio of link and direction.
    max_iter : int, default=300
        Iterations (one link update and one direction step each).
    tol : float, default=1e-6
        Stop once the norm of the Riemannian gradient is below ``tol`` (>= 0).
    validation_fraction : float, default=0.2
        Share of the rows, in [0, 1), held out to choose the ridge and the degree; 0 chooses on the training rows.
    fixed_link : array-like of shape (J + 1,), default=None
        Hermite coefficients of a link to keep fixed (only ``w`` is learned): the oracle, or a wrong link.
    random_state : int, RandomState instance or None, default=None
        Draws the initial direction (unless ``fit`` gets ``w_init``) and the validation split.

    Attributes
    ----------
    direction_ : ndarray of shape (n_features,)
        The learned unit vector ``w``. ``(w, phi)`` and ``(-w, phi(-.))`` are the same predictor, so
        compare it with the truth through ``|<w, w*>|``.
    hermite_coefs_ : ndarray of shape (degree_ + 1,)
        The link's Hermite coefficients ``c_j``: ``phi = sum_j c_j h_j``.
    degree_, ridge_ : int, float
        The truncation degree and the ridge chosen by validation for the final link.
    hermite_coef_history_ : ndarray of shape (n_iter_ + 1, max_degree + 1)
        The link's coefficients after each iteration (the start, 0, first); with ``fixed_link``, that link's.
    loss_history_ : ndarray of shape (n_iter_,)
        Half the mean squared training error at each direction step.
    overlap_history_ : ndarray of shape (n_iter_ + 1,) or None
        ``m_t = <w_t, w*>`` when ``fit`` was given ``w_star``.
    n_iter_ : int
        Iterations run.
    n_features_in_ : int
        Features seen in ``fit``.
    """

    def __init__(
        self,
        max_degree=6,
        ridges=(1e-4, 1e-3, 1e-2, 1e-1),
        kernel_decay=1.0,
        learning_rate=0.5,
        link_step=1.0,
        max_iter=300,
        tol=1e-6,
        validation_fraction=0.2,
        fixed_link=None,
        random_state=None,
    ):
        self.max_degree = max_degree
        self.ridges = ridges
        self.kernel_decay = kernel_decay
        self.learning_rate = learning_rate
        self.link_step = link_step
        self.max_iter = max_iter
        self.tol = tol
        self.validation_fraction = validation_fraction
        self.fixed_link = fixed_link
        self.random_state = random_state

    def _check_params(self) -> None:
        owner = type(self).__name__
        for name in ("kernel_decay", "learning_rate", "link_step", "tol", "validation_fraction"):
            check_finite(owner, name, getattr(self, name))
        check_finite(owner, "ridges", list(self.ridges))
        for name in ("max_degree", "max_iter"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{owner}: `{name}` must be an integer >= 1, got {value!r}")
        checks = {
            "ridges": (len(self.ridges) > 0 and all(r > 0 for r in self.ridges), "a non-empty sequence of numbers > 0"),
            "kernel_decay": (self.kernel_decay >= 0, ">= 0"),
            "learning_rate": (self.learning_rate > 0, "> 0"),
            "link_step": (0 < self.link_step <= 1, "in (0, 1]"),
            "tol": (self.tol >= 0, ">= 0"),
            "validation_fraction": (0 <= self.validation_fraction < 1, "in [0, 1)"),
        }
        for name, (ok, allowed) in checks.items():
            if not ok:
                raise ValueError(f"{owner}: `{name}` must be {allowed}, got {getattr(self, name)!r}")

    def _vector(self, name: str, value, d: int) -> torch.Tensor:
        vector = np.asarray(value, dtype=float)
        if vector.shape != (d,) or not np.isfinite(vector).all() or not np.linalg.norm(vector) > 0:
            raise ValueError(f"{type(self).__name__}: `{name}` must be a finite nonzero vector of shape ({d},)")
        return torch.as_tensor(vector / np.linalg.norm(vector))

    def fit(self, X, y, w_init=None, w_star=None):
        """Learn ``w`` and ``phi`` from ``X`` (``n >= n_features`` rows of N(0, I) draws) and targets ``y``.

        ``w_init`` is the starting direction (random if None); ``w_star``, the true direction when known,
        only records the overlap ``<w_t, w*>`` in ``overlap_history_``.
        """
        self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if y.dtype.kind not in "biuf":  # y_numeric converts object arrays only; strings would fail deep in torch
            raise ValueError(f"{type(self).__name__}: `y` must be numeric regression targets, got dtype {y.dtype}")
        n, d = X.shape
        if n < d:
            raise ValueError(
                f"{type(self).__name__}: needs at least as many samples as features, "
                f"got n_samples = {n} < n_features = {d}"
            )
        warn_if_not_gaussian(X)
        rng = check_random_state(self.random_state)
        w0 = rng.standard_normal(d) if w_init is None else w_init
        w0 = self._vector("w_init", w0, d)
        truth = None if w_star is None else self._vector("w_star", w_star, d)
        fixed = None
        if self.fixed_link is not None:
            fixed = np.asarray(self.fixed_link, dtype=float)
            if fixed.ndim != 1 or len(fixed) < 1 or not np.isfinite(fixed).all():
                raise ValueError(f"{type(self).__name__}: `fixed_link` must be a finite 1-d array of coefficients")
            fixed = torch.as_tensor(fixed)
        order = rng.permutation(n)
        n_val = round(self.validation_fraction * n)
        val, fit = (order[:n_val], order[n_val:]) if 0 < n_val < n else (order, order)
        X_t, y_t = torch.as_tensor(X), torch.as_tensor(y, dtype=torch.float64)
        path = alternating_fit(
            X_t[fit],
            y_t[fit],
            X_t[val],
            y_t[val],
            w0,
            degrees=range(1, self.max_degree + 1),
            ridges=self.ridges,
            kernel_decay=self.kernel_decay,
            learning_rate=self.learning_rate,
            link_step=self.link_step,
            max_iter=self.max_iter,
            tol=self.tol,
            fixed_link=fixed,
            w_star=truth,
        )
        self.direction_ = path.direction.numpy()
        self.degree_, self.ridge_ = path.link.degree, path.link.ridge
        self.hermite_coefs_ = path.link.coefs[: self.degree_ + 1].numpy()
        self.hermite_coef_history_ = path.coef_history.numpy()
        self.loss_history_ = np.asarray(path.loss_history)
        self.overlap_history_ = None if path.overlap_history is None else np.asarray(path.overlap_history)
        self.n_iter_ = path.n_iter
        return self

    def predict(self, X):
        """``phi(<w, x>)`` for each row of ``X``."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        features = hermite_features(torch.as_tensor(X @ self.direction_), len(self.hermite_coefs_) - 1)
        return features.numpy() @ self.hermite_coefs_
