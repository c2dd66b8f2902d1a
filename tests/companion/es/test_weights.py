import numpy as np
import pytest

from hf_ext.companion.es import (
    LogWeights,
    ProbeAndSwitch,
    ResidualBootstrapPEM,
    UnbiasedPEM,
    elite_flip_rate,
    expected_weights,
    log_weights,
)


def test_log_weights_are_cma_es_positive_weights():
    w = log_weights(6)
    raw = np.log(3.5) - np.log([1, 2, 3])
    np.testing.assert_allclose(w, np.r_[raw / raw.sum(), 0, 0, 0])


def test_expected_weights_equal_hard_weights_when_noise_is_zero():
    values = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    base = log_weights(6)
    hard = LogWeights()([np.array([v]) for v in values], base)
    assert hard[1] == base[0] and hard[4] == 0
    np.testing.assert_allclose(expected_weights(np.tile(values, (32, 1)), base), hard, rtol=1e-12)
    # RB-PEM on noiseless re-evaluations: a zero noise model, so every replicate is the observed ranking
    pem = ResidualBootstrapPEM(replicates=32, band=2, max_reevaluations=4, pool_size=50)
    evaluations = [np.array([v, v]) if i in (0, 3) else np.array([v]) for i, v in enumerate(values)]
    population = np.random.default_rng(0).standard_normal((6, 2))
    np.testing.assert_allclose(pem(evaluations, base, population), hard, rtol=1e-12)
    assert pem.scale == (0.0, 0.0) and pem.last_flip_rate == 0.0


def test_pem_preserves_the_mean_update_and_shrinks_its_dispersion():
    # Rao-Blackwellization: with replicates drawn from the same noise, E[PEM update] = E[hard update]; Monte
    # Carlo over M noisy generations, tolerance 4 standard errors of the difference of the two means.
    rng = np.random.default_rng(0)
    popsize, n, sigma_noise, trials = 10, 3, 1.0, 2000
    base = log_weights(popsize)
    y = rng.standard_normal((popsize, n))
    f_true = np.linspace(0, 3, popsize)
    hard = np.empty((trials, n))
    pem = np.empty((trials, n))
    for t in range(trials):
        observed = f_true + sigma_noise * rng.standard_normal(popsize)
        hard[t] = base[np.argsort(np.argsort(observed))] @ y
        replicates = f_true + sigma_noise * rng.standard_normal((16, popsize))
        pem[t] = expected_weights(replicates, base) @ y
    standard_error = np.sqrt(hard.var(axis=0, ddof=1) / trials + pem.var(axis=0, ddof=1) / trials)
    assert np.all(np.abs(hard.mean(axis=0) - pem.mean(axis=0)) < 4 * standard_error)
    assert np.all(pem.var(axis=0) < 0.5 * hard.var(axis=0))


def _updates(pem, population, function, noise, trials, rng):
    """Over ``trials`` fresh noisy evaluations of ``population`` (RB-PEM's re-evaluations spent each time): the
    mean update ``w @ x`` with hard weights on the candidates' mean values, and with RB-PEM's weights."""
    base = log_weights(len(population))
    hard, rb_pem = [], []
    for _ in range(trials):
        evaluations = [np.array([function(x) + noise * rng.standard_normal()]) for x in population]
        for i in pem.reevaluate(np.array([e[0] for e in evaluations]), base):
            evaluations[i] = np.append(evaluations[i], function(population[i]) + noise * rng.standard_normal())
        hard.append(LogWeights()(evaluations, base) @ population)
        rb_pem.append(pem(evaluations, base, population) @ population)
    return np.array(hard), np.array(rb_pem)


def test_rb_pem_keeps_the_mean_update_on_a_noisy_quadratic():
    # The hard weights' update is the unbiased one; RB-PEM must keep its mean (within 5% of its norm, with a
    # Monte Carlo standard error of about 1%) and shrink its dispersion. Replicates centred on the noisy values
    # (the estimator before this one) add the noise twice and missed the mean by 9% here.
    rng = np.random.default_rng(0)
    population = rng.standard_normal((7, 3))  # D = 3, CMA-ES's default popsize 7
    centre = np.full(3, 1.5)
    hard, rb_pem = _updates(
        ResidualBootstrapPEM(64, 1, 2, 40, seed=1), population, lambda x: (x - centre) @ (x - centre), 3.0, 3000, rng
    )
    norm = np.linalg.norm(hard.mean(axis=0))
    difference = rb_pem - hard
    standard_error = np.sqrt((difference.var(axis=0, ddof=1) / len(difference)).sum()) / norm
    assert standard_error < 0.015
    assert np.linalg.norm(difference.mean(axis=0)) / norm < 0.05
    assert rb_pem.var(axis=0).sum() < 0.8 * hard.var(axis=0).sum()


def test_rb_pem_uses_hard_weights_without_residual_freedom():
    # lambda <= D + 1: the fit on [1, x] interpolates the values, nothing is left to redraw
    rng = np.random.default_rng(5)
    pem = ResidualBootstrapPEM(16, 3, 6, 40, seed=6)
    population = rng.standard_normal((6, 5))
    evaluations = [rng.standard_normal(2) for _ in range(6)]
    base = log_weights(6)
    np.testing.assert_allclose(pem(evaluations, base, population), LogWeights()(evaluations, base), atol=1e-15)
    assert pem.scale != (0.0, 0.0)  # the noise is measured; the weights are hard all the same


def test_rb_pem_keeps_the_ranking_when_the_lack_of_fit_dwarfs_the_noise():
    # A function far from linear with tiny noise: the residual is almost all lack of fit, which the replicates
    # keep, so the expected weights are the hard ones.
    rng = np.random.default_rng(7)
    population = rng.standard_normal((10, 2))
    hard, rb_pem = _updates(
        ResidualBootstrapPEM(64, 1, 2, 40, seed=8), population, lambda x: float(np.sin(4 * x).sum()), 1e-6, 20, rng
    )
    np.testing.assert_allclose(rb_pem[-1], hard[-1], atol=1e-9)


def test_noise_model_is_refitted_from_residuals():
    rng = np.random.default_rng(1)
    pem = ResidualBootstrapPEM(replicates=8, band=2, max_reevaluations=4, pool_size=20000)
    s0, s1 = 0.5, 0.2
    levels = rng.uniform(0, 20, 4000)
    evaluations = [f + (s0 + s1 * f) * rng.standard_normal(2) for f in levels]
    pem(evaluations, log_weights(len(evaluations)), rng.standard_normal((len(evaluations), 2)))
    # the levels are noisy means, so the fit is judged by the spread it predicts, not by (s0, s1) themselves
    for f in (5.0, 15.0):
        assert pem.scale[0] + pem.scale[1] * f == pytest.approx(s0 + s1 * f, rel=0.1)


def test_reevaluation_band_is_around_the_elite_boundary_and_capped():
    base = log_weights(10)  # mu = 5
    means = np.arange(10.0)[::-1]  # candidate 9 is best; ranks 4 and 5 are candidates 5 and 4
    wide = ResidualBootstrapPEM(replicates=4, band=3, max_reevaluations=100, pool_size=10)
    assert sorted(wide.reevaluate(means, base)) == [2, 3, 4, 5, 6, 7]
    capped = ResidualBootstrapPEM(replicates=4, band=3, max_reevaluations=2, pool_size=10)
    assert sorted(capped.reevaluate(means, base)) == [4, 5]
    assert ResidualBootstrapPEM(4, 3, 0, 10).reevaluate(means, base).size == 0


def test_unbiased_pem_averages_the_hard_weights_over_every_choice_of_evaluation():
    base = log_weights(4)
    scheme = UnbiasedPEM(max_reevaluations=1)
    single = [np.array([v]) for v in (1.0, 2.0, 3.0, 4.0)]
    np.testing.assert_array_equal(scheme(single, base), base)  # one evaluation each: the hard weights
    # candidate 3 evaluated twice, best the second time: half the time last, half the time first
    twice = single[:3] + [np.array([4.0, 0.0])]
    np.testing.assert_allclose(scheme(twice, base), (base + base[[1, 2, 3, 0]]) / 2)


def test_unbiased_pem_draws_its_reevaluations_regardless_of_the_values():
    base = log_weights(10)
    picks = [UnbiasedPEM(3, seed=4).reevaluate(means, base) for means in (np.arange(10.0), -np.arange(10.0))]
    np.testing.assert_array_equal(picks[0], picks[1])
    assert len(set(picks[0])) == 3
    assert UnbiasedPEM(0).reevaluate(np.arange(10.0), base).size == 0
    assert sorted(UnbiasedPEM(20).reevaluate(np.arange(10.0), base)) == list(range(10))


def test_unbiased_pem_keeps_the_plain_es_update_under_skewed_multiplicative_noise():
    # bbob-noisy's severe Gaussian noise, f exp(N(0, 1)): the expected update must be the plain ES's on single
    # evaluations (within 4 Monte Carlo standard errors) with less dispersion. Averaging over the evaluations of
    # candidates picked at the elite boundary instead misses it: a candidate picked for its first value is not
    # exchangeable with its second.
    rng = np.random.default_rng(0)
    population = rng.standard_normal((7, 3))
    base, trials = log_weights(7), 4000
    scheme, boundary = UnbiasedPEM(2, seed=1), ResidualBootstrapPEM(1, 1, 2, 2)

    def noisy(x):
        return float(x @ x) * np.exp(rng.standard_normal())

    single, unbiased, at_boundary = [], [], []
    for _ in range(trials):
        evaluations = [np.array([noisy(x)]) for x in population]
        single.append(LogWeights()(evaluations, base) @ population)
        means = np.array([e[0] for e in evaluations])
        for chooser, updates in ((scheme, unbiased), (boundary, at_boundary)):
            again = list(evaluations)
            for i in chooser.reevaluate(means, base):
                again[i] = np.append(again[i], noisy(population[i]))
            updates.append(scheme(again, base) @ population)
    single, unbiased, at_boundary = map(np.array, (single, unbiased, at_boundary))

    def standard_errors_off(updates):
        difference = updates - single
        return np.abs(difference.mean(axis=0)) / np.sqrt(difference.var(axis=0, ddof=1) / trials)

    assert standard_errors_off(unbiased).max() < 4
    assert unbiased.var(axis=0).sum() < 0.9 * single.var(axis=0).sum()
    assert standard_errors_off(at_boundary).max() > 6


def test_elite_flip_rate_measures_disagreement():
    observed = np.arange(6.0)
    assert elite_flip_rate(np.tile(observed, (5, 1)), observed, 3) == 0
    assert elite_flip_rate(observed[::-1][None, :], observed, 3) == 1


@pytest.mark.parametrize(("noise", "active"), [(0.0, False), (10.0, True)])
def test_probe_and_switch_follows_the_measured_misranking(noise, active):
    rng = np.random.default_rng(2)
    switch = ProbeAndSwitch(ResidualBootstrapPEM(64, 2, 4, 100, seed=3), threshold=0.1, probe_interval=5)
    base = log_weights(8)
    f = np.arange(8.0)
    evaluations = [
        v + noise * rng.standard_normal(2) if i in (3, 4) else v + noise * rng.standard_normal(1)
        for i, v in enumerate(f)
    ]
    weights = switch(evaluations, base, rng.standard_normal((8, 2)))
    assert switch.active is active
    if not active:  # back on hard weights: probes only every probe_interval generations
        np.testing.assert_array_equal(weights, LogWeights()(evaluations, base))
        assert switch.reevaluate(f, base).size == 0


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda: ResidualBootstrapPEM(0, 2, 2, 4),
            ValueError,
            "ResidualBootstrapPEM: `replicates` must be an integer >= 1",
        ),
        (lambda: ResidualBootstrapPEM(8, -1, 2, 4), ValueError, "ResidualBootstrapPEM: `band` must be an integer >= 0"),
        (lambda: ResidualBootstrapPEM(8, 2, 2.5, 4), TypeError, "`max_reevaluations` must be an integer >= 0, got 2.5"),
        (
            lambda: ResidualBootstrapPEM(8, 2, 2, 1),
            ValueError,
            "ResidualBootstrapPEM: `pool_size` must be an integer >= 2",
        ),
        (lambda: ResidualBootstrapPEM(8, 2, 2, 4, seed=None), TypeError, "`seed` must be an integer >= 0, got None"),
        (lambda: UnbiasedPEM(-1), ValueError, r"UnbiasedPEM: `max_reevaluations` must be an integer >= 0, got -1"),
        (lambda: UnbiasedPEM(2, seed="0"), TypeError, "UnbiasedPEM: `seed` must be an integer >= 0, got '0'"),
        (
            lambda: ProbeAndSwitch(LogWeights(), 0.1, 5),
            TypeError,
            "`pem` must be a ResidualBootstrapPEM, got LogWeights",
        ),
        (
            lambda: ProbeAndSwitch(ResidualBootstrapPEM(8, 2, 2, 4), 1.5, 5),
            ValueError,
            r"`threshold` must be .* \[0, 1\]",
        ),
        (lambda: ProbeAndSwitch(ResidualBootstrapPEM(8, 2, 2, 4), "0.1", 5), TypeError, "`threshold` must be a number"),
        (
            lambda: ProbeAndSwitch(ResidualBootstrapPEM(8, 2, 2, 4), 0.1, 0),
            ValueError,
            "`probe_interval` must be an integer >= 1",
        ),
    ],
)
def test_schemes_built_by_hand_refuse_what_esconfig_refuses(make, error, message):
    """Issue 72: built without an ESConfig, the schemes took any value: ``UnbiasedPEM(-1)`` re-evaluated all but
    one candidate, ``ProbeAndSwitch(..., probe_interval=0)`` divided by zero at its first probe, a None seed drew
    irreproducibly."""
    with pytest.raises(error, match=message):
        make()
