import numpy as np
import pytest

from hf_ext.companion.es.compare import ecdf, wins_losses


def _record(method, function, final, trajectory=None):
    return {
        "method": method,
        "budget_multiplier": 100,
        "function": function,
        "instance": 1,
        "final": final,
        "trajectory": trajectory or [[1, final]],
    }


def test_wins_losses_and_sign_test():
    records = [_record("a", f, 1.0) for f in range(101, 113)] + [_record("b", f, 2.0) for f in range(101, 112)]
    records += [_record("a", 113, 1e-9), _record("b", 113, 1e-10), _record("b", 112, 0.5)]
    result = wins_losses(records, "a", "b", 100)
    assert (result["wins"], result["losses"], result["ties"]) == (11, 1, 1)
    assert result["p_value"] == pytest.approx(2 * 13 / 2**12)  # P(X <= 1) + P(X >= 11), X ~ Bin(12, 1/2)


def test_ecdf_counts_targets_reached_by_each_budget():
    records = [_record("a", 101, 1e-3, [[1, 10.0], [50, 1e-3]])]
    curve = ecdf(records, np.array([1, 49, 50]), targets=np.array([100.0, 1.0, 1e-3, 1e-8]))[("a", 100)]
    np.testing.assert_allclose(curve, [0.25, 0.25, 0.75])
