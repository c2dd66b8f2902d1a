import numpy as np
import pytest

from hf_ext.companion.combinatorial.set_cover import (
    AdaptiveNeighbourhood,
    LNSConfig,
    beasley,
    local_neighbourhood,
    random_neighbourhood,
    run_lns,
)


def recording(name: str, calls: list):
    def policy(instance, incumbent, size, rng):
        calls.append(name)
        return np.arange(size)

    return policy


def test_every_policy_is_tried_once_then_drawn_by_its_gain_per_second():
    calls = []
    adaptive = AdaptiveNeighbourhood(
        {"paying": recording("paying", calls), "idle": recording("idle", calls)}, exploration=0.1
    )
    rng = np.random.default_rng(0)
    for gain in (10.0, 0.0):  # the first call of each policy, in order
        adaptive(None, None, 3, rng)
        adaptive.observe(gain, seconds=1.0)
    assert calls == ["paying", "idle"]
    np.testing.assert_allclose(adaptive.probabilities(), [0.95, 0.05])  # exploration / 2 keeps the idle one alive
    for _ in range(400):
        adaptive(None, None, 3, rng)
        adaptive.observe(10.0 if adaptive.last == "paying" else 0.0, seconds=1.0)
    assert 0.9 < adaptive.counts["paying"] / 402 < 0.99 and adaptive.counts["idle"] > 0


def test_the_time_share_not_the_draw_count_follows_the_rates():
    """Two policies earning the same gain per second, one taking four times as long per call: each gets half of
    the time, so the slow one is drawn a fifth of the times."""
    adaptive = AdaptiveNeighbourhood({"slow": recording("slow", []), "fast": recording("fast", [])}, exploration=0.1)
    rng = np.random.default_rng(0)
    seconds = {"slow": 4.0, "fast": 1.0}
    spent = dict.fromkeys(seconds, 0.0)
    for _ in range(2000):
        adaptive(None, None, 3, rng)
        adaptive.observe(2.0 * seconds[adaptive.last], seconds=seconds[adaptive.last])
        spent[adaptive.last] += seconds[adaptive.last]
    np.testing.assert_allclose(adaptive.probabilities(), [0.2, 0.8])
    assert spent["slow"] / sum(spent.values()) == pytest.approx(0.5, abs=0.05)


def test_a_rate_follows_recent_gains_by_the_reaction_weight():
    adaptive = AdaptiveNeighbourhood({"only": recording("only", [])}, reaction=0.25)
    rng = np.random.default_rng(0)
    adaptive(None, None, 1, rng)
    adaptive.observe(8.0, seconds=2.0)  # first: the rate itself
    adaptive(None, None, 1, rng)
    adaptive.observe(0.0, seconds=1.0)
    assert adaptive.rates["only"] == pytest.approx(0.75 * 4.0)


def test_lns_reports_each_repair_and_keeps_its_guarantees():
    """Under run_lns: every iteration is observed once, with a non-negative gain and positive seconds, and the
    incumbent never worsens."""
    instance = beasley(300, 3000, 0.02, seed=0)
    adaptive = AdaptiveNeighbourhood({"local": local_neighbourhood, "random": random_neighbourhood})
    observed = []
    observe = adaptive.observe
    adaptive.observe = lambda gain, seconds: observed.append((gain, seconds)) or observe(gain, seconds)
    config = LNSConfig(neighbourhood_size=300, time_limit=20.0, sub_time_limit=0.3, max_iterations=6)
    result = run_lns(instance, config, neighbourhood=adaptive)
    assert len(observed) == result.iterations == 6 == sum(adaptive.counts.values())
    assert all(gain >= 0 and seconds > 0 for gain, seconds in observed)
    assert sum(gain for gain, _ in observed) == pytest.approx(result.values[0] - result.objective)
    assert instance.is_feasible(result.selected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"policies": {}}, "`policies` must name at least one"),
        ({"reaction": 0.0}, r"`reaction` must be in \(0, 1\] and `exploration` in \[0, 1\], got 0.0, 0.1"),
        ({"exploration": 1.5}, r"`exploration` in \[0, 1\], got 0.3, 1.5"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AdaptiveNeighbourhood(**({"policies": {"random": random_neighbourhood}} | kwargs))


@pytest.mark.parametrize("name", ["reaction", "exploration"])
def test_a_rate_that_is_not_a_number_is_named(name):
    """Issue 72: a string failed in a comparison naming nothing."""
    with pytest.raises(TypeError, match=f"AdaptiveNeighbourhood: `{name}` must be a number, got '0.3'"):
        AdaptiveNeighbourhood({"random": random_neighbourhood}, **{name: "0.3"})


def test_observing_before_any_choice_is_refused():
    with pytest.raises(RuntimeError, match="no neighbourhood was chosen yet"):
        AdaptiveNeighbourhood({"random": random_neighbourhood}).observe(1.0, 1.0)
