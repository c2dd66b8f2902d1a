import math

import pytest
import torch

from hf_ext.models import tiny_causal_lm
from hf_ext.zo import AGZOConfig, MeZOConfig, ZOPerturbation, estimate_projected_gradients, zo_gradient_estimate


def _cosine(a, b):
    return torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()


@pytest.mark.parametrize("config", [MeZOConfig(eps=1e-2), AGZOConfig(eps=1e-2, rank=3)], ids=["mezo", "agzo"])
def test_projected_gradient_is_the_directional_derivative(least_squares, low_rank_batch, config):
    """On a quadratic the central difference is exact: g = <grad, Z> with Z the applied direction."""
    perturbation = ZOPerturbation(least_squares, config)
    estimate = estimate_projected_gradients(
        perturbation, lambda: least_squares(**low_rank_batch)["loss"], step_seed=3, refresh_subspaces=True
    )
    direction = {"proj.weight": torch.zeros(4, 6)}
    perturbation.add_direction_(estimate.seeds[0], 1.0, out=direction)
    expected = (least_squares.true_gradient(**low_rank_batch) * direction["proj.weight"]).sum().item()
    assert estimate.projected_grads[0] == pytest.approx(expected, rel=1e-3, abs=1e-5)
    assert estimate.forward_passes == 2


def test_mezo_estimate_is_unbiased_on_a_quadratic(least_squares, low_rank_batch):
    grads = zo_gradient_estimate(least_squares, low_rank_batch, MeZOConfig(eps=1e-2, num_perturbations=3000), seed=0)
    true = least_squares.true_gradient(**low_rank_batch)
    torch.testing.assert_close(grads["proj.weight"], true, atol=0.15 * true.abs().max().item(), rtol=0)


def test_agzo_estimate_lies_in_the_span_of_the_layer_inputs(least_squares, low_rank_batch):
    grads = zo_gradient_estimate(least_squares, low_rank_batch, AGZOConfig(eps=1e-2, rank=3, num_perturbations=2000), 0)
    estimate = grads["proj.weight"]
    _, _, vh = torch.linalg.svd(low_rank_batch["x"], full_matrices=False)
    input_span = vh[:3].T @ vh[:3]
    torch.testing.assert_close(estimate @ input_span, estimate, atol=1e-5, rtol=1e-4)
    # The true gradient lies in that 3-dim span too, so E[g Z] = grad / r there.
    true = least_squares.true_gradient(**low_rank_batch)
    assert _cosine(estimate, true) > 0.97
    torch.testing.assert_close(3 * estimate, true, atol=0.15 * true.abs().max().item(), rtol=0)


def test_agzo_aligns_better_than_mezo_on_a_full_rank_quadratic(make_least_squares):
    model = make_least_squares(in_features=64, out_features=16)
    generator = torch.Generator().manual_seed(2)
    batch = {"x": torch.randn(8, 64, generator=generator), "y": torch.randn(8, 16, generator=generator)}
    true = model.true_gradient(**batch)
    mezo = [_cosine(zo_gradient_estimate(model, batch, MeZOConfig(), s)["proj.weight"], true) for s in range(20)]
    agzo = [_cosine(zo_gradient_estimate(model, batch, AGZOConfig(rank=8), s)["proj.weight"], true) for s in range(20)]
    # 8 input rows span <= 8 of 64 dimensions: AGZO searches 16*8 directions instead of 16*64.
    assert sum(agzo) / 20 > 2 * sum(mezo) / 20


@pytest.mark.parametrize("config", [MeZOConfig(), AGZOConfig(rank=2)], ids=["mezo", "agzo"])
def test_hooked_forward_equals_forward_with_perturbed_weights(config):
    model, tokenizer = tiny_causal_lm(seed=1)
    model.eval()
    batch = tokenizer(["What is 3 + 4?", "Compute 8 - 5, please."], return_tensors="pt", padding=True)
    batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    perturbation = ZOPerturbation(model, config)
    with torch.no_grad():
        with perturbation.perturbed(seed=7, scale=0.0, capture_seed=1 if config.method == "agzo" else None):
            model(**batch)
        with perturbation.perturbed(seed=7, scale=0.05):
            hooked = model(**batch).loss
        before = {n: p.clone() for n, p in model.named_parameters()}
        assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
        perturbation.add_direction_(7, 0.05)
        explicit = model(**batch).loss
    torch.testing.assert_close(hooked, explicit, atol=1e-5, rtol=1e-5)


def test_one_point_estimator_shares_one_unperturbed_forward(least_squares, low_rank_batch):
    calls = []

    def loss_fn():
        calls.append(1)
        return least_squares(**low_rank_batch)["loss"]

    config = AGZOConfig(estimator="one_point", num_perturbations=3, rank=2, eps=1e-2)
    estimate = estimate_projected_gradients(ZOPerturbation(least_squares, config), loss_fn, 0, True)
    assert estimate.forward_passes == len(calls) == 4
    assert len(estimate.projected_grads) == 3 and estimate.loss == pytest.approx(loss_fn().item())


def test_non_finite_loss_is_reported_and_keeps_the_previous_subspaces(least_squares, low_rank_batch):
    perturbation = ZOPerturbation(least_squares, AGZOConfig(rank=2))
    estimate_projected_gradients(perturbation, lambda: least_squares(**low_rank_batch)["loss"], 0, True)
    subspace = perturbation.subspaces["proj"].clone()
    poisoned = {"x": low_rank_batch["x"] * math.nan, "y": low_rank_batch["y"]}
    before = least_squares.proj.weight.clone()
    estimate = estimate_projected_gradients(perturbation, lambda: least_squares(**poisoned)["loss"], 1, True)
    assert not estimate.finite
    assert torch.equal(perturbation.subspaces["proj"], subspace)
    assert torch.equal(least_squares.proj.weight, before)
