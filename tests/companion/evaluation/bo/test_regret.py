import math

import pytest
import torch

from hf_ext.companion.evaluation.bo import regret_curves


def test_regret_curves_by_hand():
    curves = regret_curves(torch.tensor([1.0, 3.0, 2.0, 4.0]), optimum=4.0, tolerance=1.5)
    assert curves["simple"].tolist() == [3.0, 1.0, 1.0, 0.0]
    assert curves["cumulative"].tolist() == [3.0, 4.0, 6.0, 6.0]
    assert curves["lenient"].tolist() == [3.0, 3.0, 5.0, 5.0]
    with pytest.raises(ValueError, match="must be finite"):
        regret_curves(torch.tensor([math.inf]), optimum=0.0)
