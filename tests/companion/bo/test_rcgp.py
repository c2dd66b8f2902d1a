import math

import pytest
import torch
from botorch.acquisition import (
    UpperConfidenceBound,
    qKnowledgeGradient,
    qLogNoisyExpectedImprovement,
    qMaxValueEntropy,
    qNoisyExpectedImprovement,
)
from botorch.acquisition.joint_entropy_search import qJointEntropySearch
from botorch.fit import fit_gpytorch_mll
from botorch.models.transforms import Standardize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.kernels import MaternKernel, ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

from hf_ext.companion.bo import RCGPFactory, RobustConjugateGP, UCBFactory, adaptive_threshold
from hf_ext.companion.bo.rcgp import robust_scale

C = 1.5


def _data(n=12, seed=0):
    generator = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    Y = torch.sin(5 * X[:, :1]) + 0.1 * torch.randn(n, 1, generator=generator, dtype=torch.float64)
    Y[2] += 4.0  # a moderate outlier: down-weighted, not removed
    return X, Y


def _model(X, Y, c=C, **kwargs):
    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=2))  # any GPyTorch kernel
    model = RobustConjugateGP(X, Y, c=c, prior_mean=0.1, noise=0.05, covar_module=kernel, **kwargs)
    model.covar_module.base_kernel.lengthscale = torch.tensor([[0.3, 0.6]])
    model.covar_module.outputscale = 0.8
    return model


def _paper_posterior(model, X_test):
    """RCGP's formulas as written: w, J_w = sigma^2/2 w^-2, K_w = K + sigma^2 J_w, m_w = m + sigma^2 d/dy log w^2."""
    sigma2 = model.noise.detach()
    beta = (sigma2 / 2).sqrt()
    residual = model.train_Y.squeeze(-1) - model.prior_mean
    w = beta * (1 + residual**2 / model.c**2) ** -0.5
    K = model.covar_module(model.train_X).to_dense().detach()
    K_w = K + sigma2 * torch.diag(sigma2 / 2 * w**-2)
    m_w = model.prior_mean + sigma2 * (-2 * residual / (model.c**2 + residual**2))
    k = model.covar_module(model.train_X, X_test).to_dense().detach()
    mean = model.prior_mean + k.T @ torch.linalg.solve(K_w, model.train_Y.squeeze(-1) - m_w)
    covariance = model.covar_module(X_test).to_dense().detach() - k.T @ torch.linalg.solve(K_w, k)
    return mean, covariance


def test_posterior_matches_the_dense_formulas():
    X, Y = _data()
    model = _model(X, Y)
    X_test = torch.rand(7, 2, dtype=torch.float64)
    posterior = model.posterior(X_test)
    mean, covariance = _paper_posterior(model, X_test)
    torch.testing.assert_close(posterior.mean.squeeze(-1).detach(), mean)
    torch.testing.assert_close(posterior.mvn.covariance_matrix.detach(), covariance, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("outlier", [math.inf, -math.inf, 1e300])
def test_an_infinite_outlier_has_no_influence_and_no_nan(outlier):
    X, Y = _data()
    X_test = torch.rand(5, 2, dtype=torch.float64)
    clean = _model(X, Y).posterior(X_test)
    corrupted_model = _model(
        torch.cat([X, torch.rand(1, 2, dtype=torch.float64)]),
        torch.cat([Y, torch.tensor([[outlier]], dtype=torch.float64)]),
    )
    corrupted = corrupted_model.posterior(X_test)
    assert corrupted_model.weights()[-1] == pytest.approx(0, abs=1e-290)
    assert torch.isfinite(corrupted.mean).all() and torch.isfinite(corrupted.variance).all()
    torch.testing.assert_close(corrupted.mean, clean.mean)
    torch.testing.assert_close(corrupted.variance, clean.variance)
    assert math.isfinite(corrupted_model.leave_one_out_objective().item())


def test_huge_c_is_the_standard_gp_with_noise_sigma_squared():
    X, Y = _data()
    model = _model(X, Y, c=1e9)
    X_test = torch.rand(6, 2, dtype=torch.float64)
    K = model.covar_module(X).to_dense().detach() + model.noise.detach() * torch.eye(len(X), dtype=torch.float64)
    k = model.covar_module(X, X_test).to_dense().detach()
    mean = model.prior_mean + k.T @ torch.linalg.solve(K, Y.squeeze(-1) - model.prior_mean)
    variance = model.covar_module(X_test).to_dense().detach().diagonal() - (k * torch.linalg.solve(K, k)).sum(0)
    posterior = model.posterior(X_test)
    torch.testing.assert_close(posterior.mean.squeeze(-1).detach(), mean)
    torch.testing.assert_close(posterior.variance.squeeze(-1).detach(), variance, atol=1e-8, rtol=1e-6)


def test_leave_one_out_objective_equals_refitting_without_each_point():
    X, Y = _data(n=9)
    model = _model(X, Y)
    sigma2 = model.noise.detach()
    residual = Y.squeeze(-1) - model.prior_mean
    noise = sigma2 * (1 + residual**2 / model.c**2)
    targets = residual * (1 + 2 * sigma2 / (model.c**2 + residual**2))
    K_w = model.covar_module(X).to_dense().detach() + torch.diag(noise)
    total = 0.0
    for i in range(len(X)):
        rest = [j for j in range(len(X)) if j != i]
        solve = torch.linalg.solve(K_w[rest][:, rest], torch.stack([targets[rest], K_w[rest, i]], dim=1))
        mean = K_w[i, rest] @ solve[:, 0]
        variance = K_w[i, i] - K_w[i, rest] @ solve[:, 1]
        log_density = torch.distributions.Normal(mean, variance.sqrt()).log_prob(targets[i])
        total += (1 + residual[i] ** 2 / model.c**2) ** -1 * log_density
    assert model.leave_one_out_objective().item() == pytest.approx(total.item(), rel=1e-8)


def test_fit_improves_the_objective_and_works_with_botorch_acquisitions():
    X, Y = _data(n=20)
    Y[5] = math.inf
    model = RobustConjugateGP(X, Y, c=C)
    before = model.leave_one_out_objective().item()
    model.fit()
    assert model.leave_one_out_objective().item() > before
    acquisition = UpperConfidenceBound(model, beta=4.0)
    values = acquisition(torch.rand(10, 1, 2, dtype=torch.float64))
    assert values.shape == (10,) and torch.isfinite(values).all()
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    candidate, _ = optimize_acqf(acquisition, bounds, q=1, num_restarts=2, raw_samples=32)
    assert candidate.shape == (1, 2) and ((candidate >= 0) & (candidate <= 1)).all()


def test_adaptive_threshold_is_a_quantile_of_the_residuals_and_stays_finite():
    residuals = torch.arange(1.0, 101.0)
    assert adaptive_threshold(residuals, epsilon=0.05, max_scales=10.0) == 95.0
    assert adaptive_threshold(residuals, epsilon=0.05) == pytest.approx(3 * robust_scale(residuals))  # capped
    assert adaptive_threshold(torch.tensor([1.0, -2.0, math.inf, math.inf]), epsilon=0.05) == 2.0
    X, Y = _data()
    assert RobustConjugateGP(X, Y).c == adaptive_threshold(Y.squeeze(-1) - Y.median())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"train_Y": torch.tensor([[float("nan")]] * 12, dtype=torch.float64)}, "must not contain NaN"),
        ({"train_Y": torch.zeros(12, dtype=torch.float64)}, "`train_Y` batch_shape x n x 1"),
        ({"c": 0.0}, "`c` must be a finite positive number or None"),
        ({"c": math.inf}, "`c` must be a finite positive number or None"),
        ({"epsilon": 1.0}, r"`epsilon` must be in \(0, 1\)"),
        ({"noise": 0.0}, r"`noise` must be in \(0.0001, 1\), where its fit keeps it, got 0.0"),
        ({"noise": -1.0}, r"`noise` must be in \(0.0001, 1\)"),
        ({"noise": 2.5}, r"`noise` must be in \(0.0001, 1\)"),
        ({"noise": math.nan}, r"`noise` must be in \(0.0001, 1\)"),
        ({"prior_mean": math.nan}, "`prior_mean` must be a finite number"),
        ({"prior_mean": math.inf}, "`prior_mean` must be a finite number"),
    ],
)
def test_bad_input_names_the_field(kwargs, message):
    """Issue 72 added the noise and the prior mean: a noise outside the fit's interval made its raw parameter NaN or
    infinite, and a NaN prior mean every residual NaN, without a word."""
    X, Y = _data()
    with pytest.raises(ValueError, match=message):
        RobustConjugateGP(**{"train_X": X, "train_Y": Y} | kwargs)


@pytest.mark.parametrize("name", ["c", "epsilon", "prior_mean", "noise"])
def test_a_setting_that_is_not_a_number_is_refused_by_name(name):
    """Issue 72: a string failed in a comparison (``'<' not supported``) or in torch, naming nothing."""
    X, Y = _data()
    with pytest.raises(TypeError, match=rf"RobustConjugateGP: `{name}` must be a number"):
        RobustConjugateGP(X, Y, **{name: "0.5"})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: RCGPFactory(c=-1.0), r"RCGPFactory: `c` must be a finite positive number or None, got -1.0"),
        (lambda: RCGPFactory(c=math.nan), r"RCGPFactory: `c` must be a (finite number|number)"),
        (lambda: RCGPFactory(epsilon=0.0), r"RCGPFactory: `epsilon` must be in \(0, 1\), got 0.0"),
        (lambda: RCGPFactory(epsilon="0.05"), r"RCGPFactory: `epsilon` must be a number, got '0.05'"),
        (lambda: RCGPFactory(max_iter=0), r"RCGPFactory: `max_iter` must be an integer >= 1, got 0"),
        (lambda: RCGPFactory(max_iter=2.5), r"RCGPFactory: `max_iter` must be an integer, got 2.5"),
        (lambda: UCBFactory(0), r"UCBFactory: `dim` must be an integer >= 1, got 0"),
        (lambda: UCBFactory("2"), r"UCBFactory: `dim` must be an integer, got '2'"),
        (lambda: UCBFactory(2, beta_scale=-1.0), r"UCBFactory: `beta_scale` must be > 0, got -1.0"),
        (lambda: UCBFactory(2, beta_scale=math.nan), r"UCBFactory: `beta_scale` must be a finite number"),
    ],
)
def test_the_factories_refuse_bad_settings_at_construction(make, message):
    """Issue 72: ``RCGPFactory`` and ``UCBFactory`` took any value and failed (or computed NaN) at the first fit."""
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_adaptive_threshold_stays_on_the_clean_scale_when_more_than_epsilon_is_corrupted():
    # 30 points of a smooth 1-D function, 3 of them (10% > epsilon = 5%) corrupted: +inf, +inf, -1e300.
    X = torch.linspace(0, 1, 30, dtype=torch.float64)[:, None]
    clean_Y = torch.sin(6 * X)
    corrupted = [4, 17, 25]
    Y = clean_Y.clone()
    Y[corrupted] = torch.tensor([[math.inf], [math.inf], [-1e300]], dtype=torch.float64)
    model = RobustConjugateGP(X, Y, noise=1e-3)  # adaptive: before the fix, c ~ 1e300 and c**2 overflowed
    assert model.c < 1.2 * 3 * robust_scale(clean_Y - clean_Y.median())
    model.fit(max_iter=10)
    kept = [i for i in range(30) if i not in corrupted]
    clean = RobustConjugateGP(X[kept], clean_Y[kept], c=1e9, prior_mean=model.prior_mean, noise=model.noise.item())
    clean.covar_module.load_state_dict(model.covar_module.state_dict())  # the standard GP, same hyperparameters
    X_test = torch.rand(20, 1, dtype=torch.float64)
    with torch.no_grad():
        robust, standard = model.posterior(X_test), clean.posterior(X_test)
    assert torch.isfinite(robust.mean).all() and torch.isfinite(robust.variance).all()
    assert (robust.mean - standard.mean).abs().max() < 0.05  # the function spans [-1, 1]
    assert (robust.variance.sqrt() - standard.variance.sqrt()).abs().max() < 0.05


def test_robust_scale_survives_clustering_that_collapses_the_mad_and_a_few_corruptions():
    # BO's samples: 40 near the optimum, 20 spread over the objective's range (standard deviation ~ 1).
    generator = torch.Generator().manual_seed(0)
    clustered = torch.cat([1e-3 * torch.randn(40, generator=generator), torch.randn(20, generator=generator)])
    mad = 1.4826 * (clustered - clustered.median()).abs().median().item()
    assert mad < 0.002 and robust_scale(clustered) > 30 * mad  # the MAD sees the cluster's width only
    normal = torch.randn(200, generator=generator)
    assert robust_scale(normal) == pytest.approx(1.0, abs=0.15)
    corrupted = torch.cat([normal, torch.tensor([math.inf, -math.inf, 1e300, -1e300, 1e6])])
    assert robust_scale(corrupted) == pytest.approx(robust_scale(normal), rel=0.05)
    assert robust_scale(torch.tensor([3.0, math.inf])) == 0.0


# BoTorch's model API: what acquisition functions beyond UCB call on the model.

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


def _posterior_moments(model, X):
    with torch.no_grad():
        posterior = model.posterior(X)
    return posterior.mean, posterior.variance


@pytest.mark.parametrize("acquisition_class", [qLogNoisyExpectedImprovement, qNoisyExpectedImprovement])
@pytest.mark.filterwarnings("ignore:qNoisyExpectedImprovement has known numerical issues")
def test_noisy_expected_improvement_takes_the_training_inputs_as_baseline(acquisition_class):
    X, Y = _data()
    Y[4] = math.inf
    model = _model(X, Y)
    assert model.train_inputs[0] is model.train_X and model.train_targets.shape == (len(X),)
    acquisition = acquisition_class(model, X_baseline=model.train_inputs[0])
    candidates, value = optimize_acqf(acquisition, BOUNDS, q=2, num_restarts=2, raw_samples=16)
    assert candidates.shape == (2, 2) and ((candidates >= 0) & (candidates <= 1)).all()
    assert torch.isfinite(value)


def test_conditioning_is_the_model_on_the_concatenated_data():
    X, Y = _data()
    model = _model(X, Y)
    X_new = torch.rand(3, 2, dtype=torch.float64)
    Y_new = torch.tensor([[0.5], [math.inf], [-2.0]], dtype=torch.float64)  # an infinite one drops out, as in train_Y
    conditioned = model.condition_on_observations(X_new, Y_new)
    concatenated = _model(torch.cat([X, X_new]), torch.cat([Y, Y_new]))
    X_test = torch.rand(6, 2, dtype=torch.float64)
    for got, expected in zip(
        _posterior_moments(conditioned, X_test), _posterior_moments(concatenated, X_test), strict=True
    ):
        torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-8)
    assert len(model.train_X) == len(X)  # the model itself is unchanged


def test_fantasize_returns_a_batch_of_conditioned_models_with_gradients_to_x():
    X, Y = _data()
    model = _model(X, Y)
    X_new = torch.rand(2, 1, 2, dtype=torch.float64, requires_grad=True)  # two t-batches of one point
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([3]), seed=0)
    fantasy = model.fantasize(X_new, sampler)
    assert fantasy.batch_shape == (3, 2) and fantasy.train_inputs[0].shape == (3, 2, len(X) + 1, 2)
    X_test = torch.rand(4, 2, dtype=torch.float64)
    fantasy.posterior(X_test).mean.sum().backward()  # gradients reach the fantasized points, as qKG needs
    assert torch.isfinite(X_new.grad).all() and (X_new.grad != 0).any()
    one = model.condition_on_observations(X_new[1].detach(), fantasy.train_Y[2, 1, -1:].detach())
    mean, variance = _posterior_moments(fantasy, X_test)
    expected_mean, expected_variance = _posterior_moments(one, X_test)
    torch.testing.assert_close(mean[2, 1], expected_mean)
    torch.testing.assert_close(variance[2, 1], expected_variance)


@pytest.mark.parametrize("pending", [False, True])
def test_knowledge_gradient_through_optimize_acqf(pending):
    X, Y = _data()
    Y[4] = -math.inf
    model = _model(X, Y)
    X_pending = torch.rand(1, 2, dtype=torch.float64) if pending else None  # fantasized with the candidates
    acquisition = qKnowledgeGradient(model, num_fantasies=4, X_pending=X_pending)
    candidate, value = optimize_acqf(acquisition, BOUNDS, q=1, num_restarts=2, raw_samples=16, options={"maxiter": 20})
    assert candidate.shape == (1, 2) and ((candidate >= 0) & (candidate <= 1)).all()
    assert torch.isfinite(value)


def test_max_value_entropy_fantasizes_pending_points():
    X, Y = _data()
    model = _model(X, Y)
    candidate_set = torch.rand(32, 2, dtype=torch.float64)
    X_pending = torch.rand(2, 2, dtype=torch.float64)
    acquisition = qMaxValueEntropy(model, candidate_set, num_fantasies=4, X_pending=X_pending)
    assert acquisition.model.batch_shape == (4,)  # the model conditioned on 4 fantasies at the pending points
    candidate, value = optimize_acqf(acquisition, BOUNDS, q=1, num_restarts=2, raw_samples=16)
    assert candidate.shape == (1, 2) and torch.isfinite(value)


def test_joint_entropy_search_conditions_on_optima_with_the_model_noise_only():
    X, Y = _data()
    model = _model(X, Y)
    optimal_inputs = torch.rand(3, 2, dtype=torch.float64)  # num_optima x d, as posterior samples would give
    optimal_outputs = torch.full((3, 1), 2.0, dtype=torch.float64)
    with pytest.raises(ValueError, match="`noise` must be None.*qJointEntropySearch.*condition_noiseless=False"):
        qJointEntropySearch(model, optimal_inputs, optimal_outputs)  # noiseless conditioning needs a given noise
    acquisition = qJointEntropySearch(model, optimal_inputs, optimal_outputs, condition_noiseless=False)
    candidate, value = optimize_acqf(acquisition, BOUNDS, q=1, num_restarts=2, raw_samples=16)
    assert candidate.shape == (1, 2) and torch.isfinite(value)


def test_standardize_matches_manual_standardisation():
    X, Y = _data()
    Y = 100 + 30 * Y  # the outcomes' own scale
    transformed = _model(X, Y, outcome_transform=Standardize(m=1))
    mean, std = Y.mean(), Y.std()
    manual = _model(X, (Y - mean) / std)
    torch.testing.assert_close(transformed.train_targets, manual.train_targets)
    X_test = torch.rand(5, 2, dtype=torch.float64)
    got_mean, got_variance = _posterior_moments(transformed, X_test)
    manual_mean, manual_variance = _posterior_moments(manual, X_test)
    torch.testing.assert_close(got_mean, mean + std * manual_mean)
    torch.testing.assert_close(got_variance, std**2 * manual_variance)
    # New observations go through the statistics fitted at construction, not refitted ones.
    X_new, Y_new = torch.rand(2, 2, dtype=torch.float64), torch.tensor([[150.0], [40.0]], dtype=torch.float64)
    got_mean, _ = _posterior_moments(transformed.condition_on_observations(X_new, Y_new), X_test)
    manual_mean, _ = _posterior_moments(manual.condition_on_observations(X_new, (Y_new - mean) / std), X_test)
    torch.testing.assert_close(got_mean, mean + std * manual_mean)


def test_subset_output_of_the_single_output_is_a_copy():
    X, Y = _data()
    model = _model(X, Y)
    subset = model.subset_output([0])
    assert subset is not model and subset.covar_module is not model.covar_module
    X_test = torch.rand(4, 2, dtype=torch.float64)
    for got, expected in zip(_posterior_moments(subset, X_test), _posterior_moments(model, X_test), strict=True):
        torch.testing.assert_close(got, expected)
    with pytest.raises(ValueError, match=r"subset_output: one output, so `idcs` must be \[0\]"):
        model.subset_output([1])


def test_botorch_api_refuses_what_rcgp_cannot_hold():
    X, Y = _data()
    model = _model(X, Y)
    X_new, Y_new = torch.rand(1, 2, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="condition_on_observations: `noise` must be None"):
        model.condition_on_observations(X_new, Y_new, noise=torch.full_like(Y_new, 0.1))
    with pytest.raises(ValueError, match="`Y` must not contain NaN"):
        model.condition_on_observations(X_new, torch.full_like(Y_new, math.nan))
    with pytest.raises(ValueError, match="fantasize: `observation_noise` must be None"):
        model.fantasize(X_new, SobolQMCNormalSampler(torch.Size([2])), observation_noise=torch.full_like(Y_new, 0.1))
    with pytest.raises(ValueError, match="batched data .* need `c` and `prior_mean` given"):
        RobustConjugateGP(X.expand(2, *X.shape), Y.expand(2, *Y.shape))
    Y[3] = math.inf
    with pytest.raises(ValueError, match="`outcome_transform` \\(Standardize\\) turned `train_Y` into NaN"):
        RobustConjugateGP(X, Y, c=C, outcome_transform=Standardize(m=1))


def test_asking_for_a_likelihood_to_fit_says_rcgp_fits_itself():
    """Issue 72: fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model)) failed with a bare
    "object has no attribute 'likelihood'"."""
    model = _model(*_data())
    with pytest.raises(AttributeError, match=r"no marginal likelihood for BoTorch's fit_gpytorch_mll .* model.fit\(\)"):
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    assert getattr(model, "likelihood", None) is None  # BoTorch's probes for one still find none
