from dataclasses import dataclass, field

import pytest
import torch

from hf_ext._validation import (
    check_count,
    check_finite,
    check_finite_fields,
    check_finite_gradients,
    check_finite_number,
    check_list,
)


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


def _with_grads(*grads):
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    return params


def test_check_finite_gradients_names_the_first_bad_gradient_and_lets_large_finite_ones_through():
    huge = torch.tensor([3e38, -3e38])  # finite, though its squared norm overflows
    empty, bad = torch.zeros(0), torch.tensor([[1.0, float("inf")]], dtype=torch.bfloat16)
    groups = [{"params": _with_grads(huge, empty)}, {"params": [torch.nn.Parameter(torch.ones(2))]}]
    check_finite_gradients("Opt", groups)
    groups.append({"params": _with_grads(torch.ones(3), bad, torch.full((2,), float("nan")))})
    with pytest.raises(FloatingPointError, match=r"Opt: the gradient of param_groups\[2\]\['params'\]\[1\] \(shape"):
        check_finite_gradients("Opt", groups)
    groups[2]["param_names"] = ["a", "b", "c"]
    with pytest.raises(FloatingPointError, match="Opt: the gradient of b holds NaN or inf"):
        check_finite_gradients("Opt", groups)


@pytest.mark.parametrize(
    ("value", "error"), [(-1, ValueError), (11, ValueError), (2.5, TypeError), ("3", TypeError), (True, TypeError)]
)
def test_check_count_refuses_a_wrong_type_and_a_value_out_of_range_by_name(value, error):
    check_count("Owner", "size", 3, 0, 10)
    with pytest.raises(error, match=rf"Owner: `size` must be an integer in 0..10, got {value!r}"):
        check_count("Owner", "size", value, 0, 10)
    with pytest.raises(ValueError, match="Owner: `size` must be a finite number, got nan"):  # as a config's NaN
        check_count("Owner", "size", float("nan"), 0, 10)


def test_check_finite_number_refuses_another_type_and_nan_and_reads_a_one_element_tensor():
    check_finite_number("Owner", "lr", torch.tensor(0.1))
    check_finite_number("Owner", "c", None, allow_none=True)
    with pytest.raises(TypeError, match=r"Owner: `lr` must be a number, got '0.1' \(str\)"):
        check_finite_number("Owner", "lr", "0.1")
    with pytest.raises(ValueError, match="Owner: `lr` must be a finite number, got nan"):
        check_finite_number("Owner", "lr", torch.tensor(float("nan")))


def test_check_list_refuses_a_scalar_or_string_and_an_item_of_another_kind_by_index():
    check_list("Owner", "seeds", [0, 1], int)
    check_list("Owner", "names", ("a", "b"))
    with pytest.raises(TypeError, match=r"Owner: `seeds` must be a list \(\[3\] for one\), got 3 \(int\)"):
        check_list("Owner", "seeds", 3, int)
    with pytest.raises(TypeError, match=r"Owner: `names` must be a list \(\['ab'\] for one\), got 'ab' \(str\)"):
        check_list("Owner", "names", "ab")
    with pytest.raises(TypeError, match=r"Owner: `seeds\[1\]` must be an integer, got 1.0 \(float\)"):
        check_list("Owner", "seeds", [0, 1.0], int)
