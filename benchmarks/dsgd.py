"""Decentralized SGD vs DDP all-reduce on 1, 2, 4 and 8 CPU processes: speed-up in n, consensus, bytes and time.

    python benchmarks/dsgd.py [--seeds 0 1 ... 19] [--processes 1 2 4 8] [--output-dir outputs/benchmarks]

Runs ``recipes/dsgd.py`` under ``torchrun --nproc_per_node=N`` (gloo) for each N:

1. strongly convex (``logreg``, the shipped config): every topology and DDP, all seeds; the 95th
   percentile of the final ``||x_bar - x*||^2`` over seeds per N, and its N=8 / N=1 ratio (the claim's
   linear speed-up: <= 0.25 expected); consensus distance against spectral gap per topology at the
   largest N; bytes sent and wall time per step against DDP's all-reduce on the same processes;
2. non-convex (``mlp`` on digits, 300 steps of 8 samples per worker): ring, exponential, complete and
   DDP at the smallest and largest N, the first 3 seeds;
3. non-convex (``lm``, a 2-layer Llama on standard-library source through ``DecentralizedTrainer``):
   ring and DDP (the stock Trainer) on 2 processes, one seed, 40 steps.

About 16 minutes on 2 shared CPU cores (8 processes on 2 cores are slow: per-step times measure
scheduling as much as messages). The last line is JSON.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _harness import benchmark_parser, emit, save_json
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "dsgd.py"
CONFIG = RECIPE.parent / "configs" / "dsgd.yaml"


def run_recipe(processes: int, out: Path, flags: list[str]) -> dict:
    """``torchrun --nproc_per_node=processes recipes/dsgd.py --config dsgd.yaml flags``; its results.json."""
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--standalone", f"--nproc_per_node={processes}", str(RECIPE), "--config", str(CONFIG)]
    command += [*flags, "--output_dir", str(out)]
    env = os.environ | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    print(f"  {processes} processes {' '.join(flags)}: {time.perf_counter() - start:.0f} s", flush=True)
    return json.loads((out / "results.json").read_text())


def plot_speedup(p95: dict[str, dict[int, float]], path: Path) -> None:
    """95th-percentile final error against the number of processes, log-log, with the 1/n line from n = 1."""
    figure = Figure(figsize=(6, 4))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    for name, by_n in p95.items():
        ns = sorted(by_n)
        ax.plot(ns, [by_n[n] for n in ns], marker="o", label="DDP (all-reduce)" if name == "ddp" else name)
    reference = p95["complete"]
    ns = sorted(reference)
    ax.plot(ns, [reference[ns[0]] * ns[0] / n for n in ns], "k--", linewidth=1, label="1/n from n = 1")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("processes n")
    ax.set_ylabel("95th pct of final ||x_bar - x*||^2")
    ax.set_title("DSGD, logistic regression (20 seeds): speed-up in n", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=list(range(20)))
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    out = Path(args.output_dir) / "dsgd"
    seeds = [str(s) for s in args.seeds]
    convex = {n: run_recipe(n, out / f"logreg_{n}", ["--seeds", *seeds]) for n in args.processes}
    small, large = min(args.processes), max(args.processes)
    mlp_flags = ["--problem", "mlp", "--seeds", *seeds[:3], "--topologies", "ring", "exponential", "complete"]
    mlp_flags += ["--max_steps", "300", "--per_device_train_batch_size", "8", "--learning_rate", "0.5"]
    mlp = {n: run_recipe(n, out / f"mlp_{n}", mlp_flags) for n in (small, large)}
    lm_flags = ["--problem", "lm", "--seeds", seeds[0], "--topologies", "ring", "--max_steps", "40"]
    lm_flags += ["--per_device_train_batch_size", "8", "--learning_rate", "0.5", "--eval_every", "10"]
    lm = run_recipe(2, out / "lm_2", lm_flags)

    names = list(convex[large]["topologies"])
    p95 = {
        name: {n: r["topologies"][name]["error_q95"] for n, r in convex.items() if name in r["topologies"]}
        for name in names
    }
    plot_speedup(p95, out / "dsgd_speedup.png")
    result = {
        "logreg_p95_by_n": p95,
        "logreg_p50_by_n": {
            name: {n: r["topologies"][name]["error_q50"] for n, r in convex.items() if name in r["topologies"]}
            for name in names
        },
        "logreg_p95_ratio_largest_over_1": {
            name: by_n[large] / by_n[small] for name, by_n in p95.items() if small in by_n and large in by_n
        },
        "logreg_consensus_vs_gap": {
            name: [s["spectral_gap"], s["consensus_distance_mean"]]
            for name, s in convex[large]["topologies"].items()
            if name != "ddp"
        },
        "ms_per_step": {
            n: {name: 1e3 * s["seconds_per_step"] for name, s in r["topologies"].items()} for n, r in convex.items()
        },
        "bytes_per_step": {
            n: {name: s["bytes_per_step"] for name, s in r["topologies"].items()} for n, r in convex.items()
        },
        "mlp": {
            n: {
                name: [
                    s["error_mean"],
                    s["error_std"],
                    s["test_accuracy_mean"],
                    1e3 * s["seconds_per_step"],
                    s["bytes_per_step"],
                ]
                for name, s in r["topologies"].items()
            }
            for n, r in mlp.items()
        },
        "lm_2": {
            name: [s["error_mean"], 1e3 * s["seconds_per_step"], s["bytes_per_step"]]
            for name, s in lm["topologies"].items()
        },
        "seeds": args.seeds,
        "skipped": {n: [s["topology"] for s in r["skipped"]] for n, r in convex.items()},
    }
    save_json(str(out), "dsgd", result)
    emit(result)


if __name__ == "__main__":
    main()
