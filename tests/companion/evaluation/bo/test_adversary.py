import math

import pytest

from hf_ext.companion.bo import NoCorruption
from hf_ext.companion.evaluation.bo import FrequencyLimitedAdversary


@pytest.mark.parametrize(
    ("horizon", "exponent", "budget"),
    [(1, 0.25, 1), (15, 0.25, 1), (16, 0.25, 2), (81, 0.25, 3), (128, 1 / 7, 2), (127, 1 / 7, 1)],
)
@pytest.mark.parametrize("placement", ["random", "best"])
def test_adversary_never_exceeds_its_frequency_budget(horizon, exponent, budget, placement):
    adversary = FrequencyLimitedAdversary(horizon, magnitude=math.inf, exponent=exponent, placement=placement)
    assert adversary.budget == budget
    observed = [adversary.corrupt(t, float(t), best_so_far=t - 1.0) for t in range(horizon)]  # every round a new best
    assert sum(math.isinf(value) for value in observed) == budget == len(adversary.corrupted_rounds)
    if placement == "best":
        assert adversary.corrupted_rounds == list(range(budget))


def test_best_placement_only_corrupts_new_incumbents():
    adversary = FrequencyLimitedAdversary(100, magnitude=1e6, placement="best", direction=-1)
    assert adversary.corrupt(0, 1.0, best_so_far=2.0) == 1.0
    assert adversary.corrupt(1, 3.0, best_so_far=2.0) == 3.0 - 1e6
    assert NoCorruption().corrupt(0, 3.0, best_so_far=2.0) == 3.0


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"seed": -1}, ValueError, "`seed` must be an integer >= 0, got -1"),  # random.Random(-1) was Random(1)
        ({"seed": 1.5}, TypeError, "`seed` must be an integer, got 1.5"),
        ({"seed": True}, TypeError, "`seed` must be an integer, got True"),
        ({"seed": None}, TypeError, "`seed` must be an integer, got None"),  # drew unreproducible rounds
        ({"seed": "3"}, TypeError, "`seed` must be an integer, got '3'"),
        ({"horizon": 10.0}, TypeError, "`horizon` must be an integer, got 10.0"),
        ({"horizon": True}, TypeError, "`horizon` must be an integer, got True"),
        ({"horizon": 0}, ValueError, "`horizon` must be an integer >= 1, got 0"),
        ({"magnitude": "1"}, TypeError, "`magnitude` must be a number, got '1'"),
        ({"direction": True}, TypeError, "`direction` must be an integer, got True"),
    ],
)
def test_settings_of_the_wrong_type_or_range_are_refused_by_name(settings, error, message):
    with pytest.raises(error, match=f"FrequencyLimitedAdversary: {message}"):
        FrequencyLimitedAdversary(**{"horizon": 10} | settings)


def test_an_infinite_magnitude_and_a_large_seed_are_taken():
    assert FrequencyLimitedAdversary(10, magnitude=math.inf, seed=2**70).budget == 1
