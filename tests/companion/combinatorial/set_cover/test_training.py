import pytest
import torch

from hf_ext.companion.combinatorial.set_cover import DenoiserTrainingConfig, train_denoiser


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


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"examples": 0}, "DenoiserTrainingConfig: `examples` must be an integer >= 1, got 0"),
        ({"region_size": 1}, "`region_size` must be an integer >= 2"),
        ({"learning_rate": 0.0}, "`learning_rate` must be > 0"),
        ({"learning_rate": float("nan")}, "learning_rate"),
    ],
)
def test_refuses_bad_settings(fields, message):
    with pytest.raises(ValueError, match=message):
        DenoiserTrainingConfig(**fields)
