from dataclasses import dataclass, field

import pytest

from hf_ext._validation import check_finite, check_finite_fields


@dataclass
class _Config:
    coef: float = 1.0
    budgets: list[float] = field(default_factory=lambda: [1.0, 2.0])
    name: str = "x"
    flag: bool = True
    limit: float = float("inf")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), [1.0, float("nan")]])
def test_check_finite_refuses_and_names_the_field(value):
    with pytest.raises(ValueError, match=r"Owner: `coef` must be a finite number"):
        check_finite("Owner", "coef", value)


def test_check_finite_allows_infinity_only_when_asked():
    check_finite("Owner", "limit", float("inf"), allow_infinite=True)
    with pytest.raises(ValueError, match="inf allowed, not NaN"):
        check_finite("Owner", "limit", float("nan"), allow_infinite=True)


def test_check_finite_fields_walks_every_field():
    check_finite_fields(_Config(), allow_infinite=["limit"])
    with pytest.raises(ValueError, match="`limit`"):
        check_finite_fields(_Config())
    with pytest.raises(ValueError, match="`budgets`"):
        check_finite_fields(_Config(budgets=[0.0, float("nan")]), allow_infinite=["limit"])
