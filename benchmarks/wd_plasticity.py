"""Pretraining weight decay vs plasticity: the ``wd_plasticity`` sweep over several seeds, with spread.

    python benchmarks/wd_plasticity.py [--seeds 0 1] [--weight-decays 0.0 0.1 0.3 1.0] [--quick]

Runs the recipe with its shipped config (a 4-layer Llama pretrained from scratch for 1000 steps
at each weight decay, then fine-tuned on docstring classification and two-digit arithmetic with
the same budget) once per seed; the seed sets the initialisation, the data order and the
downstream splits. Prints, per weight decay, the mean and standard deviation over seeds of the
base validation loss, the train/validation gap, probe accuracy, QK spectral norm and the
downstream scores after fine-tuning, and plots the means with their spread. Expected shape (from the paper):
downstream scores improve with weight decay up to a point even where the base loss gets worse.
About 15 minutes per seed on 2 CPU cores. The last line is JSON.
"""

import statistics
from pathlib import Path

from _harness import benchmark_parser, emit, save_json

from hf_ext.plasticity import format_table, plot_sweep
from hf_ext.recipes import shipped_config
from hf_ext.recipes.wd_plasticity import main as run_recipe

REPORTED = (
    "base_validation_loss",
    "loss_gap",
    "probe_accuracy",
    "qk_spectral_norm",
    "attention_entropy",
    "weight_norm",
    "classification_accuracy",
    "arithmetic_exact_match",
    "arithmetic_loss",
)


def _spread(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1])
    parser.add_argument("--weight-decays", type=float, nargs="+", default=[0.0, 0.1, 0.3, 1.0])
    parser.add_argument("--quick", action="store_true", help="the recipe's tiny end-to-end sizes (wd_plasticity_quick)")
    args = parser.parse_args()
    out = Path(args.output_dir) / "wd_plasticity"
    runs = []
    for seed in args.seeds:
        config = shipped_config("wd_plasticity_quick" if args.quick else "wd_plasticity")
        flags = ["--config", str(config), "--seed", str(seed)]
        flags += ["--weight_decays", *map(str, args.weight_decays), "--output_dir", str(out / f"seed_{seed}")]
        runs.append(run_recipe(flags)["rows"])
    summary = {"seeds": args.seeds, "weight_decays": args.weight_decays, "quick": args.quick}
    mean_rows = []
    for index, weight_decay in enumerate(args.weight_decays):
        mean_row = {"weight_decay": weight_decay}
        for key in REPORTED:
            mean, std = _spread([rows[index][key] for rows in runs])
            summary[f"wd_{weight_decay:g}_{key}"], summary[f"wd_{weight_decay:g}_{key}_std"] = mean, std
            mean_row[key] = mean
        mean_rows.append(mean_row)
    print(f"means over seeds {args.seeds}:\n{format_table(mean_rows)}", flush=True)
    plot_sweep(runs, out / "plasticity.png")
    save_json(args.output_dir, "wd_plasticity", summary)
    emit(summary)


if __name__ == "__main__":
    main()
