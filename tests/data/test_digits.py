import torch
from sklearn.datasets import load_digits

from hf_ext.data import digits
from hf_ext.models import digits_mlp


def test_the_digits_are_scikit_learns_scaled_to_the_unit_interval():
    x, y = digits()
    data = load_digits()
    assert x.shape == (1797, 64) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert torch.equal(x * 16, torch.tensor(data.data, dtype=torch.float32)) and x.max() == 1.0
    assert torch.equal(y, torch.tensor(data.target))


def test_the_digits_mlp_is_linear_tanh_linear_from_its_seed_and_leaves_the_global_generator():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    model = digits_mlp(16, seed=3)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert [type(layer) for layer in model] == [torch.nn.Linear, torch.nn.Tanh, torch.nn.Linear]
    assert (model[0].in_features, model[0].out_features, model[2].out_features) == (64, 16, 10)
    torch.manual_seed(3)  # what the recipes built by hand: seed the global generator, then the layers
    by_hand = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.Tanh(), torch.nn.Linear(16, 10))
    assert all(
        torch.equal(a, b) for a, b in zip(model.state_dict().values(), by_hand.state_dict().values(), strict=True)
    )
