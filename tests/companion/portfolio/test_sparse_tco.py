import numpy as np
import pytest

from hf_ext.companion.evaluation.portfolio import backtest
from hf_ext.companion.portfolio import (
    SparseTCO,
    SparseTCOConfig,
    TCOConfig,
    dc_penalty,
    prox_cost_simplex,
    synthetic_relatives,
)
from hf_ext.companion.portfolio.tco import tco_step


def _cvxpy_prox(center, anchor, beta, lam):
    cp = pytest.importorskip("cvxpy")
    b = cp.Variable(len(center))
    objective = beta / 2 * cp.sum_squares(b - center) + lam * cp.norm1(b - anchor)
    cp.Problem(cp.Minimize(objective), [b >= 0, cp.sum(b) == 1]).solve(solver=cp.CLARABEL)
    return b.value


@pytest.mark.parametrize("seed", range(6))
def test_the_admm_prox_matches_cvxpy(seed):
    generator = np.random.default_rng(seed)
    assets = 3 + seed
    center, anchor = generator.normal(0.2, 0.5, assets), generator.dirichlet(np.ones(assets))
    beta, lam = [1.0, 2.0, 5.0][seed % 3], [0.0, 0.025, 0.3][seed // 2]
    ours, _, iterations = prox_cost_simplex(center, anchor, beta, lam, SparseTCOConfig())
    np.testing.assert_allclose(ours, _cvxpy_prox(center, anchor, beta, lam), atol=1e-6)
    assert ours.min() >= 0 and ours.sum() == pytest.approx(1, abs=1e-12) and iterations < 1000


def test_a_warm_start_at_the_solution_stops_at_once():
    generator = np.random.default_rng(0)
    center, anchor = generator.normal(size=5), generator.dirichlet(np.ones(5))
    _, state, cold = prox_cost_simplex(center, anchor, 2.0, 0.1, SparseTCOConfig())
    _, _, warm = prox_cost_simplex(center, anchor, 2.0, 0.1, SparseTCOConfig(), state)
    assert warm <= 2 < cold


def test_the_prox_without_costs_is_the_simplex_projection_of_tco():
    # lambda = 0: argmin 1/2 ||b - (b~ + eta (v - mean v))||^2 on the simplex, TCO's own step at zero cost
    drifted, prediction = np.array([0.2, 0.3, 0.5]), np.array([1.02, 0.97, 1.01])
    config = SparseTCOConfig(cost=0.0)
    v = prediction / (drifted @ prediction)
    prox, _, _ = prox_cost_simplex(drifted + config.eta * (v - v.mean()), drifted, 1.0, 0.0, config)
    np.testing.assert_allclose(prox, tco_step(drifted, prediction, TCOConfig(cost=0.0)), atol=1e-8)


@pytest.mark.parametrize("k", [1, 3])
def test_every_portfolio_is_k_sparse_and_on_the_simplex(k):
    relatives = synthetic_relatives(120, 8, seed=k)
    strategy = SparseTCO(SparseTCOConfig(k=k, cost=0.0025))
    run = backtest(strategy, relatives, 0.0025)
    assert ((run.weights > 0).sum(axis=1) <= k).all()
    assert np.allclose(run.weights.sum(axis=1), 1) and run.weights.min() >= 0
    assert all(dc_penalty(b, k) <= 1e-12 for b in run.weights)
    rebalances = len(relatives) - strategy.config.warmup
    assert len(strategy.iterations) == rebalances and 0 <= strategy.penalty_sparse <= rebalances
    assert max(strategy.iterations) <= strategy.config.psga_max_iter


def test_a_large_penalty_makes_the_portfolio_k_sparse_by_itself():
    relatives = synthetic_relatives(60, 6, seed=0)
    strategy = SparseTCO(SparseTCOConfig(k=2, rho=5.0))
    backtest(strategy, relatives, 0.0025)
    assert strategy.penalty_sparse == len(strategy.iterations)


def test_without_the_penalty_the_portfolio_is_dense_and_gets_projected():
    relatives = synthetic_relatives(60, 6, seed=0)
    strategy = SparseTCO(SparseTCOConfig(k=2, rho=0.0, cost=0.0))
    run = backtest(strategy, relatives, 0.0)
    assert strategy.penalty_sparse < len(strategy.iterations)
    assert ((run.weights > 0).sum(axis=1) <= 2).all()


def test_k_larger_than_the_assets_is_refused_by_name():
    with pytest.raises(ValueError, match=r"SparseTCOConfig: `k` must be between 1 and the number of assets \(4\)"):
        backtest(SparseTCO(SparseTCOConfig(k=5)), synthetic_relatives(5, 4))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("k", 0, "SparseTCOConfig: `k` must be an integer >= 1, got 0"),
        ("rho", -1.0, "`rho` must be >= 0"),
        ("step", 0.0, "`step` must be > 0"),
        ("cost", -0.001, r"`cost` must be a rate in \[0, 1\)"),
        ("admm_tol", float("inf"), "`admm_tol` must be a finite number"),
    ],
)
def test_bad_settings_are_refused_by_name(field, value, message):
    with pytest.raises(ValueError, match=message):
        SparseTCOConfig(**{field: value})
