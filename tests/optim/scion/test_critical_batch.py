import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from hf_ext.optim import Constants, Scion, critical_batch_size, measure_constants


class Quadratic(nn.Module):
    """f_i(w) = 0.5 ||w - y_i||^2: gradients, noise and curvature known in closed form."""

    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(w.clone())

    def forward(self, y, labels):
        return SimpleNamespace(loss=0.5 * (self.w - y).pow(2).sum())


def _batch(y, tokens=5):
    return {"y": y, "labels": torch.zeros(1, tokens + 1, dtype=torch.long)}


def test_measured_constants_match_the_closed_form_of_a_quadratic():
    n, w0 = 4, torch.tensor([1.0, 2.0, -1.0, 0.5], dtype=torch.float64)
    ys = [
        torch.tensor(v, dtype=torch.float64) for v in ([0.0, 0.0, 0.0, 1.0], [0.5, 1.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4])
    ]
    model = Quadratic(w0)
    optimizer = Scion(model.parameters(), lr=0.1)  # one vector: the rms norm, ||x|| = ||x||_2 / sqrt(n)
    found = measure_constants(model, optimizer, [_batch(y) for y in ys], f_star=0.0, probe_lr=1e-2)
    y_bar = sum(ys) / 3
    # The gradient w - y_bar moves exactly as w: L = ||dw||_* / ||dw|| = sqrt(n) ||dw|| / (||dw|| / sqrt(n)) = n.
    assert found.smoothness == pytest.approx(n, rel=1e-9)
    assert found.norm_ratio == pytest.approx(math.sqrt(n), rel=1e-9)  # ||.||_* / ||.||_2 = sqrt(n) for every vector
    deviations = sum((y - y_bar).pow(2).sum().item() for y in ys)
    assert found.noise == pytest.approx(math.sqrt(5 * deviations / 2), rel=1e-9)  # 5 predicted tokens per batch
    loss = sum(0.5 * (w0 - y).pow(2).sum().item() for y in ys) / 3
    assert found.loss == pytest.approx(loss)
    w1 = w0 - 1e-2 * math.sqrt(n) * (w0 - y_bar) / (w0 - y_bar).norm()  # the probe step
    kls = [
        math.sqrt(n) * (w - y_bar).norm().item() / (sum(0.5 * (w - y).pow(2).sum().item() for y in ys) / 3)
        for w in (w0, w1)
    ]
    assert found.kl == pytest.approx(min(kls), rel=1e-9)
    assert torch.equal(model.w.data, w0) and not optimizer.state  # weights and optimizer state untouched


def test_critical_batch_size_by_hand():
    constants = Constants(
        smoothness=2.0, kl=0.5, norm_ratio=3.0, noise=4.0, loss=5.0, f_star=0.0, tokens_per_micro_batch=64
    )
    small, large = critical_batch_size(1e6, constants), critical_batch_size(8e6, constants)
    assert small.tokens_per_step == pytest.approx((1e6 * 0.5 * 3 * 4 / 2) ** (2 / 3))
    assert small.lr == pytest.approx(small.tokens_per_step / (0.5 * 1e6))
    assert small.steps == pytest.approx(1e6 / small.tokens_per_step)
    # 8x the budget: 4x the tokens per step, half the step size (the schedule's rule).
    assert large.tokens_per_step / small.tokens_per_step == pytest.approx(4.0)
    assert large.lr / small.lr == pytest.approx(0.5)
    assert small.to_dict()["constants"]["noise"] == 4.0


@pytest.mark.parametrize(
    ("budget", "change", "message"),
    [
        (0.0, {}, "`budget` must be > 0"),
        (float("inf"), {}, "`budget` must be a finite number"),
        (1e6, {"smoothness": 0.0}, "the constant `smoothness` must be > 0"),
        (1e6, {"noise": float("nan")}, "`noise` must be a finite number"),
    ],
)
def test_critical_batch_size_refuses_what_the_rule_cannot_use(budget, change, message):
    values = {"smoothness": 1.0, "kl": 1.0, "norm_ratio": 1.0, "noise": 1.0, "loss": 1.0, "f_star": 0.0}
    with pytest.raises(ValueError, match=message):
        critical_batch_size(budget, Constants(**values | change, tokens_per_micro_batch=1))


def test_measures_a_small_llama_without_changing_it():
    config = LlamaConfig(
        vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = torch.randint(0, 40, (4, 2, 12), generator=torch.Generator().manual_seed(1))
    found = measure_constants(model, Scion(model), [{"input_ids": x, "labels": x} for x in ids])
    for name in ("smoothness", "kl", "norm_ratio", "noise"):
        assert math.isfinite(getattr(found, name)) and getattr(found, name) > 0, name
    assert found.tokens_per_micro_batch == 22
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    with pytest.raises(ValueError, match="at least 2 micro-batches"):
        measure_constants(model, Scion(model), [{"input_ids": ids[0], "labels": ids[0]}])
