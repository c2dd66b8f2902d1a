import importlib

import pytest
import torch

from hf_ext.companion.combinatorial.set_cover import DenoiserTrainingConfig, train_denoiser

highs = importlib.import_module("hf_ext.companion.combinatorial._highs")
training = importlib.import_module("hf_ext.companion.combinatorial.set_cover.training")


def test_training_lowers_the_loss_and_records_one_value_per_epoch():
    history = []
    train_denoiser(DenoiserTrainingConfig(examples=4, epochs=12, region_size=60, instance_columns=400), history)
    assert len(history) == 12
    assert sum(history[-3:]) < sum(history[:3])


def test_training_is_reproducible_from_its_seed_and_leaves_the_global_generator_alone():
    """Issue 37: it reseeded torch's global generator (torch.manual_seed), changing what every later draw gives."""
    config = DenoiserTrainingConfig(examples=2, epochs=1, region_size=40, instance_columns=300, seed=3)
    torch.manual_seed(11)
    first = train_denoiser(config)
    after = torch.rand(4)
    torch.manual_seed(12)
    second = train_denoiser(config)
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    torch.manual_seed(11)
    assert torch.equal(torch.rand(4), after)  # training drew nothing from it


def test_labels_are_solved_to_a_node_limit_not_a_time_limit(monkeypatch):
    """With a 1 s time limit the rail subproblems' labels were wherever HiGHS had got to, so the default denoiser
    differed with the machine's load; a node limit is work, and the time limit only a safety net."""
    calls, model = [], highs._model

    def spy(time_limit, threads, node_limit=None):
        calls.append((time_limit, node_limit))
        return model(time_limit, threads, node_limit)

    monkeypatch.setattr(highs, "_model", spy)
    training.training_examples(DenoiserTrainingConfig(examples=2, region_size=40, instance_columns=300, label_nodes=7))
    assert calls and set(calls) == {(training.LABEL_TIME_LIMIT, 7)}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"examples": 0}, "DenoiserTrainingConfig: `examples` must be an integer >= 1, got 0"),
        ({"region_size": 1}, "`region_size` must be an integer >= 2"),
        ({"label_nodes": 0}, "`label_nodes` must be an integer >= 1"),
        ({"learning_rate": 0.0}, "`learning_rate` must be > 0"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"seed": -1}, "`seed` must be an integer >= 0, got -1"),  # issue 72: numpy's error once training starts
    ],
)
def test_refuses_bad_settings(fields, message):
    with pytest.raises(ValueError, match=message):
        DenoiserTrainingConfig(**fields)
