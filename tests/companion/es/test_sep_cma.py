import numpy as np
import pytest

from hf_ext.companion.es import ESConfig, ESResult, SepCMAES, log_weights, minimize


def sphere(x):
    return float(x @ x)


def ellipsoid(x):
    return float((1e6 ** (np.arange(x.size) / (x.size - 1)) * x**2).sum())


@pytest.mark.parametrize("function", [sphere, ellipsoid])
@pytest.mark.parametrize("weights", ["log", "rb_pem", "unbiased_pem", "probe_switch"])
def test_converges_on_noiseless_functions(function, weights):
    result = minimize(function, np.full(8, 3.0), ESConfig(weights=weights, max_evaluations=6000, restarts="none"))
    assert result.fbest < 1e-8


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


@pytest.mark.parametrize("weights", ["log", "rb_pem", "unbiased_pem", "probe_switch"])
def test_the_budget_ends_inside_the_last_generation_on_an_uncapped_run_s_evaluations(weights):
    """Issue 72: ``ask`` returned the last generation whole, so a budget of 2500 spent 2504 evaluations. Now it asks
    only what the budget leaves, and those are the first evaluations of the same run without a budget."""

    def run(max_evaluations, stop_after):
        es = SepCMAES(np.full(5, 3.0), ESConfig(weights=weights, max_evaluations=max_evaluations, seed=1))
        noise = np.random.default_rng(0)
        rows, values = [], []
        while not es.stop() and len(values) < stop_after:
            X = es.ask()
            told = [sphere(x) + noise.standard_normal() for x in X]
            es.tell(X, told)
            rows, values = [*rows, *X], [*values, *told]
        return es, np.array(rows), np.array(values)

    capped, rows, values = run(101, np.inf)
    _, uncapped_rows, uncapped_values = run(None, 101)
    assert capped.evaluations == len(values) == 101 and capped.stop() == {"maxfevals": 101}
    np.testing.assert_array_equal(rows, uncapped_rows[:101])
    np.testing.assert_array_equal(values, uncapped_values[:101])
    assert capped.result.fbest == values.min() == values[capped.result.evals_best - 1]


def test_tell_counts_nan_as_worst_and_refuses_a_wrong_count():
    es = SepCMAES(np.zeros(2), ESConfig(popsize=4))
    with pytest.raises(ValueError, match=r"call ask\(\) first"):
        es.tell(np.zeros((4, 2)), [1.0, 2.0, 3.0, 4.0])
    X = es.ask()
    with pytest.raises(ValueError, match="expected 4 values"):
        es.tell(X, [1.0, 2.0])
    es.tell(X, [np.nan, 1.0, 2.0, 3.0])
    assert es.result.fbest == 1.0 and es.generation == 1


def test_tell_pairs_each_value_with_the_candidate_told_with_it():
    # The values of a population evaluated out of order (a process pool) belong to the rows as told.
    in_order, shuffled = (SepCMAES(np.ones(3), ESConfig(popsize=6, seed=1)) for _ in range(2))
    X = in_order.ask()
    np.testing.assert_array_equal(shuffled.ask(), X)
    in_order.tell(X, [sphere(x) for x in X])
    order = np.array([3, 0, 5, 1, 4, 2])
    shuffled.tell(X[order], [sphere(x) for x in X[order]])
    np.testing.assert_array_equal(shuffled.mean, in_order.mean)
    assert shuffled.sigma == in_order.sigma


def test_tell_pairs_reevaluations_with_their_candidates():
    config = ESConfig(weights="rb_pem", popsize=6, band=3, max_reevaluations=3, seed=2)
    in_order, reversed_ = SepCMAES(np.ones(3), config), SepCMAES(np.ones(3), config)
    X = in_order.ask()
    np.testing.assert_array_equal(reversed_.ask(), X)
    for es in (in_order, reversed_):
        es.tell(X, [sphere(x) for x in X])
    again = in_order.ask()
    np.testing.assert_array_equal(reversed_.ask(), again)
    assert len(again) == 3 and in_order.generation == 0
    in_order.tell(again, [sphere(x) + i for i, x in enumerate(again)])
    reversed_.tell(again[::-1], [sphere(x) + i for i, x in enumerate(again)][::-1])
    np.testing.assert_array_equal(reversed_.mean, in_order.mean)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda X: X + 1e-9, r"`candidates` must be the rows of the last ask\(\) \(in any order\)"),
        (lambda X: np.vstack([X[:1], X[:-1]]), "rows of the last ask"),  # one row twice, one missing
        (lambda X: X[:, :2], r"`candidates` must have the shape of the last ask\(\), \(4, 3\)"),
    ],
)
def test_tell_refuses_candidates_the_last_ask_did_not_return(change, message):
    es = SepCMAES(np.ones(3), ESConfig(popsize=4))
    X = es.ask()
    with pytest.raises(ValueError, match=message):
        es.tell(change(X), [sphere(x) for x in X])
    es.tell(X, [sphere(x) for x in X])  # the refused tell changed nothing
    assert es.generation == 1 and es.evaluations == 4


def test_result_has_pycma_names_and_the_best_evaluated_point():
    es = SepCMAES(np.full(4, 2.0), ESConfig(popsize=6, seed=5))
    assert es.result.xbest is None and es.result.fbest == np.inf and es.result.evals_best == 0
    evaluated = []
    for _ in range(30):
        X = es.ask()
        values = [sphere(x) for x in X]
        evaluated += list(zip(values, X, strict=True))
        es.tell(X, values)
    result = es.result
    assert isinstance(result, ESResult)
    assert result.fbest == min(value for value, _ in evaluated) == sphere(result.xbest)
    value, x = evaluated[result.evals_best - 1]
    assert value == result.fbest and np.array_equal(x, result.xbest)
    assert (result.evaluations, result.iterations) == (180, 30)
    np.testing.assert_array_equal(result.xfavorite, es.mean)
    np.testing.assert_allclose(result.stds, es.sigma * np.sqrt(es.diag))


@pytest.mark.parametrize(
    ("x0", "message"),
    [
        ([1.0, np.nan, 0.0], r"SepCMAES: `x0` must be a finite number"),
        ([1.0, np.inf], r"SepCMAES: `x0` must be a finite number"),
        ([], r"SepCMAES: `x0` must be a non-empty 1-D sequence of numbers, got shape \(0,\)"),
        ([[1.0, 2.0], [3.0, 4.0]], r"`x0` must be a non-empty 1-D sequence of numbers, got shape \(2, 2\)"),
        (3.0, r"`x0` must be a non-empty 1-D sequence of numbers, got shape \(\)"),
    ],
)
def test_refuses_a_bad_x0_at_construction(x0, message):
    with pytest.raises(ValueError, match=message):
        SepCMAES(x0, ESConfig())


def test_refuses_an_x0_outside_the_box_naming_the_entries():
    """Issue 72: ``SepCMAES([100, 100], ESConfig())`` was clipped to the box's corner without a word."""
    with pytest.raises(ValueError, match=r"SepCMAES: `x0` must lie in the box \[lower, upper\] = \[-5.0, 5.0\] .*"
                       r"entries \[1\] are outside \(\[100.0\]\)"):
        SepCMAES([0.0, 100.0], ESConfig())
    SepCMAES([-5.0, 5.0], ESConfig())  # its faces are inside


def test_refuses_an_x0_that_is_not_numbers_by_name():
    """Issue 72: numpy's ``could not convert string to float`` named no argument."""
    with pytest.raises(TypeError, match=r"SepCMAES: `x0` must be a non-empty 1-D sequence of numbers, got 'bogus'"):
        SepCMAES("bogus", ESConfig())


def test_refuses_a_config_made_bad_after_its_construction():
    config = ESConfig()
    config.sigma0 = float("inf")
    with pytest.raises(ValueError, match="ESConfig: `sigma0` must be a finite number"):
        SepCMAES(np.zeros(2), config)
    with pytest.raises(TypeError, match="SepCMAES: `config` must be an ESConfig, got dict"):
        SepCMAES(np.zeros(2), {"sigma0": 1.0})


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


@pytest.mark.parametrize("weights", ["rb_pem", "unbiased_pem"])
def test_a_generation_whose_reevaluations_cover_every_candidate_ends(weights):
    # A cap at the population size re-evaluates all of it: that second round must end the generation, not be
    # taken for a new population's first evaluations (which froze the run at its first population).
    rng = np.random.default_rng(0)
    config = ESConfig(weights=weights, popsize=6, band=6, max_reevaluations=6, lower=-np.inf, upper=np.inf)
    es = SepCMAES(np.ones(4), config)
    for generation in range(3):
        X = es.ask()
        es.tell(X, [sphere(x) + rng.standard_normal() for x in X])
        assert es.generation == generation
        X = es.ask()
        assert len(X) == 6
        es.tell(X, [sphere(x) + rng.standard_normal() for x in X])
        assert es.generation == generation + 1 and es.evaluations == 12 * (generation + 1)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"weights": "hard"}, r"`weights` must be one of \['log', 'rb_pem', 'unbiased_pem', 'probe_switch'\]"),
        ({"weights": "unbiased_pem", "resamples": 2}, "`resamples` must be 1 with weights='unbiased_pem', got 2"),
        ({"weights": "unbiased_pem", "max_reevaluations": 13}, "`max_reevaluations` must be <= 12 with weights="),
        ({"sigma0": float("nan")}, "`sigma0`"),
        ({"sigma0": float("inf")}, "`sigma0` must be a finite number"),
        ({"popsize": 1}, "`popsize` must be an integer >= 2"),
        ({"max_evaluations": 0}, "`max_evaluations` must be an integer >= 1"),
        ({"lower": 1.0, "upper": 0.0}, "`lower` must be < `upper`"),
        ({"restarts": "bipop"}, r"`restarts` must be one of \['ipop', 'none'\]"),
        ({"seed": -1}, "`seed` must be an integer >= 0, got -1"),  # issue 72: numpy's error at the first ask
    ],
)
def test_config_refuses_bad_values(fields, message):
    with pytest.raises(ValueError, match=message):
        ESConfig(**fields)


@pytest.mark.parametrize("weights", ["rb_pem", "unbiased_pem", "probe_switch"])
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
