import importlib

import numpy as np
import pytest

from hf_ext.companion.combinatorial.set_cover import LNSConfig, LNSResult, beasley

harness = importlib.import_module("hf_ext.companion.evaluation.combinatorial.set_cover.harness")


@pytest.fixture(scope="module")
def instance():
    return beasley(30, 300, 0.05, seed=0)


@pytest.mark.parametrize(("method", "policy"), [("local_lns", "local"), ("random_lns", "random")])
def test_lns_methods_run_the_config_as_given(instance, monkeypatch, method, policy):
    seen = []

    def run_lns(instance, config, neighbourhood=None):
        seen.append(config)
        return LNSResult(np.ones(instance.n_columns, dtype=bool), 0.0, [0.0], [0.0], 0)

    monkeypatch.setattr(harness, "run_lns", run_lns)
    config = LNSConfig(policy=policy, time_limit=0.5, neighbourhood_size=50, seed=4)
    harness.run_method(method, instance, config)
    assert seen == [config]


@pytest.mark.parametrize(
    ("method", "own", "other"), [("local_lns", "local", "random"), ("random_lns", "random", "local")]
)
def test_an_lns_method_refuses_another_policy(instance, method, own, other):
    with pytest.raises(ValueError, match=rf"'{method}' runs LNSConfig\(policy='{own}'\), got policy='{other}'"):
        harness.run_method(method, instance, LNSConfig(policy=other))


def test_highs_and_greedy_give_anytime_curves_within_the_budget(instance):
    config = LNSConfig(time_limit=5.0)
    for method in ("highs", "greedy"):
        curve = harness.run_method(method, instance, config)
        assert curve["values"] and all(t <= config.time_limit for t in curve["times"])
        assert instance.is_feasible(curve["selected"]) and curve["values"][-1] == instance.objective(curve["selected"])


def test_an_unknown_method_is_named(instance):
    with pytest.raises(
        ValueError, match=r"`method` must be one of \['glns', 'glns_adaptive', 'local_lns', 'random_lns'.*got 'cl_lns'"
    ):
        harness.run_method("cl_lns", instance, LNSConfig())
