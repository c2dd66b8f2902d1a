import pytest
import torch
from torch import nn

from hf_ext.optim import NGN, SPS, MuonWithAdamW, Scion, SymmetryCurvature
from hf_ext.recipes._optimizers import OPTIMIZERS, build_optimizer


def _model():
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


@pytest.mark.parametrize(
    ("name", "kind", "group"),
    [
        ("sgd", torch.optim.SGD, {"lr": 0.1, "momentum": 0.0}),
        ("sgd_momentum", torch.optim.SGD, {"lr": 0.1, "momentum": 0.7}),
        ("adamw", torch.optim.AdamW, {"lr": 0.1, "weight_decay": 0.0}),
        ("sps", SPS, {"lr": 0.1, "c": 0.3}),
        ("ngn", NGN, {"lr": 0.1, "momentum": 0.0}),
        ("ngn_m", NGN, {"lr": 0.1, "momentum": 0.7}),
        ("scion", Scion, {"lr": 0.1}),
        ("symmetry", SymmetryCurvature, {"lr": 0.1}),
        ("shampoo_style", SymmetryCurvature, {"lr": 0.1}),
        ("muon", MuonWithAdamW, {}),
    ],
)
def test_each_name_is_one_optimizer_with_the_settings_given(name, kind, group):
    optimizer = build_optimizer(name, _model(), 0.1, momentum=0.7, sps_c=0.3)
    assert type(optimizer) is kind
    assert all(optimizer.param_groups[0][key] == value for key, value in group.items())


def test_every_name_is_covered_and_an_unknown_one_is_refused():
    assert set(OPTIMIZERS) == {
        "sgd",
        "sgd_momentum",
        "adamw",
        "sps",
        "ngn",
        "ngn_m",
        "scion",
        "symmetry",
        "shampoo_style",
        "muon",
    }
    with pytest.raises(ValueError, match=r"build_optimizer: `name` must be one of \['sgd', .*got 'lamb'"):
        build_optimizer("lamb", _model(), 0.1)


def test_shampoo_style_is_the_one_sided_orthogonal_group():
    symmetry, shampoo = (build_optimizer(name, _model(), 0.1) for name in ("symmetry", "shampoo_style"))
    groups = [{key: value for key, value in group.items() if key != "params"} for group in shampoo.param_groups]
    assert groups != [
        {key: value for key, value in group.items() if key != "params"} for group in symmetry.param_groups
    ]
