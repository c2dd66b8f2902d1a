import pytest
import torch
from torch import nn
from torch.nn import functional as F

from hf_ext.optim import WorkerProblem, ring_allreduce_bytes, train_decentralized


def _problem() -> WorkerProblem:
    generator = torch.Generator().manual_seed(0)
    features, targets = torch.randn(64, 3, generator=generator), torch.randn(64, generator=generator)

    def make_model(seed):
        torch.manual_seed(seed)
        return nn.Linear(3, 1)

    def loss(model, x, y):
        return F.mse_loss(model(x)[:, 0], y)

    def evaluate(model):
        with torch.no_grad():
            return {"error": loss(model, features, targets).item()}

    return WorkerProblem(features, targets, make_model, loss, evaluate)


def test_the_ring_allreduce_sends_twice_the_parameters_less_one_share():
    model = nn.Linear(3, 2)  # 8 float32 numbers: 32 bytes
    assert ring_allreduce_bytes(model, 4) == 2 * 3 / 4 * 32 and ring_allreduce_bytes(model, 1) == 0
    assert ring_allreduce_bytes(model.double(), 2) == 64


@pytest.mark.parametrize("topology", ["ring", "complete", "ddp"])
def test_on_one_process_every_run_is_sgd_with_the_one_over_t_step_size(topology):
    problem = _problem()
    run = train_decentralized(problem, topology, 3, lr=0.1, steps=7, batch_size=5, lr_decay_steps=2, eval_every=3)
    model = problem.make_model(3)  # by hand: the rows of generator 1000 * seed + rank, lr * t0 / (t + t0)
    generator, errors = torch.Generator().manual_seed(3000), []
    for step in range(8):
        if step in (0, 3, 6, 7):
            errors.append(problem.evaluate(model)["error"])
        if step == 7:
            break
        rows = torch.randint(64, (5,), generator=generator)
        model.zero_grad()
        problem.loss(model, problem.features[rows], problem.targets[rows]).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * 2 / (step + 2) * p.grad
    assert [point["step"] for point in run["curve"]] == [0, 3, 6, 7]
    assert [point["error"] for point in run["curve"]] == pytest.approx(errors, rel=1e-6)
    assert {point["consensus_distance"] for point in run["curve"]} == {0.0}
    assert run["bytes_per_step"] == 0 and run["seconds_per_step"] > 0
