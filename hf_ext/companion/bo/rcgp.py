"""Robust Conjugate Gaussian Process (Altamirano, Briol, Knoblauch, 2024) as a BoTorch model.

RCGP keeps a GP's closed-form posterior but gives every observation a weight
``w(x, y) = beta (1 + (y - m(x))^2 / c^2)^(-1/2)``. With ``beta = sigma / sqrt(2)`` (RCGP's choice,
used here) this amounts to observation ``i`` having noise variance ``sigma^2 (1 + r_i^2 / c^2)``
(``r_i = y_i - m``) and the shifted target ``m + r_i (1 + 2 sigma^2 / (c^2 + r_i^2))``:

    mean(x) = m + k_x^T K_w^-1 z,      cov(x, x') = k(x, x') - k_x^T K_w^-1 k_x',
    K_w = K + diag(sigma^2 (1 + r^2 / c^2)),   z_i = r_i (1 + 2 sigma^2 / (c^2 + r_i^2)).

Everything is computed through ``s_i = (sigma^2 (1 + r_i^2/c^2))^(-1/2)`` (0 for an infinite
residual) and ``A = I + S K S`` (``K_w^-1 = S A^-1 S``), whose entries stay finite for any residual:
an observation of ``+-inf`` gets ``s_i = 0`` and drops out exactly, a huge one nearly so. As
``c -> inf`` the noise tends to ``sigma^2`` and ``z`` to ``r``: the standard GP with noise
``sigma^2``. NaN observations are refused (a NaN is a failed evaluation, not a measurement).

Besides a batched ``posterior``, the model has the rest of BoTorch's model API that acquisition
functions use: ``train_inputs``/``train_targets``, ``subset_output``, an ``outcome_transform``,
``condition_on_observations`` and ``fantasize`` (look-ahead acquisitions such as
``qKnowledgeGradient``, fantasized pending points). Conditioning on ``(X, Y)`` keeps every
hyperparameter (kernel, ``sigma^2``, ``c``, ``m``) and factorises ``A`` anew on the enlarged data,
which is exactly RCGP on the concatenated data: a weight depends only on its own observation,
``m`` and ``c``, so the old points keep theirs. It is not a rank update of a cached factor because
:meth:`RobustConjugateGP.posterior` keeps no factor: it factorises ``A`` at every call, so a fit
that changes the hyperparameters has no cache to invalidate.
"""

import math
from copy import deepcopy

import torch
from botorch.models.model import Model
from botorch.models.transforms.outcome import OutcomeTransform
from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.sampling.base import MCSampler
from gpytorch.constraints import GreaterThan, Interval
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel, ScaleKernel
from torch import Tensor, nn

from hf_ext._validation import check_finite_number, check_number


def robust_scale(values: Tensor) -> float:
    """The standard deviation of the finite ``values`` as Shamos's estimator sees it: ``1.0483`` times the median of
    ``|v_i - v_j|`` over pairs (consistent for normal data); 0 for fewer than two finite values.

    Why not the MAD: BO samples cluster near the optimum, and once more than half of the values
    nearly coincide the MAD collapses, so every value away from the optimum looks like an outlier
    (on Branin the clean values then spanned 5000 MADs, and RCGP down-weighted them all). The
    pairwise median collapses only when over 71% of the values coincide, and a minority of
    corrupted values (up to 29%) cannot make it arbitrarily large.
    """
    finite = values[torch.isfinite(values)].flatten()
    if len(finite) < 2:
        return 0.0
    return 1.0483 * torch.pdist(finite[:, None]).median().item()


def adaptive_threshold(residuals: Tensor, epsilon: float = 0.05, max_scales: float = 3.0) -> float:
    """RCGP's data-driven soft threshold: the ``1 - epsilon`` quantile of ``|residuals|``, kept on the clean scale.

    The quantile takes the lower order statistic, so it is a value of the data. When more than an
    ``epsilon`` share of the residuals are corrupted it would be one of them (``inf``, or ``1e300``:
    robustness switched off, and ``c**2`` overflowing), so it is capped at ``max_scales``
    :func:`robust_scale` of the finite residuals, which a minority of corrupted points cannot move
    far. A threshold of 0 (all residuals 0) becomes 1.
    """
    magnitudes = residuals.abs().flatten()
    finite = magnitudes[torch.isfinite(magnitudes)]
    if len(finite) == 0:
        return 1.0
    quantile = torch.quantile(magnitudes, 1 - epsilon, interpolation="lower").item()
    c = min(quantile, max_scales * robust_scale(residuals), finite.max().item())
    return c if c > 0 else 1.0


def check_threshold(owner: str, c, epsilon) -> None:
    """Refuse a weight threshold ``c`` (``None``: adaptive) or an adaptive quantile ``epsilon`` that RCGP cannot use,
    naming ``owner``: at construction, not at the first fit."""
    check_number(owner, "c", c, allow_none=True)
    check_number(owner, "epsilon", epsilon)
    if c is not None and not 0 < c < math.inf:
        raise ValueError(f"{owner}: `c` must be a finite positive number or None, got {c}")
    if not 0 < epsilon < 1:
        raise ValueError(f"{owner}: `epsilon` must be in (0, 1), got {epsilon}")


def _default_kernel(dim: int) -> Kernel:
    """BoTorch's own ``SingleTaskGP`` kernel (0.18, ``get_covar_module_with_dim_scaled_prior``) with an output scale.

    That is an RBF kernel with one lengthscale per input, the dimension-scaled log-normal
    lengthscale prior (initialised at its mode) and a lengthscale floor of 0.025. BoTorch needs no
    output scale because ``Standardize`` gives the outputs unit variance; a robust standardisation
    does not (BO's samples cluster near the optimum, and the objective's values elsewhere lie many
    robust scales away: 3 to 100 on Branin), and without an output scale the fit matched that
    spread with lengthscales at the floor. So the amplitude is fitted too (``ScaleKernel``, no
    prior). BoTorch keeps the floor with scipy's bounds on an untransformed parameter; :meth:`fit`
    uses torch's unconstrained L-BFGS, so the same floor is kept by a softplus transform instead.
    """
    kernel = get_covar_module_with_dim_scaled_prior(ard_num_dims=dim)
    initial = kernel.lengthscale.detach().clone()
    kernel.register_constraint("raw_lengthscale", GreaterThan(kernel.raw_lengthscale_constraint.lower_bound))
    kernel.lengthscale = initial
    return ScaleKernel(kernel)


def check_training_data(owner: str, train_X: Tensor, train_Y: Tensor) -> None:
    """Refuse inputs and observations whose shapes do not pair up, naming ``owner``: torch's broadcasting error
    deep inside a fit names neither."""
    if train_X.dim() < 2 or train_Y.shape != (*train_X.shape[:-1], 1):
        raise ValueError(
            f"{owner}: `train_X` must be batch_shape x n x d and `train_Y` batch_shape x n x 1, got "
            f"{tuple(train_X.shape)} and {tuple(train_Y.shape)}"
        )


class RobustConjugateGP(Model):
    """A single-output BoTorch ``Model`` whose posterior is RCGP's closed form (see the module docstring).

    Args:
        train_X: ``batch_shape x n x d`` inputs (the BO loop passes them ``n x d``, scaled to the unit cube).
        train_Y: ``batch_shape x n x 1`` observations; ``+-inf`` and huge values are allowed, NaN is refused.
        c: the soft threshold (fixed: RCGP-UCB's stable variant); ``None`` takes
            :func:`adaptive_threshold` of the residuals (the adaptive variant).
        epsilon: share of residuals allowed above the adaptive threshold.
        prior_mean: the constant prior mean ``m``; ``None`` takes the median of the finite observations.
            Batched data share one ``m`` and one ``c``, so with a ``batch_shape`` both must be given.
        noise: initial ``sigma^2`` (fitted by :meth:`fit`, kept in ``[1e-4, 1]``: put ``train_Y`` on a
            unit scale first, robustly, e.g. by :func:`hf_ext.companion.bo.robust_standardize`).
        covar_module: a GPyTorch kernel; default BoTorch's own ``SingleTaskGP`` kernel (RBF, ARD, its priors)
            with a fitted output scale (:func:`_default_kernel`).
        outcome_transform: a BoTorch ``OutcomeTransform`` such as ``Standardize(m=1)``, fitted on ``train_Y`` here;
            the model works on the transformed scale (``c``, ``prior_mean`` and ``noise`` too) and
            :meth:`posterior` untransforms, as ``SingleTaskGP`` does. ``Standardize`` cannot take an infinite
            observation (its mean becomes infinite and its scale NaN); robustly standardised outcomes can.

    ``train_X`` and ``train_Y`` (after the outcome transform) are kept as attributes of those names.
    """

    num_outputs = 1

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        c: float | None = None,
        epsilon: float = 0.05,
        prior_mean: float | None = None,
        noise: float = 1e-2,
        covar_module: nn.Module | None = None,
        outcome_transform: OutcomeTransform | None = None,
    ):
        super().__init__()
        check_training_data("RobustConjugateGP", train_X, train_Y)
        if torch.isnan(train_Y).any() or not torch.isfinite(train_X).all():
            raise ValueError("RobustConjugateGP: `train_Y` must not contain NaN and `train_X` must be finite")
        check_threshold("RobustConjugateGP", c, epsilon)
        check_finite_number("RobustConjugateGP", "prior_mean", prior_mean, allow_none=True)
        if train_X.dim() > 2 and (c is None or prior_mean is None):
            raise ValueError(
                f"RobustConjugateGP: batched data (batch_shape {tuple(train_X.shape[:-2])}) need `c` and `prior_mean` "
                f"given (their defaults are statistics of one data set), got c={c}, prior_mean={prior_mean}"
            )
        if outcome_transform is not None:
            train_Y = outcome_transform(train_Y, X=train_X)[0]
            if torch.isnan(train_Y).any():
                raise ValueError(
                    f"RobustConjugateGP: `outcome_transform` ({type(outcome_transform).__name__}) turned `train_Y` "
                    "into NaN, as Standardize does with an infinite observation; pass robustly standardised outcomes "
                    "(hf_ext.companion.bo.robust_standardize) and no outcome_transform instead"
                )
            self.outcome_transform = outcome_transform
        self.train_X, self.train_Y = train_X, train_Y
        finite = train_Y[torch.isfinite(train_Y)]
        if prior_mean is None:
            prior_mean = finite.median().item() if len(finite) else 0.0
        self.prior_mean = prior_mean
        residuals = train_Y.squeeze(-1) - prior_mean
        self.c = adaptive_threshold(residuals, epsilon) if c is None else c
        self.covar_module = covar_module if covar_module is not None else _default_kernel(train_X.shape[-1])
        self.covar_module.to(train_X)
        self.noise_constraint = Interval(1e-4, 1.0)
        self.raw_noise = nn.Parameter(torch.zeros((), dtype=train_X.dtype, device=train_X.device))
        self.noise = noise

    def __getattr__(self, name: str):
        if name == "likelihood":  # what fit_gpytorch_mll's ExactMarginalLogLikelihood(model.likelihood, model) asks
            raise AttributeError(
                "RobustConjugateGP has no `likelihood`: RCGP has no marginal likelihood for BoTorch's fit_gpytorch_mll "
                "to maximise; fit it with model.fit(), its weighted leave-one-out objective in closed form"
            )
        return super().__getattr__(name)

    @property
    def noise(self) -> Tensor:
        """``sigma^2``: the noise of an observation with zero residual."""
        return self.noise_constraint.transform(self.raw_noise)

    @noise.setter
    def noise(self, value: float) -> None:
        check_number("RobustConjugateGP", "noise", value)
        low, high = self.noise_constraint.lower_bound.item(), self.noise_constraint.upper_bound.item()
        if not low < value < high:  # its raw parameter would be NaN or infinite
            raise ValueError(
                f"RobustConjugateGP: `noise` must be in ({low:g}, {high:g}), where its fit keeps it, got {value}"
            )
        with torch.no_grad():
            self.raw_noise.copy_(self.noise_constraint.inverse_transform(torch.as_tensor(value).to(self.raw_noise)))

    @property
    def batch_shape(self) -> torch.Size:
        """The training data's batch shape: empty, or ``sample_shape x batch_shape`` after :meth:`fantasize`."""
        return self.train_X.shape[:-2]

    @property
    def train_inputs(self) -> tuple[Tensor]:
        """``(train_X,)``, as BoTorch's GPyTorch models hold their inputs (``X_baseline`` of the NEI family)."""
        return (self.train_X,)

    @property
    def train_targets(self) -> Tensor:
        """The ``batch_shape x n`` (transformed) observations, as BoTorch's single-output GPyTorch models hold them."""
        return self.train_Y.squeeze(-1)

    def weights(self) -> Tensor:
        """``w_i / beta = (1 + r_i^2 / c^2)^(-1/2)`` of every observation: 1 for a perfect fit, 0 for infinity."""
        residuals = self.train_Y.squeeze(-1) - self.prior_mean
        return torch.rsqrt(1 + (residuals / self.c) ** 2)

    def _scaled_terms(self) -> tuple[Tensor, Tensor]:
        """``s`` and ``S z``, finite for every residual including ``+-inf``."""
        sigma = self.noise.sqrt()
        residuals = self.train_Y.squeeze(-1) - self.prior_mean
        c = torch.as_tensor(self.c, dtype=residuals.dtype, device=residuals.device)  # c**2 may exceed a float
        s = self.weights() / sigma
        # s_i z_i = sign(r) c / sqrt(1 + (c/r)^2) / sigma * (1 + 2 sigma^2 / (c^2 + r^2)), stable at r = 0 and inf.
        magnitude = c * torch.rsqrt(1 + (c / residuals) ** 2) / sigma
        scaled_targets = residuals.sign() * magnitude * (1 + 2 * self.noise / (c**2 + residuals**2))
        return s, scaled_targets

    def _factor(self) -> tuple[Tensor, Tensor, Tensor]:
        """``s``, the Cholesky factor of ``A = I + S K S`` and ``A^-1 S z`` (each with the model's batch shape)."""
        s, scaled_targets = self._scaled_terms()
        kernel = self.covar_module(self.train_X).to_dense()
        identity = torch.eye(s.shape[-1], dtype=s.dtype, device=s.device)
        cholesky = torch.linalg.cholesky(identity + s[..., :, None] * kernel * s[..., None, :])
        solved = torch.cholesky_solve(scaled_targets[..., None], cholesky).squeeze(-1)
        return s, cholesky, solved

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform=None,
        **kwargs,
    ) -> GPyTorchPosterior:
        """The RCGP posterior at ``X`` (``batch x q x d`` or ``q x d``, ``batch`` broadcast with :attr:`batch_shape`).

        ``observation_noise=True`` adds ``sigma^2`` (the noise of an uncorrupted observation); a tensor
        (``... x q x 1``, on the transformed scale) adds its values.
        """
        if output_indices not in (None, [0]):
            raise ValueError(f"RobustConjugateGP has one output; got output_indices={output_indices}")
        s, cholesky, solved = self._factor()
        batch_shape = torch.broadcast_shapes(X.shape[:-2], self.batch_shape)
        X = X.expand(*batch_shape, *X.shape[-2:])
        train_X = self.train_X.expand(*batch_shape, *self.train_X.shape[-2:])
        cross = self.covar_module(train_X, X).to_dense()  # batch x n x q
        mean = self.prior_mean + (cross * (s * solved)[..., None]).sum(-2)
        projected = torch.linalg.solve_triangular(cholesky, s[..., None] * cross, upper=False)
        covariance = self.covar_module(X).to_dense() - projected.transpose(-1, -2) @ projected
        identity = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        if observation_noise is True:
            covariance = covariance + self.noise * identity
        elif isinstance(observation_noise, Tensor):
            covariance = covariance + torch.diag_embed(observation_noise.squeeze(-1))
        posterior = GPyTorchPosterior(MultivariateNormal(mean, covariance + 1e-9 * identity))
        if hasattr(self, "outcome_transform"):
            posterior = self.outcome_transform.untransform_posterior(posterior, X=X)
        return posterior_transform(posterior) if posterior_transform is not None else posterior

    def subset_output(self, idcs: list[int]) -> "RobustConjugateGP":
        """A copy of the model, as ``SingleTaskGP`` returns for its only output: ``idcs`` must be ``[0]``."""
        if list(idcs) != [0]:
            raise ValueError(f"RobustConjugateGP.subset_output: one output, so `idcs` must be [0], got {idcs}")
        return self._with_data(self.train_X, self.train_Y)

    def condition_on_observations(self, X: Tensor, Y: Tensor, noise: Tensor | None = None) -> "RobustConjugateGP":
        """The model with ``(X, Y)`` added to its data and every hyperparameter kept (see the module docstring).

        ``X`` is ``batch_shape x n' x d``, ``Y`` ``batch_shape' x n' x 1`` on the outcomes' own scale (it goes through
        the outcome transform, with the statistics fitted at construction); the result's batch shape broadcasts the
        model's, ``X``'s and ``Y``'s. ``+-inf`` in ``Y`` is allowed, as in ``train_Y``, and NaN refused.
        """
        if noise is not None:
            raise ValueError(
                "RobustConjugateGP.condition_on_observations: `noise` must be None: the model has one fitted noise "
                "level sigma^2, scaled per point by its residual, and no per-observation noise to condition on. "
                "qJointEntropySearch passes it with its default condition_noiseless=True; pass "
                "condition_noiseless=False to use it"
            )
        d = self.train_X.shape[-1]
        if X.dim() < 2 or X.shape[-1] != d or Y.shape[-2:] != (X.shape[-2], 1):
            raise ValueError(
                f"RobustConjugateGP.condition_on_observations: `X` must be batch_shape x n' x {d} and `Y` "
                f"batch_shape' x n' x 1, got {tuple(X.shape)} and {tuple(Y.shape)}"
            )
        if torch.isnan(Y).any() or not torch.isfinite(X).all():
            raise ValueError("RobustConjugateGP.condition_on_observations: `Y` must not contain NaN and `X` be finite")
        self.eval()  # as in BoTorch's models: an outcome transform in eval mode reuses its fitted statistics
        if hasattr(self, "outcome_transform"):
            Y = self.outcome_transform(Y, X=X)[0]
        batch_shape = torch.broadcast_shapes(self.batch_shape, X.shape[:-2], Y.shape[:-2])

        def expanded(tensor: Tensor) -> Tensor:
            return tensor.expand(*batch_shape, *tensor.shape[-2:])

        train_X = torch.cat([expanded(self.train_X), expanded(X)], dim=-2)
        return self._with_data(train_X, torch.cat([expanded(self.train_Y), expanded(Y)], dim=-2))

    def fantasize(
        self, X: Tensor, sampler: MCSampler, observation_noise: Tensor | None = None, **kwargs
    ) -> "RobustConjugateGP":
        """BoTorch's ``fantasize``: the model conditioned on ``sampler``'s draws of noisy observations at ``X``.

        The result's batch shape is ``sampler.sample_shape x broadcast(X's batch shape, batch_shape)``. The draws
        carry the fitted noise ``sigma^2``; a given ``observation_noise`` is refused, like ``noise`` in
        :meth:`condition_on_observations`. ``propagate_grads`` is accepted and changes nothing: the model
        keeps no caches to detach, so gradients always reach ``X``.
        """
        if observation_noise is not None:
            raise ValueError(
                "RobustConjugateGP.fantasize: `observation_noise` must be None: fantasies carry the fitted noise "
                "sigma^2, and the model takes no per-observation noise"
            )
        kwargs.pop("propagate_grads", None)
        return self.condition_on_observations(X, sampler(self.posterior(X, observation_noise=True)), **kwargs)

    def _with_data(self, train_X: Tensor, train_Y: Tensor) -> "RobustConjugateGP":
        """A copy of the model (hyperparameters, ``c``, ``m``, outcome transform) on other, transformed, data.

        The data are left out of the copy: a fantasy model's data carry autograd history, which ``deepcopy`` refuses.
        """
        data = self.train_X, self.train_Y
        self.train_X = self.train_Y = None
        try:
            copy = deepcopy(self)
        finally:
            self.train_X, self.train_Y = data
        copy.train_X, copy.train_Y = train_X, train_Y
        return copy

    def leave_one_out_objective(self) -> Tensor:
        """RCGP's hyperparameter objective: weighted leave-one-out log predictive density (to maximise).

        ``sum_i (w_i / beta)^2 log N(z_i; mu_-i, v_-i)`` with ``mu_-i``, ``v_-i`` the closed-form
        leave-one-out predictive of the shifted targets under ``K_w``. The weight ``(w_i/beta)^2 =
        1 / (1 + r_i^2/c^2)`` makes an outlier's term vanish, so it cannot steer the hyperparameters;
        infinite observations are left out (their weight is exactly 0).
        """
        s, cholesky, solved = self._factor()
        inverse_diagonal = torch.cholesky_inverse(cholesky).diagonal(dim1=-2, dim2=-1)
        kept = s > 0
        # (z_i - mu_-i)^2 / v_-i = [A^-1 S z]_i^2 / [A^-1]_ii and v_-i = 1 / (s_i^2 [A^-1]_ii).
        standardized = solved[kept] ** 2 / inverse_diagonal[kept]
        log_variance = -torch.log(s[kept] ** 2 * inverse_diagonal[kept])
        log_density = -0.5 * (math.log(2 * math.pi) + log_variance + standardized)
        return (self.weights()[kept] ** 2 * log_density).sum()

    def log_prior(self) -> Tensor:
        """Log-density of the kernel's hyperparameter priors (GPyTorch ``named_priors``), 0 without any."""
        total = torch.zeros((), dtype=self.train_X.dtype, device=self.train_X.device)
        for _, module, prior, closure, _ in self.covar_module.named_priors():
            total = total + prior.log_prob(closure(module)).sum()
        return total

    def fit_objective(self) -> Tensor:
        """What :meth:`fit` maximises: :meth:`leave_one_out_objective` plus :meth:`log_prior`."""
        return self.leave_one_out_objective() + self.log_prior()

    def fit(self, max_iter: int = 50) -> "RobustConjugateGP":
        """Fit the kernel hyperparameters and ``sigma^2`` by L-BFGS, maximising :meth:`fit_objective`."""
        parameters = [p for p in self.parameters() if p.requires_grad]
        start = [p.detach().clone() for p in parameters]
        optimizer = torch.optim.LBFGS(parameters, max_iter=max_iter, line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            loss = -self.fit_objective()
            loss.backward()
            return loss

        try:
            optimizer.step(closure)
            fitted = all(torch.isfinite(p).all() for p in parameters)
        except torch.linalg.LinAlgError:  # a step into a numerically singular region
            fitted = False
        if not fitted:  # keep the starting values rather than a broken fit
            with torch.no_grad():
                for parameter, value in zip(parameters, start, strict=True):
                    parameter.copy_(value)
        return self
