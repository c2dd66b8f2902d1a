import subprocess
import sys

import numpy as np
import pytest

from hf_ext.companion.portfolio import DATASETS, dataset_path, load_relatives, price_relatives, synthetic_relatives

# (periods, assets) of the six CSVs shipped by universal-portfolios 0.4.17 (rows minus the first price row)
SHAPES = {
    "djia": (506, 30),
    "msci": (1042, 24),
    "nyse_n": (6430, 23),
    "nyse_o": (5650, 36),
    "sp500": (1275, 25),
    "tse": (1258, 88),
}


@pytest.mark.parametrize("name", DATASETS)
def test_each_real_data_set_loads_as_positive_relatives(name):
    relatives = load_relatives(name)
    assert relatives.shape == SHAPES[name]
    assert np.all(np.isfinite(relatives)) and relatives.min() > 0
    assert 0.9 < np.median(relatives) < 1.1  # daily relatives, not prices


def test_relatives_are_row_over_previous_row():
    prices = np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 4.0]])
    np.testing.assert_allclose(price_relatives(prices), [[2.0, 0.5], [1.5, 4.0]])


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf])
def test_non_positive_or_non_finite_prices_are_refused_where_they_are(bad):
    prices = np.ones((3, 2))
    prices[2, 1] = bad
    with pytest.raises(ValueError, match=r"`prices` must be finite and > 0, got .* at row 2, asset 1"):
        price_relatives(prices)


def test_an_unknown_data_set_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"`name` must be one of \['djia', 'msci'"):
        dataset_path("ftse")


def test_the_data_is_read_without_importing_universal():
    code = "import sys; from hf_ext.companion.portfolio import load_relatives; load_relatives('djia'); "
    code += "assert 'universal' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_synthetic_market_is_seeded_and_positive():
    first, again = synthetic_relatives(50, 4, seed=3), synthetic_relatives(50, 4, seed=3)
    assert first.shape == (50, 4) and first.min() > 0
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, synthetic_relatives(50, 4, seed=4))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"periods": -1}, ValueError, "`periods` must be an integer >= 1, got -1"),
        ({"assets": 0}, ValueError, "`assets` must be an integer >= 1, got 0"),
        ({"seed": None}, TypeError, "`seed` must be an integer >= 0, got None"),
        ({"volatility": float("nan")}, ValueError, "`volatility` must be a finite number"),
        ({"volatility": "0.02"}, TypeError, "`volatility` must be a number"),
        (
            {"reversion": 1.0},
            ValueError,
            r"`volatility` must be >= 0 and `reversion` in \[0, 1\) \(a stationary AR\(1\)\), got 0.02 and 1.0",
        ),
    ],
)
def test_synthetic_relatives_refuses_bad_parameters_by_name(kwargs, error, message):
    """Issue 72: a NaN volatility gave NaN relatives, ``reversion=2.5`` an explosive market, and numpy's errors
    (``negative dimensions are not allowed``) named nothing."""
    with pytest.raises(error, match=f"synthetic_relatives: {message}"):
        synthetic_relatives(**kwargs)
