"""The demo's comparison over seeds: AGZO with the shared range finder, AGZO with one per layer, and MeZO.

    python benchmarks/agzo_seeds.py --seeds 0 1 2 3 4 --steps 150 400 --workers 2

Runs ``recipes/agzo_finetune.py`` (MiniLM on docstring classes, the shipped config) once per variant,
seed and step count, each in a process of its own with one thread, and reports the validation accuracy
after training as mean, standard deviation, min and max over the seeds, plus the paired per-seed
differences (shared - per-layer, AGZO - MeZO). The seed sets the data split, the new head and the
perturbation stream. ``agzo_unshared`` is ``share_subspaces=false``: each layer sketches its own input,
as before layers fed the same tensor shared one range finder. Writes ``agzo_seeds.json`` and
``agzo_seeds.png`` under ``--output-dir``; the last line is the summary as JSON.
"""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from itertools import product
from pathlib import Path

import numpy as np
from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes import recipe_script, shipped_config
from hf_ext.recipes._plotting import plot_seed_curves

VARIANTS = {
    "agzo": ["--methods", "agzo"],
    "agzo_unshared": ["--methods", "agzo", "--share_subspaces", "false"],
    "mezo": ["--methods", "mezo"],
}


def run_once(variant: str, seed: int, steps: int, output_dir: Path) -> float:
    """One recipe run in its own single-threaded process; its validation accuracy after training."""
    run_dir = output_dir / f"{variant}_seed{seed}_steps{steps}"
    if not (run_dir / "results.json").exists():
        command = [sys.executable, str(recipe_script("agzo_finetune"))]
        command += ["--config", str(shipped_config("agzo_finetune")), *VARIANTS[variant], "--seed", str(seed)]
        command += ["--max_steps", str(steps), "--output_dir", str(run_dir)]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    (result,) = json.loads((run_dir / "results.json").read_text()).values()
    return result["accuracy_after"]


def spread(values: list[float]) -> dict[str, float]:
    array = np.asarray(values)
    return {
        "mean": float(array.mean()),
        "std": float(array.std(ddof=1)) if len(array) > 1 else 0.0,
        "min": float(array.min()),
        "max": float(array.max()),
    }


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=range(5), output_dir="outputs/benchmarks/agzo_seeds")
    parser.add_argument("--steps", type=int, nargs="+", default=[150, 400], help="training steps per run")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--workers", type=int, default=1, help="runs at a time, one process and thread each")
    args = parser.parse_args()
    output_dir = Path(args.output_dir)
    jobs = list(product(args.variants, args.seeds, args.steps))
    with ThreadPoolExecutor(args.workers) as pool:  # each job is a subprocess; threads only wait on them
        accuracies = dict(zip(jobs, pool.map(lambda job: run_once(*job, output_dir), jobs), strict=True))
    summary = {}
    for steps in args.steps:
        per_variant = {v: [accuracies[v, s, steps] for s in args.seeds] for v in args.variants}
        row = {v: {**spread(values), "per_seed": values} for v, values in per_variant.items()}
        for a, b in (("agzo", "agzo_unshared"), ("agzo", "mezo")):
            if a in per_variant and b in per_variant:
                row[f"{a}-{b}"] = spread(list(np.subtract(per_variant[a], per_variant[b])))
        summary[f"steps_{steps}"] = row
    save_json(str(output_dir), "agzo_seeds", {"seeds": args.seeds, "accuracy_after": summary})
    curves = {v: [[(t, accuracies[v, s, t]) for t in args.steps] for s in args.seeds] for v in args.variants}
    plot_seed_curves(
        curves,
        output_dir / "agzo_seeds.png",
        f"MiniLM docstring classes, {len(args.seeds)} seeds (mean +- std)",
        ylabel="validation accuracy after training",
    )
    emit({"seeds": args.seeds, "accuracy_after": summary})


if __name__ == "__main__":
    main()
