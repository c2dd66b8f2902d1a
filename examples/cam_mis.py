"""Train a discrete diffusion MIS solver by combinatorial adjoint matching on a CPU, and compare it with greedy."""

import tempfile

import torch

from hf_ext.companion.combinatorial.cam import CAMConfig, FlipGNN, batch_graphs, erdos_renyi, solve, train
from hf_ext.companion.evaluation.combinatorial.cam import exact_mis, greedy_mis

torch.set_num_threads(1)  # graphs this small train faster on one thread

train_graphs = [erdos_renyi(60, 0.15, seed) for seed in range(16)]
test_graphs = [erdos_renyi(60, 0.15, 1000 + seed) for seed in range(4)]

config = CAMConfig(problem="mis", steps=8, chains=8, train_steps=150, seed=0)
model, history = train(config, train_graphs)  # rollouts without gradients, adjoint benefits, KL-regularised fit
print(f"rollout energy per node {history[0]['energy_per_node']:.3f} -> {history[-1]['energy_per_node']:.3f}")

sizes, solution = solve(model, "mis", batch_graphs(test_graphs), steps=8, chains=8)  # best of 8 chains
greedy = [int(greedy_mis(g).sum()) for g in test_graphs]
exact = [int(exact_mis(g, time_limit=30)[0].sum()) for g in test_graphs]
print(f"CAM {sizes.tolist()}  greedy {greedy}  exact (HiGHS) {exact}")

with tempfile.TemporaryDirectory() as directory:
    model.save_pretrained(directory)  # config.json + model.safetensors
    assert torch.equal(solve(FlipGNN.from_pretrained(directory), "mis", batch_graphs(test_graphs), 8, 8)[0], sizes)
