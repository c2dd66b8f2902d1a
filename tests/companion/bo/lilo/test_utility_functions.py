import pytest
import torch

from hf_ext.companion.bo.lilo import BetaCDFProductUtility, L1IdealUtility, PiecewiseLinearUtility

Y = torch.tensor([[0.2, 0.9], [0.8, 0.5]], dtype=torch.float64)


def test_utilities_by_hand():
    piecewise = PiecewiseLinearUtility([0.5, 0.6], [1.0, 2.0])
    # 1 * (0.2) + 2 * (0.6 + 0.2 * 0.3) ; 1 * (0.5 + 0.2 * 0.3) + 2 * 0.5
    torch.testing.assert_close(piecewise(Y), torch.tensor([0.2 + 2 * 0.66, 0.56 + 1.0], dtype=torch.float64))
    l1 = L1IdealUtility([0.8, 0.7], [1.0, 0.5])
    torch.testing.assert_close(l1(Y), torch.tensor([-(0.6 + 0.1), -(0.0 + 0.1)], dtype=torch.float64))
    beta = BetaCDFProductUtility([1.0, 1.0], [1.0, 1.0])  # Beta(1, 1) CDF is the identity
    torch.testing.assert_close(beta(Y), torch.tensor([0.18, 0.4], dtype=torch.float64))


def test_bad_utility_settings_are_refused_by_name():
    with pytest.raises(ValueError, match=r"PiecewiseLinearUtility: `thresholds` must be .* in \[0.0, 1.0\]"):
        PiecewiseLinearUtility([1.5], [1.0])
    with pytest.raises(ValueError, match="`weights` and `ideal` must have the same length"):
        L1IdealUtility([0.5, 0.5], [1.0])
