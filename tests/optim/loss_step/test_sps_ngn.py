"""SPS and NGN: the update rules against hand computation, momentum, weight decay, norms, state, bad input."""

import copy
import math
import pickle

import pytest
import torch
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

from hf_ext.optim import NGN, SPS

X0 = [1.0, 2.0]  # f = ||x||^2 / 2 = 2.5 and g = x, ||g||^2 = 5 at X0


def _quadratic_step(optimizer_cls, steps=1, x0=X0, **kwargs):
    x = torch.nn.Parameter(torch.tensor(x0))
    optimizer = optimizer_cls([x], **kwargs)

    def closure():
        optimizer.zero_grad()
        loss = 0.5 * x.square().sum()
        loss.backward()
        return loss

    for _ in range(steps):
        optimizer.step(closure)
    return x.detach(), optimizer


@pytest.mark.parametrize(
    ("kwargs", "gamma"),
    [
        ({"lr": 10.0, "c": 0.5}, 1.0),  # Polyak: 2.5 / (0.5 * 5)
        ({"lr": 0.3, "c": 0.5}, 0.3),  # capped at gamma_b
        ({"lr": 10.0, "c": 0.5, "f_star": 0.5}, 0.8),  # (2.5 - 0.5) / 2.5
    ],
)
def test_sps_max_step_by_hand(kwargs, gamma):
    x, optimizer = _quadratic_step(SPS, **kwargs)
    torch.testing.assert_close(x, (1 - gamma) * torch.tensor(X0))
    assert optimizer.step_sizes() == [pytest.approx(gamma)]


@pytest.mark.parametrize(("sigma", "gamma"), [(1.0, 0.5), (0.1, 0.1 / (1 + 0.1 * 5 / 5)), (100.0, 100 / 101)])
def test_ngn_step_by_hand(sigma, gamma):
    x, optimizer = _quadratic_step(NGN, lr=sigma)  # gamma = sigma / (1 + sigma * 5 / (2 * 2.5))
    torch.testing.assert_close(x, (1 - gamma) * torch.tensor(X0))
    assert optimizer.step_sizes() == [pytest.approx(gamma)]


def test_ngn_momentum_two_steps_by_hand():
    # gamma = 0.5 at both steps (f / ||g||^2 stays 1/2 on this quadratic); d1 = 0.5 * 0.5 x0, x1 = 0.75 x0;
    # d2 = 0.5 d1 + 0.5 * 0.5 x1 = 0.3125 x0, x2 = x1 - d2 = 0.4375 x0.
    x, _ = _quadratic_step(NGN, steps=2, lr=1.0, momentum=0.5)
    torch.testing.assert_close(x, 0.4375 * torch.tensor(X0))


def test_decoupled_weight_decay_is_scaled_by_the_effective_step():
    x, _ = _quadratic_step(SPS, lr=0.3, weight_decay=0.1)
    torch.testing.assert_close(x, (1 - 0.3 * 0.1 - 0.3) * torch.tensor(X0))


def _two_groups(norm):
    a, b = torch.nn.Parameter(torch.tensor(X0)), torch.nn.Parameter(torch.tensor([3.0]))
    optimizer = SPS([{"params": [a]}, {"params": [b]}], lr=10.0, c=0.5, norm=norm)
    loss = 0.5 * (a.square().sum() + b.square().sum())  # 7
    loss.backward()
    optimizer.set_loss(loss)
    optimizer.step()
    return optimizer.step_sizes()


def test_global_norm_gives_one_step_size_and_per_group_one_each():
    assert _two_groups("global") == [pytest.approx(1.0)] * 2  # 7 / (0.5 * 14)
    assert _two_groups("per_group") == [pytest.approx(7 / 2.5), pytest.approx(7 / 4.5)]


def _manual_step(optimizer, p, loss, grad):
    p.grad = torch.tensor(grad)
    optimizer.set_loss(loss)
    optimizer.step()
    return optimizer.step_sizes()[0]


def test_smoothed_bound_limits_the_growth_of_the_step_size():
    p = torch.nn.Parameter(torch.zeros(2))
    smoothed, plain = SPS([p], lr=10.0, c=1.0, bound_growth=2.0), SPS([p], lr=10.0, c=1.0)
    assert _manual_step(smoothed, p, 0.1, [1.0, 0.0]) == pytest.approx(0.1)
    assert _manual_step(smoothed, p, 5.0, [1.0, 0.0]) == pytest.approx(0.2)  # 2 x the previous, not 5
    assert _manual_step(plain, p, 5.0, [1.0, 0.0]) == pytest.approx(5.0)


def test_zero_gradient_takes_the_cap_and_moves_nothing():
    p = torch.nn.Parameter(torch.ones(2))
    assert _manual_step(SPS([p], lr=0.7), p, 1.0, [0.0, 0.0]) == pytest.approx(0.7)
    assert _manual_step(NGN([p], lr=0.7), p, 0.0, [0.0, 0.0]) == pytest.approx(0.7)
    assert torch.equal(p.detach(), torch.ones(2))


def test_state_dict_round_trip_continues_identically(tmp_path):
    x, optimizer = _quadratic_step(NGN, steps=2, lr=1.0, momentum=0.9, weight_decay=0.01)
    torch.save(optimizer.state_dict(), tmp_path / "optimizer.pt")
    copy = torch.nn.Parameter(x.clone())
    restored = NGN([copy], lr=5.0)
    restored.load_state_dict(torch.load(tmp_path / "optimizer.pt"))
    saved = optimizer.state_dict()["state"][0]
    assert saved["step"] == 2 and saved["step_size"] == optimizer.step_sizes()[0]  # counters in state, as torch's
    assert restored.state[copy]["step"] == 2 and restored.param_groups[0]["lr"] == 1.0
    assert "steps" not in restored.param_groups[0] and "step_size" not in restored.param_groups[0]
    assert restored.step_sizes() == optimizer.step_sizes()
    original = optimizer.param_groups[0]["params"][0]
    for opt, p in ((optimizer, original), (restored, copy)):
        opt.zero_grad()
        loss = 0.5 * p.square().sum()
        loss.backward()
        opt.set_loss(loss)
        opt.step()
    torch.testing.assert_close(copy.detach(), original.detach())


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (SPS, {"lr": -0.1}, r"SPS: `lr` must be > 0, got -0.1"),
        (NGN, {"lr": 0.0}, r"NGN: `lr` must be > 0, got 0.0"),
        (SPS, {"c": -1.0}, r"SPS: `c` must be > 0, got -1.0"),
        (SPS, {"bound_growth": 1.0}, r"SPS: `bound_growth` must be None or > 1, got 1.0"),
        (NGN, {"momentum": 1.0}, r"NGN: `momentum` must be in \[0, 1\), got 1.0"),
        (SPS, {"weight_decay": -0.1}, r"SPS: `weight_decay` must be >= 0, got -0.1"),
        (NGN, {"norm": "layer"}, r"NGN: `norm` must be one of \['global', 'per_group'\], got 'layer'"),
        (SPS, {"f_star": math.nan}, r"SPS: `f_star` must be a finite number, got nan"),
    ],
)
def test_bad_arguments_are_refused_at_construction(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls([torch.nn.Parameter(torch.zeros(1))], **kwargs)


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (SPS, {"lr": "0.1"}, r"^SPS: `lr` must be a number, got '0.1' \(str\)$"),
        (NGN, {"momentum": None}, r"^NGN: `momentum` must be a number, got None \(NoneType\)$"),
        (SPS, {"bound_growth": "2"}, r"^SPS: `bound_growth` must be a number or None, got '2' \(str\)$"),
    ],
)
def test_a_setting_that_is_not_a_number_is_refused_by_name(cls, kwargs, message):
    """Issue 72: ``SPS(p, lr="0.1")`` failed inside a comparison, naming no setting."""
    with pytest.raises(TypeError, match=message):
        cls([torch.nn.Parameter(torch.zeros(1))], **kwargs)


@pytest.mark.parametrize(
    ("optimizer", "loss", "error", "message"),
    [
        (lambda p: SPS(p, f_star=1.0), 0.5, ValueError, r"SPS: the loss 0.5 is below `f_star` = 1.0"),
        (lambda p: NGN(p), -0.5, ValueError, r"NGN: the loss must be >= 0, got -0.5"),
        (lambda p: NGN(p), math.nan, FloatingPointError, r"NGN: the training loss is nan at step 0"),
        (lambda p: SPS(p), math.inf, FloatingPointError, r"SPS: the training loss is inf at step 0"),
    ],
)
def test_unusable_loss_raises_and_leaves_the_parameters_untouched(optimizer, loss, error, message):
    p = torch.nn.Parameter(torch.ones(2))
    opt = optimizer([p])
    p.grad = torch.ones(2)
    opt.set_loss(torch.tensor(loss))
    with pytest.raises(error, match=message):
        opt.step()
    assert torch.equal(p.detach(), torch.ones(2)) and not opt.state[p]


def test_step_without_a_loss_says_how_to_give_one():
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    with pytest.raises(RuntimeError, match=r"SPS.step\(\) needs the loss: call step\(closure\), or set_loss"):
        SPS([p]).step()


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_torch_distributed_checkpoint_lays_out_a_fresh_optimizers_state(momentum):
    """get_optimizer_state_dict steps a fresh optimizer on zero gradients, with no loss, to lay out the state that a
    checkpoint is then loaded into: that step moves nothing and creates the state (step 0 and the momentum buffers)."""
    model = torch.nn.Linear(3, 2)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = NGN(model.parameters(), lr=0.5, momentum=momentum)
    state = get_optimizer_state_dict(model, optimizer)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    buffers = [entry["momentum_buffer"] for entry in state["state"].values() if "momentum_buffer" in entry]
    assert len(buffers) == (2 if momentum else 0) and all(not b.any() for b in buffers)
    assert [(entry["step"], entry["step_size"]) for entry in state["state"].values()] == [(0, 0.0)] * 2


@pytest.mark.parametrize(
    ("cls", "kwargs"), [(SPS, {"f_star": -1.0, "bound_growth": 2.0}), (NGN, {"norm": "per_group", "momentum": 0.5})]
)
@pytest.mark.parametrize(
    "copier", [copy.deepcopy, lambda obj: pickle.loads(pickle.dumps(obj))], ids=["deepcopy", "pickle"]
)
def test_a_copy_keeps_every_setting_and_steps_identically(cls, kwargs, copier):
    """torch pickles only defaults, state and param_groups: f_star, bound_growth and norm live there now (copies
    raised AttributeError on 'f_star' and 'norm')."""
    x, optimizer = _quadratic_step(cls, steps=2, lr=1.0, **kwargs)
    param = optimizer.param_groups[0]["params"][0]
    param_copy, optimizer_copy = copier((param, optimizer))
    for p, opt in ((param, optimizer), (param_copy, optimizer_copy)):
        opt.zero_grad()
        loss = 0.5 * p.square().sum()
        loss.backward()
        opt.step(lambda loss=loss: loss)
    assert torch.equal(param_copy, param) and optimizer_copy.defaults.items() >= optimizer.defaults.items()


def test_f_star_and_bound_growth_are_per_group():
    a, b = torch.nn.Parameter(torch.tensor(X0)), torch.nn.Parameter(torch.tensor([3.0]))
    optimizer = SPS([{"params": [a], "f_star": 2.0}, {"params": [b]}], lr=10.0, c=0.5, norm="per_group")
    loss = 0.5 * (a.square().sum() + b.square().sum())  # 7; ||g_a||^2 = 5, ||g_b||^2 = 9
    loss.backward()
    optimizer.step(lambda: loss)
    assert optimizer.step_sizes() == [pytest.approx((7 - 2) / 2.5), pytest.approx(7 / 4.5)]
    with pytest.raises(ValueError, match=r"SPS: the loss 0.5 is below `f_star` = 2.0"):
        optimizer.step(lambda: torch.tensor(0.5))


@pytest.mark.parametrize(
    ("cls", "group", "message"),
    [
        (SPS, {"lr": -1.0}, r"SPS: `lr` must be > 0, got -1.0"),
        (NGN, {"momentum": 1.5}, r"NGN: `momentum` must be in \[0, 1\), got 1.5"),
        (NGN, {"weight_decay": float("nan")}, r"NGN: `weight_decay` must be a finite number, got nan"),
        (SPS, {"c": 0.0}, r"SPS: `c` must be > 0, got 0.0"),
        (SPS, {"f_star": float("inf")}, r"SPS: `f_star` must be a finite number, got inf"),
        (SPS, {"norm": "per_group"}, r"SPS: `norm` is one setting for all groups \('global'\), got 'per_group'"),
    ],
)
def test_an_added_group_is_checked_and_a_refused_one_not_kept(cls, group, message):
    optimizer = cls([torch.nn.Parameter(torch.ones(2))])
    with pytest.raises(ValueError, match=message):
        optimizer.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))], **group})
    assert len(optimizer.param_groups) == 1


def _mlp_and_closure(build_optimizer):
    """A 2-layer MLP on a fixed batch, its optimizer over two groups (weights, biases) and the closure."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, y = torch.randn(6, 4), torch.randn(6, 3)
    weights = [p for p in model.parameters() if p.dim() == 2]
    biases = [p for p in model.parameters() if p.dim() == 1]
    optimizer = build_optimizer(weights, biases)

    def closure():
        optimizer.zero_grad()
        loss = (model(x) - y).square().mean()
        loss.backward()
        return loss

    return model, optimizer, closure


BUILDS = {  # every branch of the step: momentum or not, weight decay, the smoothed cap, both norms, a tensor lr
    "SPS": lambda w, b: SPS(
        [{"params": w, "momentum": 0.5, "weight_decay": 0.1, "bound_growth": 2.0}, {"params": b}],
        lr=torch.tensor(0.5),
        norm="per_group",
    ),
    "NGN": lambda w, b: NGN([{"params": w}, {"params": b, "momentum": 0.9, "weight_decay": 0.1}], lr=0.5),
}


@pytest.mark.parametrize("name", BUILDS)
def test_torch_compile_compiles_the_step_once_and_matches_eager(name, compiled_and_eager):
    """The step counts, step sizes and ``lr`` (a tensor, under a scheduler) are tensors: compiled, the step compiles
    at the first call and never again (the old Python-number step recompiled at every step), and moves the
    parameters as the eager step does."""
    eager, compiled = compiled_and_eager(lambda: _mlp_and_closure(BUILDS[name]))
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(b, a)


@pytest.mark.parametrize("name", BUILDS)
def test_a_step_reads_one_value_from_the_device(name, host_reads):
    """Whether the loss is usable, so that a bad one raises before anything moves; the loss, ``||g||^2`` and the step
    size stay tensors (the old step read the loss, the norms and the step size back: three waits on a GPU)."""
    _, optimizer, closure = _mlp_and_closure(BUILDS[name])
    for _ in range(2):
        with host_reads() as reads:
            optimizer.step(closure)
        assert reads.total() == 1
