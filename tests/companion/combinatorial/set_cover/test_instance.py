import re

import numpy as np
import pytest

from hf_ext.companion.combinatorial.set_cover import (
    COST_REGIMES,
    beasley,
    cost_regime_instance,
    rail_like,
    read_orlib,
    read_rail,
)

# 3 rows, 4 columns; row 1 is covered by columns 1 and 2, row 2 by 2 and 3, row 3 by 3 and 4 (1-based)
ORLIB = """3 4
 2 3 4 1
2
 1 2
2 2 3
2
3 4
"""
RAIL = """3 4
2 1 1
3 2 1 2
4 2 2 3
1 1 3
"""


def _write(tmp_path, text, name="scp.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_orlib_reader_builds_costs_and_row_column_incidence(tmp_path):
    instance = read_orlib(_write(tmp_path, ORLIB))
    assert instance.costs.tolist() == [2, 3, 4, 1]
    assert instance.matrix.toarray().tolist() == [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]


def test_rail_reader_is_column_wise(tmp_path):
    instance = read_rail(_write(tmp_path, RAIL))
    assert instance.costs.tolist() == [2, 3, 4, 1]
    assert instance.matrix.toarray().tolist() == [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]


def test_a_row_no_column_covers_is_named(tmp_path):
    text = "3 2\n1 1\n1 1\n1 2\n0\n"
    with pytest.raises(ValueError, match=r"infeasible, no column covers row\(s\) \[2\]"):
        read_orlib(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3 4\n2 3 4 1\n2 1 2\n2 2 x\n", r"line 4: not a number: 'x'"),
        ("3 4\n2 3 4 1\n2 1 2\n2 2 9\n", r"line 4: a column of row 2 must be an integer in 1..4, got 9"),
        ("3 4\n2 3 4 1\n2 1 2\n", r"ends early, expected row 2's column count"),
        ("3 4\n2 -3 4 1\n2 1 2\n", r"line 2: cost 2 of 4 must be a finite number >= 0, got -3"),
        ("3 4\n2 nan 4 1\n2 1 2\n", r"line 2: cost 2 of 4 must be a finite number >= 0, got nan"),
    ],
)
def test_malformed_files_name_the_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_orlib(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("reader", "text", "message"),
    [
        (read_orlib, "2" + ORLIB[1:], "line 6: the header declares 2 rows, but the file goes on after the last"),
        (read_rail, "3 3" + RAIL[3:], "line 5: the header declares 3 columns, but the file goes on after the last"),
    ],
)
def test_numbers_past_what_the_header_declares_are_refused(tmp_path, reader, text, message):
    with pytest.raises(ValueError, match=f"scp.txt: {message}"):
        reader(_write(tmp_path, text))


def test_costs_may_be_any_float_literal(tmp_path):
    instance = read_orlib(_write(tmp_path, ORLIB.replace(" 2 3 4 1", " 2.0 3e0 4E+00 1e-0")))
    assert instance.costs.tolist() == [2, 3, 4, 1]
    assert read_rail(_write(tmp_path, RAIL.replace("3 2 1 2", "1e2 2 1 2"))).costs.tolist() == [2, 100, 4, 1]


def test_a_binary_file_is_named(tmp_path):
    path = tmp_path / "scp41.txt.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    with pytest.raises(ValueError, match=r"scp41.txt.gz: not a text file in the OR-Library format \(byte 0x8b"):
        read_orlib(path)


def test_generators_cover_every_row_within_their_regimes():
    instance = beasley(200, 2000, 0.02, cost_range=(1, 100), seed=3)
    counts = np.diff(instance.matrix.indptr)
    assert instance.matrix.shape == (200, 2000) and counts.min() >= 1
    assert 1 <= instance.costs.min() and instance.costs.max() <= 100
    assert abs(instance.matrix.nnz / (200 * 2000) - 0.02) < 0.005
    rail = rail_like(300, 3000, max_rows_per_column=12, seed=1)
    assert set(np.unique(rail.costs)) == {1.0, 2.0}
    assert np.diff(rail.matrix.indptr).max() <= 12 + 3  # plus the rows appended to guarantee coverage
    assert np.diff(rail.rows_to_columns.indptr).min() >= 1


def test_the_held_out_cost_regimes_keep_their_structure_and_change_only_the_costs():
    """correlated: every cost per covered row in 1-2 (greedy's ratios say little); rail_wide: costs 1-1000."""
    correlated = cost_regime_instance("correlated", 2000, seed=3)
    assert np.array_equal(correlated.matrix.indices, cost_regime_instance("beasley", 2000, seed=3).matrix.indices)
    per_row = correlated.costs / np.diff(correlated.matrix.indptr)
    assert correlated.matrix.shape == (100, 2000) and per_row.min() >= 1 and per_row.max() <= 2
    wide = cost_regime_instance("rail_wide", 2000, seed=3)
    assert 1 <= wide.costs.min() and wide.costs.max() <= 1000 and len(np.unique(wide.costs)) > 500
    with pytest.raises(ValueError, match=rf"`regime` must be one of {re.escape(str(list(COST_REGIMES)))}, got 'air'"):
        cost_regime_instance("air", 2000, seed=0)


def test_rows_of_and_columns_of_are_the_distinct_sorted_neighbours(tmp_path):
    instance = read_orlib(_write(tmp_path, ORLIB))  # 0-based: row 0 <- columns 0, 1; 1 <- 1, 2; 2 <- 2, 3
    assert instance.rows_of(np.array([2, 1, 2])).tolist() == [0, 1, 2]
    assert instance.columns_of(np.array([2])).tolist() == [2, 3]
    assert instance.rows_of(np.array([], dtype=int)).tolist() == []
    large = beasley(300, 4000, 0.02, seed=5)
    columns = np.random.default_rng(0).choice(4000, 500)
    rows = np.unique(large.matrix[:, columns].indices)
    assert np.array_equal(large.rows_of(columns), rows)
    assert np.array_equal(large.columns_of(rows), np.unique(large.rows_to_columns[rows].indices))


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: beasley(0, 40, 0.1), ValueError, "beasley: `n_rows` must be an integer >= 1, got 0"),
        (lambda: beasley(20, 2.5, 0.1), TypeError, "beasley: `n_columns` must be an integer >= 1, got 2.5"),
        (lambda: beasley(20, 40, "0.1"), TypeError, "beasley: `density` must be a number, got '0.1'"),
        (lambda: beasley(20, 40, 0.1, cost_range=5), TypeError, r"beasley: `cost_range` must be a pair"),
        (lambda: beasley(20, 40, 0.1, cost_range=(5, 1)), ValueError, r"`cost_range\[1\]` must be an integer >= 5"),
        (lambda: beasley(20, 40, 0.1, seed=-1), ValueError, "beasley: `seed` must be an integer >= 0, got -1"),
        (lambda: rail_like(-1, 40), ValueError, "rail_like: `n_rows` must be an integer >= 1, got -1"),
        (lambda: rail_like(20, 40, max_rows_per_column=1), ValueError, "`max_rows_per_column` must be an integer >= 2"),
        (lambda: rail_like(20, 40, seed=None), TypeError, "rail_like: `seed` must be an integer >= 0, got None"),
        (
            lambda: cost_regime_instance("rail", 0, 0),
            ValueError,
            "cost_regime_instance: `n_columns` must be an integer",
        ),
        (lambda: cost_regime_instance("rail", 200, 0, columns_per_row=0), ValueError, "`columns_per_row` must be an"),
        (
            lambda: cost_regime_instance("beasley", 200, 0, beasley_rows_per_column=float("nan")),
            ValueError,
            "cost_regime_instance: `beasley_rows_per_column` must be a finite number",
        ),
    ],
)
def test_generators_refuse_bad_sizes_and_seeds_by_name(make, error, message):
    """Issue 72: numpy's errors named nothing (``high <= 0``, ``expected non-negative integer``), a zero
    ``columns_per_row`` divided by zero, and a NaN rows-per-column drew a NaN density."""
    with pytest.raises(error, match=message):
        make()
