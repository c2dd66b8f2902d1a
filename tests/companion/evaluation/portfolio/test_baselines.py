import numpy as np
import pytest

from hf_ext.companion.evaluation.portfolio import (
    BuyAndHold,
    ConstantRebalanced,
    TopKTCO,
    backtest,
    best_constant_rebalanced,
)
from hf_ext.companion.portfolio import TCO, TCOConfig, load_relatives, synthetic_relatives


def test_buy_and_hold_never_trades_and_ends_at_the_mean_price_growth():
    relatives = synthetic_relatives(40, 5, seed=1)
    run = backtest(BuyAndHold(), relatives, cost=0.01)
    assert run.costs.sum() < 1e-15 and run.turnover.max() < 1e-12
    assert run.wealth[-1] == pytest.approx(np.prod(relatives, axis=0).mean(), rel=1e-12)


def test_the_best_crp_beats_every_vertex_and_random_crps():
    relatives = synthetic_relatives(200, 4, seed=2)
    best = best_constant_rebalanced(relatives)
    wealth = np.prod(relatives @ best)
    others = np.random.default_rng(0).dirichlet(np.ones(4), size=500)
    assert wealth >= np.prod(relatives @ others.T, axis=0).max() * (1 - 1e-6)
    assert wealth >= np.prod(relatives, axis=0).max() * (1 - 1e-6)
    assert backtest(ConstantRebalanced(best), relatives, 0.0).wealth[-1] == pytest.approx(wealth)


def test_top_k_tco_keeps_the_k_largest_weights_of_tco():
    relatives = synthetic_relatives(30, 6, seed=3)
    run = backtest(TopKTCO(TCO(TCOConfig(predictor="reversal")), k=2), relatives, 0.0025)
    assert ((run.weights > 0).sum(axis=1) <= 2).all()
    np.testing.assert_allclose(run.weights.sum(axis=1), 1)
    with pytest.raises(ValueError, match=r"TopKTCO: `k` must be between 1 and the number of assets \(6\)"):
        backtest(TopKTCO(TCO(), k=7), relatives)


def test_buy_and_hold_and_the_best_crp_match_universal_portfolios_on_djia():
    from universal import tools
    from universal.algos import BAH, BCRP

    prices, relatives = tools.dataset("djia"), load_relatives("djia")
    their_bah = BAH().run(prices, log_progress=False).total_wealth
    assert backtest(BuyAndHold(), relatives, 0.0).wealth[-1] == pytest.approx(their_bah, rel=1e-12)
    their_bcrp = BCRP().run(prices, log_progress=False).total_wealth
    ours = np.prod(relatives @ best_constant_rebalanced(relatives))
    assert ours == pytest.approx(their_bcrp, rel=1e-5) and ours >= their_bcrp * (1 - 1e-9)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"k": 2.5}, TypeError, "`k` must be an integer >= 1, got 2.5"),  # was a slice error inside argpartition
        ({"k": True}, TypeError, "`k` must be an integer >= 1, got True"),  # was k = 1
        ({"k": "2"}, TypeError, "`k` must be an integer >= 1, got '2'"),
        ({"k": None}, TypeError, "`k` must be an integer >= 1, got None"),
        ({"k": 0}, ValueError, "`k` must be an integer >= 1, got 0"),  # was refused only once a backtest started
        ({"tco": TCOConfig()}, TypeError, r"`tco` must be a TCO strategy .*, got TCOConfig"),
    ],
)
def test_top_k_tco_refuses_a_bad_k_or_tco_at_construction(arguments, error, message):
    with pytest.raises(error, match=f"^TopKTCO: {message}"):
        TopKTCO(**{"tco": TCO(), "k": 2} | arguments)


@pytest.mark.parametrize(
    ("portfolio", "error", "message"),
    [
        ("abc", TypeError, "`portfolio` must be an array of numbers, got 'abc'"),  # was numpy's "could not convert"
        ([True, False], TypeError, r"`portfolio` must be an array of numbers, got \[True, False\]"),  # was [1, 0]
        ([np.nan, 1.0], ValueError, "`portfolio` must be a finite number, got"),
        ([0.3, 0.3, 0.3], ValueError, "`portfolio` must be a 1-D array of weights >= 0 summing to 1, got"),
        ([[0.5, 0.5]], ValueError, "`portfolio` must be a 1-D array of weights >= 0 summing to 1, got"),
        ([1.5, -0.5], ValueError, "`portfolio` must be a 1-D array of weights >= 0 summing to 1, got"),
        ([], ValueError, "`portfolio` must be a 1-D array of weights >= 0 summing to 1, got"),
    ],
)
def test_a_constant_rebalanced_portfolio_off_the_simplex_is_refused_at_construction(portfolio, error, message):
    """It was refused by the backtest, as a portfolio the strategy "returned" at period 0, naming no field."""
    with pytest.raises(error, match=f"^ConstantRebalanced: {message}"):
        ConstantRebalanced(portfolio)


def test_a_constant_rebalanced_portfolio_of_another_size_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="ConstantRebalanced: `portfolio` holds 2 weights but the relatives have 3"):
        backtest(ConstantRebalanced([0.5, 0.5]), np.ones((4, 3)), cost=0.0)
