import logging

import numpy as np
import pytest

from hf_ext.companion.es import ESConfig, SepCMAES, log_weights, minimize


def sphere(x):
    return float(x @ x)


def ellipsoid(x):
    return float((1e6 ** (np.arange(x.size) / (x.size - 1)) * x**2).sum())


@pytest.mark.parametrize("function", [sphere, ellipsoid])
@pytest.mark.parametrize("weights", ["log", "rb_pem", "probe_switch"])
def test_converges_on_noiseless_functions(function, weights):
    result = minimize(function, np.full(8, 3.0), ESConfig(weights=weights, max_evaluations=6000, restarts="none"))
    assert result["fbest"] < 1e-8


def test_one_generation_against_hand_computation():
    config = ESConfig(popsize=4, sigma0=0.5, lower=-np.inf, upper=np.inf)
    es = SepCMAES(np.zeros(2), config)
    X = es.ask()
    values = np.array([3.0, 1.0, 2.0, 4.0])
    es.tell(X, values)
    n, w = 2, log_weights(4)  # w = [a, 1 - a, 0, 0] on ranks; candidates 1 then 2 are the best two
    mu_eff = 1 / (w**2).sum()
    y = X / 0.5
    y_w = w[0] * y[1] + w[1] * y[2]
    np.testing.assert_allclose(es.mean, 0.5 * y_w)
    c_s = (mu_eff + 2) / (n + mu_eff + 5)
    d_s = 1 + 2 * max(0, np.sqrt((mu_eff - 1) / (n + 1)) - 1) + c_s
    p_s = np.sqrt(c_s * (2 - c_s) * mu_eff) * y_w
    chi = np.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n**2))
    np.testing.assert_allclose(es.p_sigma, p_s)
    np.testing.assert_allclose(es.sigma, 0.5 * np.exp(c_s / d_s * (np.linalg.norm(p_s) / chi - 1)))
    c_c = (4 + mu_eff / n) / (n + 4 + 2 * mu_eff / n)
    c1 = 2 / ((n + 1.3) ** 2 + mu_eff) * (n + 2) / 3
    c_mu = min(1 - c1, 2 * (mu_eff - 2 + 1 / mu_eff) / ((n + 2) ** 2 + mu_eff) * (n + 2) / 3)
    h = float(np.linalg.norm(p_s) / np.sqrt(1 - (1 - c_s) ** 2) < (1.4 + 2 / 3) * chi)
    p_c = h * np.sqrt(c_c * (2 - c_c) * mu_eff) * y_w
    expected = (
        (1 - c1 - c_mu + (1 - h) * c1 * c_c * (2 - c_c)) + c1 * p_c**2 + c_mu * (w[0] * y[1] ** 2 + w[1] * y[2] ** 2)
    )
    np.testing.assert_allclose(es.diag, expected)


def test_candidates_stay_in_the_box():
    es = SepCMAES(np.full(3, 4.9), ESConfig(sigma0=5.0, lower=-5, upper=5))
    X = es.ask()
    assert X.min() >= -5 and X.max() <= 5


def test_tell_counts_nan_as_worst_and_refuses_a_wrong_count():
    es = SepCMAES(np.zeros(2), ESConfig(popsize=4))
    X = es.ask()
    with pytest.raises(ValueError, match="expected 4 values"):
        es.tell(X, [1.0, 2.0])
    es.tell(X, [np.nan, 1.0, 2.0, 3.0])
    assert es.result["fbest"] == 1.0 and es.generation == 1


def test_resampling_evaluates_each_candidate_k_times():
    es = SepCMAES(np.zeros(2), ESConfig(popsize=4, resamples=3))
    X = es.ask()
    assert len(X) == 12 and (X[0] == X[1]).all()


def test_reevaluations_never_exceed_the_cap_per_generation():
    rng = np.random.default_rng(0)
    config = ESConfig(weights="rb_pem", popsize=10, band=5, max_reevaluations=3, lower=-np.inf, upper=np.inf)
    es = SepCMAES(np.ones(4), config)
    for _ in range(20):
        before = es.evaluations
        while es.generation == _:
            X = es.ask()
            es.tell(X, [sphere(x) + rng.standard_normal() for x in X])
        assert es.evaluations - before == 10 + 3  # the band holds 10 candidates; the cap allows 3


def test_minimize_keeps_the_budget_and_logs_nan(caplog):
    calls = []

    def function(x):
        calls.append(x)
        return np.nan if len(calls) == 5 else sphere(x)

    with caplog.at_level(logging.WARNING):
        result = minimize(function, np.ones(3), ESConfig(weights="rb_pem", max_evaluations=101))
    assert len(calls) == result["evaluations"] == 101
    assert result["nan_values"] == 1 and "NaN" in caplog.text


def test_ipop_restarts_double_the_population():
    result = minimize(sphere, np.ones(2), ESConfig(tolx=1e-2, max_evaluations=3000, max_restarts=3))
    assert result["restarts"] == 3


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"weights": "hard"}, r"`weights` must be one of \['log', 'rb_pem', 'probe_switch'\]"),
        ({"sigma0": float("nan")}, "`sigma0`"),
        ({"popsize": 1}, "`popsize` must be an integer >= 2"),
        ({"max_evaluations": 0}, "`max_evaluations` must be an integer >= 1"),
        ({"lower": 1.0, "upper": 0.0}, "`lower` must be < `upper`"),
        ({"restarts": "bipop"}, r"`restarts` must be one of \['ipop', 'none'\]"),
    ],
)
def test_config_refuses_bad_values(fields, message):
    with pytest.raises(ValueError, match=message):
        ESConfig(**fields)


@pytest.mark.parametrize("weights", ["rb_pem", "probe_switch"])
def test_state_dict_round_trip_continues_the_same_run(weights):
    def noisy(rng):
        return lambda x: sphere(x) * (1 + 0.3 * rng.standard_normal())

    def generations(es, function, count):
        for _ in range(count):
            start = es.generation
            while es.generation == start:
                X = es.ask()
                es.tell(X, [function(x) for x in X])

    config = ESConfig(weights=weights, seed=3)
    original = SepCMAES(np.ones(4), config)
    generations(original, noisy(np.random.default_rng(0)), 5)
    state = original.state_dict()
    resumed = SepCMAES(np.zeros(4), config)
    resumed.load_state_dict(state)
    generations(original, noisy(np.random.default_rng(1)), 5)
    generations(resumed, noisy(np.random.default_rng(1)), 5)
    np.testing.assert_array_equal(resumed.mean, original.mean)
    assert resumed.sigma == original.sigma and resumed.evaluations == original.evaluations
    original.ask()
    with pytest.raises(ValueError, match="between generations"):
        original.state_dict()
