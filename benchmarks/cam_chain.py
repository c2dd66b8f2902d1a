"""Does CAM's chain learn to end in a maximum independent set? Measured where every answer is known: a 4-node graph.

    python benchmarks/cam_chain.py                                  # beta 1.02 and 2.04, tau_end 0.2 and 0.01
    python benchmarks/cam_chain.py --betas 2.04 --tau-ends 0.01 --seeds 0 1 2 3 4

On the graph with edges 0-1, 1-2, 2-3, 0-2 (maximum independent sets {0, 3} and {1, 3}, energy -2), trains CAM
(``CAMConfig`` defaults but ``beta``, ``tau_end`` and ``seed``) and runs 4000 chains from uniform states, before and
after training. Prints per (beta, tau_end, seed) the probability that the chain's last state x_T is a maximum
independent set, the mean terminal energy, the fraction of conflict-free x_T, and per step the mean flip rate and the
adjoint's signal (mean |benefit|; 0 means that step gets no training signal). Decoded sizes cannot show any of this:
the decoder repairs every state. A JSON object on the last line. Seconds per run on one core.
"""

import statistics

import numpy as np
import torch
from _harness import benchmark_parser, emit, save_json

from hf_ext.companion.combinatorial.cam import (
    CAMConfig,
    Graph,
    batch_graphs,
    chain_diagnostics,
    initial_model,
    is_independent,
    rollout,
    train,
)

GRAPH = Graph(4, np.array([[0, 1], [1, 2], [2, 3], [0, 2]]))
MAXIMUM = 2


def measure(model, config: CAMConfig, chains: int = 4000) -> dict:
    batch = batch_graphs([GRAPH])
    trajectory = rollout(model, batch, config.steps, chains, torch.Generator().manual_seed(5))
    terminal = trajectory.states[-1]
    maximum = is_independent(batch, terminal) & (terminal.sum(1) == MAXIMUM)
    diagnostics = chain_diagnostics("mis", batch, trajectory, config.beta)
    return {
        "p_maximum_independent_set": maximum.float().mean().item(),
        "terminal_energy": diagnostics["energy_per_node"] * GRAPH.num_nodes,
        "conflict_free": diagnostics["conflict_free"],
        "flip_rate": [round(v, 3) for v in diagnostics["flip_rate"]],
        "adjoint_signal": [round(v, 3) for v in diagnostics["adjoint_signal"]],
    }


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2], output_dir="outputs/benchmarks/cam_chain")
    parser.add_argument("--betas", type=float, nargs="+", default=[1.02, 2.04], help="MIS edge penalties")
    parser.add_argument("--tau-ends", type=float, nargs="+", default=[0.2, 0.01], help="final temperatures")
    parser.add_argument("--train-steps", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs, summary = [], {}
    for beta in args.betas:
        for tau_end in args.tau_ends:
            found = []
            for seed in args.seeds:
                config = CAMConfig(beta=beta, tau_end=tau_end, train_steps=args.train_steps, seed=seed)
                before = measure(initial_model(config), config)
                after = measure(train(config, [GRAPH], progress=False)[0], config)
                runs.append({"beta": beta, "tau_end": tau_end, "seed": seed, "initial": before, "trained": after})
                found.append(after["p_maximum_independent_set"])
                print(
                    f"beta {beta} tau_end {tau_end} seed {seed}: P(x_T maximum IS) "
                    f"{before['p_maximum_independent_set']:.3f} -> {after['p_maximum_independent_set']:.3f}, "
                    f"terminal energy {after['terminal_energy']:.3f}, conflict-free {after['conflict_free']:.3f}, "
                    f"flip rate per step {after['flip_rate']}, adjoint signal per step {after['adjoint_signal']}"
                )
            summary[f"beta={beta}/tau_end={tau_end}"] = {
                "p_maximum_independent_set": found,
                "mean": statistics.mean(found),
                "std": statistics.pstdev(found),
            }
    save_json(args.output_dir, "cam_chain", {"runs": runs, "summary": summary})
    emit({"seeds": args.seeds, "train_steps": args.train_steps, "summary": summary})


if __name__ == "__main__":
    main()
