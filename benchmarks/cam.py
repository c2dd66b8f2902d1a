"""CAM vs the REINFORCE baseline (same training time or steps), greedy, local search and HiGHS on MIS and max-cut.

    python benchmarks/cam.py [--seeds 0 1 2] [--train-seconds 90]
    python benchmarks/cam.py --train-steps 400    # equal gradient steps instead of equal time (load-independent)
    python benchmarks/cam.py --train-steps 400 --problems mis --seeds 3 4 5 --hidden 64 --layers 8  # paper-sized net
    python benchmarks/cam.py --problems maxcut --base-flip 0.5     # max-cut under the uniform reference chain
    python benchmarks/cam.py --train-steps 1000 --problems mis --seeds 4 --hidden 64 --layers 8 --eval-chains 128
    python benchmarks/cam.py --train-steps 1000 --problems mis --seeds 3 4 5 6 7 8 --hidden 64 --layers 8 \
        --large-time-limit 0 --workers 6   # one process per seed; a rerun reuses the jobs stored in --output-dir

Runs the ``cam`` recipe (recipes/cam.py) with its shipped config, per seed: MIS on held-out ER(n, 0.15) graphs of
100-200 nodes (the training sizes), 200-400 nodes (transfer) and 100 nodes (solved exactly by HiGHS, the outside
reference), ER-700-800 (the paper's anchor size; reference: the best set found, HiGHS and an iterated local search
with a time limit among them) and RB graphs (HiGHS), max-cut
on BA(n, 4) graphs of the same sizes (reference: the best cut found). CAM and REINFORCE are also reported with the
local search run on every chain's solution (``cam+ls``, ``reinforce+ls``), against local search from as many random
starts (``multistart_ls``). Prints the mean and
standard deviation over seeds of each method's value and gap, the training-signal variance of CAM and
REINFORCE (gradients of independent rollouts at the same weights), what the rollouts end in before decoding at the
end of training (terminal energy, MIS conflicts, the adjoint's signal per step), and a JSON object on the last line.
About 30 minutes on 2 busy CPU cores with the defaults.
"""

import statistics
from pathlib import Path

import numpy as np
from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes import shipped_config
from hf_ext.recipes.cam import main as run_recipe


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2], output_dir="outputs/benchmarks/cam")
    parser.add_argument("--train-seconds", type=float, default=90.0, help="per method, problem and seed")
    parser.add_argument("--train-steps", type=int, default=None,
                        help="train every method for this many gradient steps instead of --train-seconds")
    parser.add_argument("--eval-graphs", type=int, default=4)
    parser.add_argument("--eval-chains", type=int, default=None,
                        help="chains per graph at evaluation, best of K, for CAM and REINFORCE; default the config's")
    parser.add_argument("--problems", nargs="+", default=["mis", "maxcut"])
    parser.add_argument("--large-time-limit", type=float, default=None,
                        help="seconds per ER-700-800 graph for HiGHS and the iterated local search; default the "
                             "shipped config's, 0 skips them")
    parser.add_argument("--base-flip", type=float, default=None,
                        help="reference chain's flip probability; default each problem's own (0.5 MIS, 0.1 max-cut)")
    parser.add_argument("--aggregation", choices=["mean", "normalized"], default=None,
                        help="how a node hears its neighbours; default each problem's own (normalized MIS, mean "
                             "max-cut; mean for both until 2026-12-05)")
    parser.add_argument("--hidden", type=int, default=None, help="GNN width; default the shipped config's")
    parser.add_argument("--layers", type=int, default=None,
                        help="GNN message-passing layers; default the shipped config's")
    parser.add_argument("--workers", type=int, default=None,
                        help="(problem, seed) jobs at a time on local processes; default the shipped config's")
    args = parser.parse_args()
    budget = (["--train_seconds", str(args.train_seconds)] if args.train_steps is None
              else ["--train_seconds", "inf", "--train_steps", str(args.train_steps)])
    flags = ["--config", str(shipped_config("cam")), "--output_dir", args.output_dir, "--seeds", *map(str, args.seeds),
             *budget, "--eval_graphs", str(args.eval_graphs),
             "--problems", *args.problems]
    for flag in ("base_flip", "aggregation", "large_time_limit", "hidden", "layers", "eval_chains", "workers"):
        if getattr(args, flag) is not None:
            flags += [f"--{flag}", str(getattr(args, flag))]
    results = run_recipe(flags)
    variance = {}
    for key in ("cam@init", "reinforce@init", "cam@cam_trained", "reinforce@cam_trained"):
        for problem in args.problems:
            ratios = [v[key]["relative_variance"] for v in results["signal_variance"] if v["problem"] == problem]
            variance[f"{problem}/{key}"] = {"relative_variance_mean": statistics.mean(ratios),
                                            "relative_variance_std": statistics.pstdev(ratios)}
    for key, entry in variance.items():
        print(f"training-signal variance / squared mean gradient, {key}: "
              f"{entry['relative_variance_mean']:.3g} +- {entry['relative_variance_std']:.2g}")
    diagnostics = {
        f"{problem}/{method}": {key: np.mean([run[key] for run in runs], axis=0).round(4).tolist() for key in runs[0]}
        for problem in args.problems
        for method in ("cam", "reinforce")
        for runs in [[d[method] for d in results["chain_diagnostics"] if d["problem"] == problem]]
    }
    for key, entry in diagnostics.items():
        print(f"rollouts over the last tenth of training (mean over seeds), {key}: {entry}")
    summary = {"seeds": args.seeds, "train_seconds": args.train_seconds, "train_steps": args.train_steps,
               "eval_graphs": args.eval_graphs, "large_time_limit": args.large_time_limit,
               "problems": args.problems, "base_flip": args.base_flip, "hidden": args.hidden, "layers": args.layers,
               "eval_chains": args.eval_chains,
               "results": results["summary"], "signal_variance": variance, "chain_diagnostics": diagnostics}
    save_json(str(Path(args.output_dir)), "cam", summary | {"rows": results["rows"]})
    emit(summary)


if __name__ == "__main__":
    main()
