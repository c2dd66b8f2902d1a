import copy
import math
import pickle
import warnings

import pytest
import torch

from hf_ext.zo import AGZOConfig, MeZOConfig, ZOOptimizer, ZOPerturbation, estimate_projected_gradients
from hf_ext.zo.perturbation import derive_seed


def _parameters(model):
    return {name: param.detach().clone() for name, param in model.named_parameters()}


def _loss(model, batch):
    return lambda: model(**batch)["loss"]


def _trainer_step(optimizer, loss_fn, step, refresh_interval=1):
    """One step as ZOTrainer takes it: estimate, accumulate, step."""
    estimate = estimate_projected_gradients(optimizer.perturbation, loss_fn, step, step % refresh_interval == 0)
    optimizer.accumulate(estimate.seeds, estimate.projected_grads, 1 / len(estimate.seeds))
    optimizer.step()


@pytest.mark.parametrize(
    "copy_optimizer", [copy.deepcopy, lambda opt: pickle.loads(pickle.dumps(opt))], ids=["deepcopy", "pickle"]
)
def test_a_copied_optimizer_steps_exactly_like_the_original_on_its_copy_of_the_model(
    make_two_layers, low_rank_batch, copy_optimizer
):
    """Issue 43: torch pickles only defaults/state/param_groups, so a copy lost its perturbation."""
    model = make_two_layers()
    perturbation = ZOPerturbation(model, AGZOConfig(rank=2, other_params="isotropic"))
    optimizer = ZOOptimizer(perturbation, 0.1, 0.01, {"body.weight", "head.weight"})
    _trainer_step(optimizer, _loss(model, low_rank_batch), step=0)  # captures the subspaces
    optimizer.accumulate([11], [0.5], 1.0)  # a pending estimate travels with the copy
    start = _parameters(model)
    clone = copy_optimizer(optimizer)
    twin = clone.perturbation.model
    # torch's semantics: the copy has its own parameters, and they are its model's.
    assert twin is not model and clone.param_groups[0]["params"][0] is twin.body.weight
    for opt, net in ((optimizer, model), (clone, twin)):
        opt.step()
        _trainer_step(opt, _loss(net, low_rank_batch), step=1)
    copied = dict(twin.named_parameters())
    assert all(torch.equal(param, copied[name]) for name, param in model.named_parameters())
    assert all(not torch.equal(param, start[name]) for name, param in model.named_parameters())


def test_each_group_steps_with_its_own_learning_rate(make_least_squares):
    """Issue 43: only ``param_groups[0]["lr"]`` drove the update; a bias group at lr 0 still moved."""
    steps = {}
    for bias_lr in (0.1, 0.05, 0.0):
        model = make_least_squares(bias=True)
        before = _parameters(model)
        optimizer = ZOOptimizer(ZOPerturbation(model, MeZOConfig()), 0.1, 0.0, {"proj.weight"})
        assert [len(group["params"]) for group in optimizer.param_groups] == [1, 1]  # weight, then bias
        optimizer.param_groups[1]["lr"] = bias_lr
        optimizer.accumulate([3], [2.0], 1.0)
        optimizer.step()
        steps[bias_lr] = {name: param.detach() - before[name] for name, param in model.named_parameters()}
    assert torch.equal(steps[0.0]["proj.bias"], torch.zeros(4))
    torch.testing.assert_close(steps[0.05]["proj.bias"], steps[0.1]["proj.bias"] / 2)
    assert all(torch.equal(step["proj.weight"], steps[0.1]["proj.weight"]) for step in steps.values())


def test_each_group_decays_with_its_own_weight_decay(make_least_squares):
    model = make_least_squares(bias=True)
    before = _parameters(model)
    optimizer = ZOOptimizer(ZOPerturbation(model, MeZOConfig()), lr=0.1, weight_decay=0.0)
    optimizer.param_groups[1]["weight_decay"] = 0.5
    optimizer.step()  # nothing pending: only the decay acts
    assert torch.equal(model.proj.weight, before["proj.weight"])
    torch.testing.assert_close(model.proj.bias, before["proj.bias"] * (1 - 0.1 * 0.5))


def test_an_added_group_is_perturbed_and_updated_as_if_targeted_from_the_start(make_two_layers, low_rank_batch):
    """Issue 43: a group added with add_param_group was accepted and never updated."""
    finals = []
    for added_later in (False, True):
        model = make_two_layers()
        config = AGZOConfig(rank=2, target_modules=["body"] if added_later else ["body", "head"])
        optimizer = ZOOptimizer(ZOPerturbation(model, config), 0.1, 0.0, {"body.weight", "head.weight"})
        if added_later:
            optimizer.add_param_group({"params": [model.head.weight]})
        for step in range(3):
            _trainer_step(optimizer, _loss(model, low_rank_batch), step)
        finals.append(_parameters(model))
    assert not torch.equal(finals[0]["head.weight"], _parameters(make_two_layers())["head.weight"])
    assert all(torch.equal(finals[0][name], finals[1][name]) for name in finals[0])


def test_an_added_non_linear_parameter_gets_isotropic_noise(make_two_layers, low_rank_batch):
    model = make_two_layers()
    optimizer = ZOOptimizer(ZOPerturbation(model, AGZOConfig(rank=2)), lr=0.1)  # other_params="frozen"
    optimizer.add_param_group({"params": [model.body.bias], "lr": 0.01})
    before = model.body.bias.detach().clone()
    optimizer.step(_loss(model, low_rank_batch))
    assert "body.bias" in optimizer.perturbation.targets.others
    assert not torch.equal(model.body.bias, before)
    assert torch.equal(model.head.bias, _parameters(make_two_layers())["head.bias"])


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ({"params": [torch.zeros(3, requires_grad=True)]}, "`params` holds a tensor of shape \\(3,\\) that is not a"),
        ({"lr": math.nan}, "`lr` must be a finite number"),
        ({"weight_decay": -0.1}, "`weight_decay` must be >= 0"),
    ],
)
def test_add_param_group_refuses_what_a_zeroth_order_step_cannot_use(make_two_layers, group, message):
    model = make_two_layers()
    optimizer = ZOOptimizer(ZOPerturbation(model, AGZOConfig(target_modules=["body"])), 0.1, 0.0, {"body.weight"})
    with pytest.raises(ValueError, match=f"^ZOOptimizer.*{message}"):
        optimizer.add_param_group({"params": [model.head.weight]} | group)
    assert len(optimizer.param_groups) == 1 and "head" not in optimizer.perturbation.targets.linears


def test_bad_arguments_are_refused_by_name(least_squares):
    with pytest.raises(TypeError, match="ZOOptimizer: `perturbation` must be a ZOPerturbation"):
        ZOOptimizer(least_squares.parameters())
    perturbation = ZOPerturbation(least_squares, MeZOConfig())
    with pytest.raises(ValueError, match="ZOOptimizer: `lr` must be >= 0"):
        ZOOptimizer(perturbation, lr=-1.0)
    with pytest.raises(TypeError, match="ZOOptimizer: `seed` must be an integer"):
        ZOOptimizer(perturbation, seed=1.5)


def test_step_with_a_closure_takes_the_step_the_trainer_would(least_squares, low_rank_batch):
    """A closure returns the loss (no backward); the step runs the perturbed forwards through it."""
    twin = copy.deepcopy(least_squares)
    calls = []

    def closure():
        calls.append(1)
        return least_squares(**low_rank_batch)["loss"]

    config = MeZOConfig(num_perturbations=2)
    loss = ZOOptimizer(ZOPerturbation(least_squares, config), lr=0.01, seed=7).step(closure)
    assert len(calls) == 4
    # The same step by hand, as ZOTrainer takes it.
    perturbation = ZOPerturbation(twin, config)
    estimate = estimate_projected_gradients(perturbation, _loss(twin, low_rank_batch), derive_seed(7, 0), True)
    manual = ZOOptimizer(perturbation, lr=0.01)
    manual.accumulate(estimate.seeds, estimate.projected_grads, 1 / 2)
    assert manual.step() is None
    assert loss.item() == estimate.loss
    assert torch.equal(least_squares.proj.weight, twin.proj.weight)


def test_closure_steps_train_and_a_non_finite_loss_changes_nothing(least_squares, low_rank_batch):
    optimizer = ZOOptimizer(ZOPerturbation(least_squares, AGZOConfig(rank=3, eps=1e-2)), lr=0.03)
    losses = [optimizer.step(_loss(least_squares, low_rank_batch)).item() for _ in range(100)]
    assert losses[-1] < 0.65 * losses[0]  # 3.58 -> 2.16; y is random, so the optimum is above 0
    before = least_squares.proj.weight.detach().clone()
    poisoned = {"x": low_rank_batch["x"] * math.nan, "y": low_rank_batch["y"]}
    assert math.isnan(optimizer.step(_loss(least_squares, poisoned)).item())
    assert torch.equal(least_squares.proj.weight, before)


def test_a_closure_step_refuses_estimates_already_accumulated(least_squares, low_rank_batch):
    optimizer = ZOOptimizer(ZOPerturbation(least_squares, MeZOConfig()))
    optimizer.accumulate([1], [1.0], 1.0)
    with pytest.raises(RuntimeError, match="accumulate\\(\\) already recorded estimates"):
        optimizer.step(_loss(least_squares, low_rank_batch))


@pytest.mark.parametrize("architecture", ["linear", "moe"])
def test_state_dict_round_trip_under_a_scheduler_is_bit_exact(
    architecture, make_two_layers, low_rank_batch, make_tiny_mixtral, token_batch
):
    """``moe``: a router's and each expert tensor's ``(experts, in, r)`` bases are saved and restored too."""
    make_model, batch = (make_tiny_mixtral, token_batch) if architecture == "moe" else (make_two_layers, low_rank_batch)
    config = AGZOConfig(rank=2, subspace_refresh_interval=2)

    def build(model):
        optimizer = ZOOptimizer(ZOPerturbation(model, config), lr=0.05, seed=3)
        return optimizer, torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)

    def train(model, optimizer, scheduler, steps):
        for _ in range(steps):
            optimizer.step(_loss(model, batch))
            scheduler.step()

    straight = make_model()
    train(straight, *build(straight), steps=5)
    interrupted = make_model()
    optimizer, scheduler = build(interrupted)
    train(interrupted, optimizer, scheduler, steps=3)  # step 3 reuses the subspaces of step 2
    saved = copy.deepcopy(
        {"model": interrupted.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
    )
    resumed = make_model(seed=9)
    resumed.load_state_dict(saved["model"])
    optimizer, scheduler = build(resumed)
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    assert {key: basis.dim() for key, basis in optimizer.perturbation.subspaces.items() if "experts" in key} == (
        {"model.layers.0.mlp.experts.gate_up_proj": 3, "model.layers.0.mlp.experts.down_proj": 3}
        if architecture == "moe"
        else {}
    )
    train(resumed, optimizer, scheduler, steps=2)
    final = dict(resumed.named_parameters())
    assert all(torch.equal(param, final[name]) for name, param in straight.named_parameters())


def test_step_hooks_run_around_each_step(least_squares, low_rank_batch):
    optimizer = ZOOptimizer(ZOPerturbation(least_squares, MeZOConfig()), lr=0.01)
    before = least_squares.proj.weight.detach().clone()
    seen = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(("pre", opt is optimizer)))
    optimizer.register_step_post_hook(
        lambda opt, args, kwargs: seen.append(("post", torch.equal(least_squares.proj.weight, before)))
    )
    optimizer.step(_loss(least_squares, low_rank_batch))
    assert seen == [("pre", True), ("post", False)]


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_drops_the_pending_estimate(least_squares, set_to_none):
    """As torch's zero_grad drops accumulated gradients; a .grad set by someone else is handled as torch does."""
    optimizer = ZOOptimizer(ZOPerturbation(least_squares, MeZOConfig()), lr=0.1)
    before = least_squares.proj.weight.detach().clone()
    least_squares.proj.weight.grad = torch.ones_like(before)
    optimizer.accumulate([1], [1.0], 1.0)
    optimizer.zero_grad(set_to_none=set_to_none)
    optimizer.step()
    assert torch.equal(least_squares.proj.weight, before)
    grad = least_squares.proj.weight.grad
    assert grad is None if set_to_none else torch.equal(grad, torch.zeros_like(before))


@pytest.mark.parametrize("config", [MeZOConfig(), AGZOConfig(rank=4)], ids=["mezo", "agzo"])
def test_a_bf16_update_agrees_with_the_fp32_one(make_least_squares, config):
    updates = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = make_least_squares(in_features=32, out_features=16).to(dtype)
        perturbation = ZOPerturbation(model, config)
        perturbation.subspaces = {
            "proj": torch.linalg.qr(torch.randn(32, 4, generator=torch.Generator().manual_seed(0)))[0]
        }
        before = model.proj.weight.detach().float().clone()
        optimizer = ZOOptimizer(perturbation, lr=0.1, weight_decay=0.1)
        optimizer.accumulate([3, 4], [1.0, -0.5], 0.5)
        optimizer.step()
        updates[dtype] = model.proj.weight.detach().float() - before
    # Three bf16 roundings of the weight (decay, then one per seed), each within 2**-8 of |w|.
    bound = 3 * 2**-8 * model.proj.weight.detach().float().abs().max().item()
    torch.testing.assert_close(updates[torch.bfloat16], updates[torch.float32], atol=bound, rtol=0)
    assert updates[torch.float32].abs().max() > 10 * bound


def test_a_non_scalar_loss_is_refused_with_its_shape(least_squares, low_rank_batch):
    """Issue 72: a per-sample loss failed deep inside the step with a reshape error."""
    optimizer = ZOOptimizer(ZOPerturbation(least_squares, MeZOConfig()))
    with pytest.raises(ValueError, match=r"the loss must be a scalar, got a tensor of shape \(32,\)"):
        optimizer.step(lambda: least_squares.proj(low_rank_batch["x"]).pow(2).sum(-1))
    assert optimizer.state_dict()["state"][0]["step"] == 0


def test_a_bf16_update_that_rounds_to_nothing_is_reported_once_by_name(make_least_squares, low_rank_batch):
    """Issue 72: a bf16 step whose update rounded to exactly zero was accepted silently."""
    model = make_least_squares().to(torch.bfloat16)
    batch = {name: value.to(torch.bfloat16) for name, value in low_rank_batch.items()}
    optimizer = ZOOptimizer(ZOPerturbation(model, MeZOConfig(eps=0.1)), lr=1e-9)
    before = model.proj.weight.detach().clone()
    with pytest.warns(
        UserWarning, match=r"update of `proj.weight` \(torch.bfloat16\) rounded to exactly zero"
    ) as caught:
        optimizer.step(_loss(model, batch))
        optimizer.step(_loss(model, batch))
    assert len(caught) == 1 and "float32 master weights" in str(caught[0].message)
    assert torch.equal(model.proj.weight, before)
    fresh = ZOOptimizer(ZOPerturbation(model, MeZOConfig(eps=0.1)), lr=1e-1)  # an update that moves says nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh.step(_loss(model, batch))
    assert not torch.equal(model.proj.weight, before)


def test_a_closure_step_reads_its_losses_on_the_host_once_and_a_step_without_one_none(
    make_two_layers, low_rank_batch, host_reads
):
    """Each host read is a device sync on a GPU: the old step read each of its 2q losses (`.item()`) after its
    forward, so the next forward waited for it."""
    model = make_two_layers()
    optimizer = ZOOptimizer(ZOPerturbation(model, AGZOConfig(rank=2, num_perturbations=3)), lr=0.01)
    for _ in range(2):
        with host_reads() as reads:
            optimizer.step(_loss(model, low_rank_batch))
        assert reads == {"tolist": 1}
    estimate = estimate_projected_gradients(optimizer.perturbation, _loss(model, low_rank_batch), 5, False)
    optimizer.accumulate(estimate.seeds, estimate.projected_grads, 1 / 3)
    with host_reads() as reads:
        optimizer.step()
    assert reads == {}


@pytest.mark.parametrize("config", [MeZOConfig(weight_decay=0.1), AGZOConfig(rank=2, other_params="isotropic")])
def test_a_compiled_step_never_recompiles_and_steps_as_the_eager_one(make_two_layers, low_rank_batch, config):
    """torch.compile(optimizer.step) runs it eagerly (see ZOOptimizer): the old step was traced, and its step count,
    seeds and subspace keys made each step compile again."""
    models = [make_two_layers(), make_two_layers()]
    optimizers = [ZOOptimizer(ZOPerturbation(model, config), lr=0.01) for model in models]
    steps = [optimizers[0].step, torch.compile(optimizers[1].step)]
    torch._dynamo.reset()
    for index in range(3):
        with torch._dynamo.config.patch(error_on_recompile=index > 0):
            for model, step in zip(models, steps, strict=True):
                step(_loss(model, low_rank_batch))  # a new closure each step, as in a training loop
    for eager, compiled in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(compiled, eager)
