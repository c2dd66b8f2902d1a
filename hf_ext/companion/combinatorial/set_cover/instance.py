"""Weighted set-cover instances: OR-Library readers, Beasley-style and rail-like generators, sparse CSR/CSC."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from hf_ext._validation import check_count, check_finite_number, check_number


def gather(indptr: np.ndarray, indices: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries of ``items`` in a compressed sparse structure (a CSC's columns, a CSR's rows) concatenated, and for
    each entry its position in ``items``."""
    starts = indptr[items]
    counts = indptr[items + 1] - starts
    owner = np.repeat(np.arange(len(items)), counts)
    shift = np.repeat(starts - (np.cumsum(counts) - counts), counts)  # an entry's place in indices less its place here
    return indices[np.arange(len(owner)) + shift], owner


def _distinct(indptr: np.ndarray, indices: np.ndarray, items: np.ndarray, size: int) -> np.ndarray:
    """The distinct entries of ``items``, sorted, marked in a mask rather than sorted or hashed: the entries can be
    most of a 1M-column instance (a neighbourhood's layers), where ``np.unique`` took tenths of a second."""
    hit = np.zeros(size, dtype=bool)
    hit[gather(indptr, indices, np.asarray(items, dtype=np.int64))[0]] = True
    return np.flatnonzero(hit)


@dataclass
class SetCoverInstance:
    """Cover every row at least once with columns of least total ``costs``; ``matrix`` is rows x columns (CSC)."""

    costs: np.ndarray
    matrix: sp.csc_array
    name: str = "instance"

    def __post_init__(self):
        self.costs = np.asarray(self.costs, dtype=np.float64)
        self.matrix = sp.csc_array(self.matrix, dtype=np.int8)
        if self.costs.shape != (self.matrix.shape[1],):
            raise ValueError(f"SetCoverInstance: `costs` needs one entry per column ({self.matrix.shape[1]})")
        if not np.all(np.isfinite(self.costs)) or np.any(self.costs < 0):
            raise ValueError("SetCoverInstance: `costs` must be finite and >= 0")
        counts = np.diff(self.rows_to_columns.indptr)
        if np.any(counts == 0):
            bad = np.flatnonzero(counts == 0)
            raise ValueError(
                f"SetCoverInstance {self.name}: infeasible, no column covers row(s) {bad[:10].tolist()} (0-based)"
            )

    @property
    def n_rows(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_columns(self) -> int:
        return self.matrix.shape[1]

    @property
    def rows_to_columns(self) -> sp.csr_array:
        """The same matrix in CSR: row i's covering columns are ``indices[indptr[i]:indptr[i + 1]]``."""
        if not hasattr(self, "_csr"):
            self._csr = self.matrix.tocsr()
        return self._csr

    def rows_of(self, columns: np.ndarray) -> np.ndarray:
        """The rows any of ``columns`` covers, sorted."""
        return _distinct(self.matrix.indptr, self.matrix.indices, columns, self.n_rows)

    def columns_of(self, rows: np.ndarray) -> np.ndarray:
        """The columns covering any of ``rows``, sorted."""
        csr = self.rows_to_columns
        return _distinct(csr.indptr, csr.indices, rows, self.n_columns)

    def coverage(self, selected: np.ndarray) -> np.ndarray:
        """How many selected columns cover each row."""
        return self.matrix @ np.asarray(selected, dtype=np.int8).astype(np.int32)

    def is_feasible(self, selected: np.ndarray) -> bool:
        return bool(np.all(self.coverage(selected) >= 1))

    def objective(self, selected: np.ndarray) -> float:
        return float(self.costs[np.asarray(selected, dtype=bool)].sum())


def _number(token: str) -> int | float:
    """An integer literal as ``int``, any other float literal (``100.0``, ``1e2``) as ``float``."""
    try:
        return int(token)
    except ValueError:
        return float(token)


def _numbers(path: Path):
    """Yield (line number, integer or float) for every number in the file."""
    with path.open(encoding="utf-8") as handle:
        try:
            for line_number, line in enumerate(handle, 1):
                for token in line.split():
                    try:
                        yield line_number, _number(token)
                    except ValueError:
                        raise ValueError(f"{path}: line {line_number}: not a number: {token!r}") from None
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{path}: not a text file in the OR-Library format (byte {error.object[error.start]:#04x} is not text)"
            ) from None


def _take(stream, path: Path, what: str):
    try:
        return next(stream)
    except StopIteration:
        raise ValueError(f"{path}: the file ends early, expected {what}") from None


def _cost(stream, path: Path, what: str) -> float:
    line_number, value = _take(stream, path, what)
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"{path}: line {line_number}: {what} must be a finite number >= 0, got {value}")
    return float(value)


def _end(stream, path: Path, declared: str) -> None:
    """Refuse numbers after the last row or column the header declares: a wrong header would drop them."""
    for line_number, value in stream:
        raise ValueError(
            f"{path}: line {line_number}: the header declares {declared}, but the file goes on after the last of "
            f"them (found {value})"
        )


def _index(stream, path: Path, limit: int, what: str, low: int = 1) -> int:
    """The next number as a 0-based index (``low`` = 0 for a count that may be zero, then minus one)."""
    line_number, value = _take(stream, path, what)
    if not isinstance(value, int) or not low <= value <= limit:
        raise ValueError(f"{path}: line {line_number}: {what} must be an integer in {low}..{limit}, got {value}")
    return value - 1


def read_orlib(path: str | Path) -> SetCoverInstance:
    """OR-Library SCP format (row-wise): ``m n``, n costs, then per row its count and its covering columns (1-based)."""
    path = Path(path)
    stream = _numbers(path)
    m, n = (_index(stream, path, 10**9, name) + 1 for name in ("the number of rows", "the number of columns"))
    costs = np.array([_cost(stream, path, f"cost {j + 1} of {n}") for j in range(n)], dtype=np.float64)
    rows, columns = [], []
    for i in range(m):
        count = _index(stream, path, n, f"row {i + 1}'s column count", low=0) + 1
        for _ in range(count):
            columns.append(_index(stream, path, n, f"a column of row {i + 1}"))
            rows.append(i)
    _end(stream, path, f"{m} rows")
    return _build(costs, rows, columns, m, n, path)


def read_rail(path: str | Path) -> SetCoverInstance:
    """OR-Library rail format (column-wise): ``m n``, then per column its cost, its row count and its rows (1-based)."""
    path = Path(path)
    stream = _numbers(path)
    m, n = (_index(stream, path, 10**9, name) + 1 for name in ("the number of rows", "the number of columns"))
    costs, rows, columns = np.empty(n), [], []
    for j in range(n):
        costs[j] = _cost(stream, path, f"column {j + 1}'s cost")
        count = _index(stream, path, m, f"column {j + 1}'s row count", low=0) + 1
        for _ in range(count):
            rows.append(_index(stream, path, m, f"a row of column {j + 1}"))
            columns.append(j)
    _end(stream, path, f"{n} columns")
    return _build(costs, rows, columns, m, n, path)


def _build(costs, rows, columns, m, n, path: Path) -> SetCoverInstance:
    data = np.ones(len(rows), dtype=np.int8)
    matrix = sp.csc_array((data, (np.asarray(rows), np.asarray(columns))), shape=(m, n))
    matrix.sum_duplicates()
    matrix.data[:] = 1
    return SetCoverInstance(costs, matrix, name=path.stem)


def _from_column_rows(rows: np.ndarray, counts: np.ndarray, m: int, costs: np.ndarray, name: str) -> SetCoverInstance:
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    matrix = sp.csc_array((np.ones(len(rows), dtype=np.int8), rows.astype(np.int32), indptr), shape=(m, len(counts)))
    matrix.sum_duplicates()
    matrix.data[:] = 1
    return SetCoverInstance(costs, matrix, name=name)


def beasley(n_rows: int, n_columns: int, density: float, cost_range=(1, 100), seed: int = 0) -> SetCoverInstance:
    """Beasley-style random instance: each column covers ~``density * n_rows`` random rows (at least one), each row
    gets at least two columns, integer costs uniform in ``cost_range``."""
    _check_shape("beasley", n_rows, n_columns, seed)
    check_number("beasley", "density", density)
    if not isinstance(cost_range, tuple | list) or len(cost_range) != 2:
        raise TypeError(f"beasley: `cost_range` must be a pair (lowest, highest cost), got {cost_range!r}")
    check_count("beasley", "cost_range[0]", cost_range[0], 1)
    check_count("beasley", "cost_range[1]", cost_range[1], cost_range[0])
    if not 0 < density <= 1:
        raise ValueError(f"beasley: `density` must be in (0, 1], got {density}")
    rng = np.random.default_rng(seed)
    counts = np.maximum(1, rng.binomial(n_rows, density, n_columns))
    rows = rng.integers(0, n_rows, int(counts.sum()))
    # every row covered by at least two columns: append each row to two random columns
    extra_columns = rng.integers(0, n_columns, 2 * n_rows)
    column_of = np.concatenate([np.repeat(np.arange(n_columns), counts), extra_columns])
    row_of = np.concatenate([rows, np.tile(np.arange(n_rows), 2)])
    order = np.argsort(column_of, kind="stable")
    costs = rng.integers(cost_range[0], cost_range[1] + 1, n_columns).astype(np.float64)
    counts = np.bincount(column_of, minlength=n_columns)
    return _from_column_rows(row_of[order], counts, n_rows, costs, f"beasley_{n_rows}x{n_columns}_s{seed}")


def _check_shape(owner: str, n_rows, n_columns, seed) -> None:
    """A generator's sizes and seed, refused by name: numpy's own errors (``high <= 0``) name none."""
    check_count(owner, "n_rows", n_rows, 1)
    check_count(owner, "n_columns", n_columns, 1)
    check_count(owner, "seed", seed, 0)


def rail_like(n_rows: int, n_columns: int, max_rows_per_column: int = 12, seed: int = 0) -> SetCoverInstance:
    """Rail-like instance: costs 1 or 2, each column covers 2..``max_rows_per_column`` rows within a local window
    (a crew duty covers consecutive trips), every row covered."""
    _check_shape("rail_like", n_rows, n_columns, seed)
    check_count("rail_like", "max_rows_per_column", max_rows_per_column, 2)
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, max_rows_per_column + 1, n_columns)
    starts = rng.integers(0, n_rows, n_columns)
    window = 4 * max_rows_per_column
    offsets = rng.integers(0, window, int(counts.sum()))
    rows = (np.repeat(starts, counts) + offsets) % n_rows
    column_of = np.repeat(np.arange(n_columns), counts)
    extra_columns = rng.integers(0, n_columns, n_rows)
    column_of = np.concatenate([column_of, extra_columns])
    rows = np.concatenate([rows, np.arange(n_rows)])
    order = np.argsort(column_of, kind="stable")
    costs = rng.integers(1, 3, n_columns).astype(np.float64)
    return _from_column_rows(
        rows[order], np.bincount(column_of, minlength=n_columns), n_rows, costs, f"rail_{n_rows}x{n_columns}_s{seed}"
    )


# beasley (costs 1-100) and rail (costs 1-2) are GLNS's training regimes; correlated (Beasley's structure, a column
# costs its row count plus up to as much again, so every cost per row lies in 1-2) and rail_wide (rail's structure,
# costs 1-1000) are held out from its training
COST_REGIMES = ("beasley", "rail", "correlated", "rail_wide")


def cost_regime_instance(
    regime: str, n_columns: int, seed: int, columns_per_row: int = 20, beasley_rows_per_column: float = 5.0
) -> SetCoverInstance:
    """An instance of one of :data:`COST_REGIMES` with ``n_columns // columns_per_row`` rows: the benchmark's
    families, here so that every benchmark draws the same instances from the same seeds."""
    if regime not in COST_REGIMES:
        raise ValueError(f"cost_regime_instance: `regime` must be one of {list(COST_REGIMES)}, got {regime!r}")
    check_count("cost_regime_instance", "n_columns", n_columns, 1)
    check_count("cost_regime_instance", "seed", seed, 0)
    check_count("cost_regime_instance", "columns_per_row", columns_per_row, 1)
    check_finite_number("cost_regime_instance", "beasley_rows_per_column", beasley_rows_per_column)
    if not beasley_rows_per_column > 0:
        raise ValueError(f"cost_regime_instance: `beasley_rows_per_column` must be > 0, got {beasley_rows_per_column}")
    n_rows = max(1, n_columns // columns_per_row)
    if regime.startswith("rail"):
        instance = rail_like(n_rows, n_columns, seed=seed)
    else:
        instance = beasley(n_rows, n_columns, min(1.0, beasley_rows_per_column / n_rows), seed=seed)
    rng = np.random.default_rng([seed, 27])
    if regime == "correlated":
        counts = np.diff(instance.matrix.indptr)
        costs = counts + rng.integers(0, counts + 1)
    elif regime == "rail_wide":
        costs = rng.integers(1, 1001, n_columns)
    else:
        return instance
    return SetCoverInstance(costs, instance.matrix, name=f"{regime}_{instance.name}")
