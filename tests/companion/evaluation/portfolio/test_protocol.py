import re

import numpy as np
import pytest

from hf_ext.companion.evaluation.portfolio import (
    BuyAndHold,
    ConstantRebalanced,
    TopKTCO,
    backtest,
    cost_fraction,
    summarize,
)
from hf_ext.companion.portfolio import TCO, SparseTCO, SparseTCOConfig, TCOConfig, synthetic_relatives


class Scripted:
    """Holds the given portfolios in turn, whatever happens."""

    def __init__(self, portfolios):
        self.portfolios = [np.array(p, dtype=float) for p in portfolios]

    def start(self, assets):
        return self.portfolios[0]

    def rebalance(self, observed, previous, drifted):
        return self.portfolios[len(observed)]


def test_three_periods_of_exact_self_financing_accounting_by_hand():
    # c = 1%. Period 1 holds (1/2, 1/2), bought free; x = (2, 1): wealth 1.5, drifted to (2/3, 1/3).
    # Rebalance to (1, 0): buy 1/3 of asset 1 with (1 - mu), sell 1/3 of asset 2:
    #   mu = c (|(1 - mu) - 2/3| + 1/3) = c (2/3 - mu)  =>  mu = (2c/3) / (1 + c) = 0.006600660066006601.
    # Period 2, x = (1/2, 1): wealth 1.5 (1 - mu) / 2 = 0.7450495049504950, drifted to (1, 0).
    # Rebalance to (1/2, 1/2): mu = c (|(1 - mu)/2 - 1| + (1 - mu)/2) = c = 0.01 exactly.
    # Period 3, x = (1, 2): wealth 0.7450495049504950 * 0.99 * 1.5 = 1.1063985148514851.
    relatives = np.array([[2.0, 1.0], [0.5, 1.0], [1.0, 2.0]])
    run = backtest(Scripted([[0.5, 0.5], [1.0, 0.0], [0.5, 0.5]]), relatives, cost=0.01)
    np.testing.assert_allclose(run.costs, [0.0, 0.006600660066006601, 0.01], rtol=1e-12)
    np.testing.assert_allclose(run.turnover, [0.0, 2 / 3, 1.0], rtol=1e-12)
    np.testing.assert_allclose(run.wealth, [1.5, 0.7450495049504950, 1.1063985148514851], rtol=1e-12)
    np.testing.assert_allclose(run.returns, [1.5, 0.4966996699669967, 1.485], rtol=1e-12)


def test_the_exact_cost_is_below_the_first_order_approximation_and_pays_for_itself():
    generator = np.random.default_rng(0)
    target, drifted = generator.dirichlet(np.ones(6)), generator.dirichlet(np.ones(6))
    mu = cost_fraction(target, drifted, 0.05)
    assert mu == pytest.approx(0.05 * np.abs(target * (1 - mu) - drifted).sum(), abs=1e-15)
    assert mu < 0.05 * np.abs(target - drifted).sum()


def test_without_costs_a_crp_compounds_its_period_returns():
    relatives = np.array([[1.1, 0.9, 1.0], [0.8, 1.3, 1.05]])
    b = np.array([0.2, 0.3, 0.5])
    run = backtest(ConstantRebalanced(b), relatives, cost=0.0)
    assert run.wealth[-1] == pytest.approx(np.prod(relatives @ b), rel=1e-14)


@pytest.mark.parametrize("cost", [-0.001, 1.0, np.nan])
def test_a_bad_cost_rate_is_refused_by_name(cost):
    with pytest.raises(ValueError, match="`cost` must be"):
        backtest(ConstantRebalanced(np.array([1.0])), np.ones((2, 1)), cost=cost)


@pytest.mark.parametrize("cost", ["x", "0.1", [0.1], True])
@pytest.mark.parametrize("strategy", [BuyAndHold(), TCO()])
def test_a_cost_that_is_not_a_number_is_refused_by_name(strategy, cost):
    """It failed in a comparison naming nothing, or was refused as differing from the strategy's own rate."""
    with pytest.raises(TypeError, match=f"^backtest: `cost` must be a number, got {re.escape(repr(cost))}"):
        backtest(strategy, np.ones((2, 3)), cost=cost)


def test_a_strategy_leaving_the_simplex_is_stopped_at_its_period():
    with pytest.raises(ValueError, match=r"Scripted returned a portfolio off the simplex of 2 assets for period 1"):
        backtest(Scripted([[0.5, 0.5], [0.7, 0.7]]), np.ones((2, 2)), cost=0.0)


def test_non_positive_relatives_are_refused():
    with pytest.raises(ValueError, match="`relatives` must be a \\(periods, assets\\) array of finite values > 0"):
        backtest(ConstantRebalanced(np.array([0.5, 0.5])), np.array([[1.0, 0.0]]), cost=0.0)


@pytest.mark.parametrize(
    "strategy",
    [
        SparseTCO(SparseTCOConfig(k=2, cost=0.0025)),
        TCO(TCOConfig(cost=0.0025)),
        TopKTCO(TCO(TCOConfig(cost=0.0025)), 2),
    ],
    ids=["SparseTCO", "TCO", "TopKTCO"],
)
def test_a_strategy_with_its_own_cost_is_charged_that_cost(strategy):
    relatives = synthetic_relatives(20, 4, seed=0)
    charged = backtest(strategy, relatives)
    assert charged.costs.sum() > 0
    np.testing.assert_array_equal(backtest(strategy, relatives, 0.0025).wealth, charged.wealth)


def test_a_cost_other_than_the_strategys_own_is_refused():
    """Issue 37: a K-sparse TCO built for 0.25% was charged 5% without a word."""
    strategy = SparseTCO(SparseTCOConfig(k=5, cost=0.0025))
    with pytest.raises(ValueError, match=r"`cost` is 0.05 but SparseTCO trades for its own cost rate 0.0025"):
        backtest(strategy, synthetic_relatives(10, 6), 0.05)


def test_a_strategy_without_a_cost_needs_one():
    with pytest.raises(ValueError, match="BuyAndHold has no cost rate of its own; pass `cost`"):
        backtest(BuyAndHold(), np.ones((3, 2)))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_relatives_without_a_period_or_an_asset_are_refused(shape):
    """Issue 37: no periods raised an IndexError from inside the run."""
    with pytest.raises(ValueError, match=rf"at least one period and one asset, got shape \({shape[0]}, {shape[1]}\)"):
        backtest(TCO(), np.ones(shape))


def test_metrics_of_a_known_run():
    relatives = np.array([[2.0, 1.0], [0.5, 1.0], [1.0, 2.0]])
    run = backtest(Scripted([[0.5, 0.5], [1.0, 0.0], [0.5, 0.5]]), relatives, cost=0.01)
    metrics = summarize(run, periods_per_year=3)
    assert metrics["final_wealth"] == pytest.approx(1.1063985148514851)
    assert metrics["annual_return"] == pytest.approx(0.1063985148514851)
    assert metrics["max_drawdown"] == pytest.approx(1 - 0.7450495049504950 / 1.5)
    assert metrics["mean_turnover"] == pytest.approx((2 / 3 + 1) / 2)
    assert metrics["mean_holdings"] == pytest.approx(5 / 3) and metrics["max_holdings"] == 2
    simple = run.returns - 1
    assert metrics["annual_volatility"] == pytest.approx(simple.std(ddof=1) * np.sqrt(3))
