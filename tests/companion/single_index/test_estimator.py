import warnings

import numpy as np
import pytest
import torch
from sklearn.model_selection import cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from hf_ext.companion.single_index import (
    NonGaussianInputWarning,
    SingleIndexRegressor,
    direction_with_overlap,
    gaussian_single_index,
    link_coefficients,
)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Problems this small run 10x slower on two threads of two busy cores (0.27 s vs 2.4 s for one fit)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# All of scikit-learn's checks apply: n < d raises with the "n_samples = 1" wording check_fit2d_1sample expects.
@parametrize_with_checks([SingleIndexRegressor(max_degree=3, max_iter=20, random_state=0)])
def test_scikit_learn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonGaussianInputWarning)  # the checks feed uniform and shifted data
        check(estimator)


def test_recovers_a_known_link_and_its_direction():
    X, y, w_star = gaussian_single_index(2000, 32, "he2+he3", noise=0.1, seed=0)
    model = SingleIndexRegressor(random_state=0).fit(X, y, w_star=w_star)
    sign = np.sign(model.direction_ @ w_star)  # (w, phi) and (-w, phi(-.)) are one predictor
    assert abs(model.direction_ @ w_star) > 0.99
    coefs = model.hermite_coefs_ * sign ** np.arange(len(model.hermite_coefs_))
    np.testing.assert_allclose(coefs[:4], link_coefficients("he2+he3", 3), atol=0.03)
    X_test, y_test, _ = gaussian_single_index(2000, 32, "he2+he3", noise=0.1, seed=1, w_star=w_star)
    assert np.mean((model.predict(X_test) - y_test) ** 2) < 1.1 * 0.1**2  # the noise's variance: nothing left to learn


def test_exponent_two_link_is_learned_from_a_negative_start():
    X, y, w_star = gaussian_single_index(3000, 64, "he2", noise=0.1, seed=0)
    w_init = direction_with_overlap(w_star, -0.3, seed=1)
    model = SingleIndexRegressor(random_state=0).fit(X, y, w_init=w_init, w_star=w_star)
    assert model.overlap_history_[0] == pytest.approx(-0.3)
    assert abs(model.overlap_history_[-1]) > 0.95
    assert len(model.hermite_coef_history_) == model.n_iter_ + 1


def test_the_oracle_learns_only_the_direction_with_the_given_link():
    X, y, w_star = gaussian_single_index(2000, 32, "he1", noise=0.1, seed=0)
    oracle = SingleIndexRegressor(fixed_link=link_coefficients("he1", 1), random_state=0)
    oracle.fit(X, y, w_init=direction_with_overlap(w_star, -0.5, seed=1), w_star=w_star)
    assert oracle.overlap_history_[-1] > 0.99  # the planted exponent-1 link pulls w to +w*, through 0
    np.testing.assert_array_equal(oracle.hermite_coefs_, [0, 1])


def test_works_in_cross_val_score():
    X, y, _ = gaussian_single_index(500, 8, "he1", noise=0.1, seed=0)
    scores = cross_val_score(SingleIndexRegressor(max_iter=50, random_state=0), X, y, cv=3)
    assert scores.min() > 0.95


@pytest.mark.parametrize(
    ("fit_kwargs", "message"),
    [
        ({"X": np.zeros((5, 8)), "y": np.zeros(5)}, r"samples as features, got n_samples = 5 < n_features = 8"),
        ({"X": np.full((20, 3), np.nan)}, "Input X contains NaN"),
        ({"y": np.full(20, np.inf)}, "Input y contains infinity"),
        ({"w_init": np.zeros(3)}, r"`w_init` must be a finite nonzero vector of shape \(3,\)"),
        ({"w_star": np.ones(4)}, r"`w_star` must be a finite nonzero vector of shape \(3,\)"),
    ],
)
def test_bad_data_raises_a_clear_value_error(fit_kwargs, message):
    rng = np.random.default_rng(0)
    data = {"X": rng.standard_normal((20, 3)), "y": rng.standard_normal(20)} | fit_kwargs
    with pytest.raises(ValueError, match=message):
        SingleIndexRegressor(max_iter=2).fit(data.pop("X"), data.pop("y"), **data)


def test_predict_refuses_another_dimension():
    X, y, _ = gaussian_single_index(50, 4, "he1", seed=0)
    model = SingleIndexRegressor(max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="X has 5 features, but SingleIndexRegressor is expecting 4"):
        model.predict(np.zeros((3, 5)))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"learning_rate": float("nan")}, "`learning_rate` must be a finite number, got nan"),
        ({"learning_rate": 0.0}, r"`learning_rate` must be > 0, got 0.0"),
        ({"link_step": 1.5}, r"`link_step` must be in \(0, 1\], got 1.5"),
        ({"ridges": (1e-3, -1.0)}, "`ridges` must be a non-empty sequence of numbers > 0"),
        ({"ridges": (float("inf"),)}, "`ridges` must be a finite number"),
        ({"max_degree": 0}, "`max_degree` must be an integer >= 1, got 0"),
        ({"validation_fraction": 1.0}, r"`validation_fraction` must be in \[0, 1\), got 1.0"),
        ({"fixed_link": [0.0, np.nan]}, "`fixed_link` must be a finite 1-d array"),
    ],
)
def test_bad_hyperparameters_name_the_parameter_and_the_allowed_values(params, message):
    X, y, _ = gaussian_single_index(50, 4, "he1", seed=0)
    with pytest.raises(ValueError, match=message):
        SingleIndexRegressor(**params).fit(X, y)


def test_non_gaussian_inputs_warn_and_gaussian_ones_do_not():
    X, y, _ = gaussian_single_index(2000, 16, "he1", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonGaussianInputWarning)
        SingleIndexRegressor(max_iter=2).fit(X, y)
    uniform = np.random.default_rng(0).uniform(-np.sqrt(3), np.sqrt(3), X.shape)  # mean 0, variance 1
    with pytest.warns(NonGaussianInputWarning, match=r"column \d+ has excess kurtosis -1\.\d"):
        SingleIndexRegressor(max_iter=2).fit(uniform, y)
    with pytest.warns(NonGaussianInputWarning, match=r"column 0 has mean (2\.9|3)"):
        SingleIndexRegressor(max_iter=2).fit(X + np.eye(16)[0] * 3, y)


def test_string_targets_are_refused_by_name():
    X = np.random.default_rng(0).standard_normal((20, 3))
    with pytest.raises(ValueError, match="`y` must be numeric regression targets, got dtype <U3"):
        SingleIndexRegressor(max_iter=2).fit(X, np.array(["1.0"] * 20))
