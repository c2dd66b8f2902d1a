import numpy as np
import pytest

from hf_ext.companion.evaluation.portfolio import backtest
from hf_ext.companion.portfolio import TCO, TCOConfig, load_relatives
from hf_ext.companion.portfolio.tco import predict, tco_step


def test_one_tco_step_by_hand():
    # b~ = (1/2, 1/2), x^ = (1.1, 0.9): v = x^ / <b~, x^> = (1.1, 0.9), eta (v - mean v) = (0.1, -0.1) for eta = 1,
    # soft threshold at lambda = 10 * 0.005 = 0.05: (0.05, -0.05); b~ + that = (0.55, 0.45) is on the simplex.
    config = TCOConfig(cost=0.005, eta=1.0)
    np.testing.assert_allclose(tco_step(np.array([0.5, 0.5]), np.array([1.1, 0.9]), config), [0.55, 0.45])
    # with eta = 10 the step (1.4, -0.4) leaves the simplex and is projected back to (1, 0)
    np.testing.assert_allclose(tco_step(np.array([0.5, 0.5]), np.array([1.1, 0.9]), TCOConfig(cost=0.01)), [1, 0])


def test_predictors_by_hand():
    observed = np.array([[2.0, 1.0], [0.5, 1.0], [1.0, 2.0]])
    np.testing.assert_allclose(predict(observed, TCOConfig(predictor="reversal")), [1.0, 0.5])
    # prices 1, (2, 1), (1, 1), (1, 2): the last 3 over today's are (2, 1/2), (1, 1/2), (1, 1)
    np.testing.assert_allclose(predict(observed, TCOConfig(predictor="window", window=3)), [4 / 3, 2 / 3])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cost", -0.01, r"TCOConfig: `cost` must be a rate in \[0, 1\)"),
        ("predictor", "trend", r"`predictor` must be one of \['reversal', 'window'\]"),
        ("window", 1, "`window` must be an integer >= 2"),
        ("eta", 0.0, "`eta` must be > 0"),
        ("eta", float("nan"), "`eta` must be a finite number"),
    ],
)
def test_bad_settings_are_refused_by_name(field, value, message):
    with pytest.raises(ValueError, match=message):
        TCOConfig(**{field: value})


@pytest.mark.parametrize("predictor", ["reversal", "window"])
def test_our_tco_holds_the_portfolios_of_universal_portfolios(predictor):
    from universal import tools
    from universal.algos import TCO1, TCO2

    cost = 0.0025
    ours = backtest(TCO(TCOConfig(cost=cost, predictor=predictor)), load_relatives("djia")[:149], cost)
    algo = TCO1(trx_fee_pct=cost) if predictor == "reversal" else TCO2(trx_fee_pct=cost, window=5)
    theirs = algo.run(tools.dataset("djia").iloc[:150], log_progress=False)
    # their first row is the starting price (relative 1), ours starts at the first relative
    np.testing.assert_allclose(ours.weights, theirs.B.to_numpy()[1:], atol=1e-10)
