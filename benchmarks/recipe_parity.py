"""A recipe sharded on two FSDP2 CPU processes against one process on the same global batch: how far apart are
the numbers it writes?

    python benchmarks/recipe_parity.py RECIPE [key=value ...] [--config NAME] [--global-batch B]
        [--reference cpu|cpu_2proc]

Runs ``hf-ext run RECIPE --accelerate-config fsdp2_cpu_2proc key=value ...`` with
``per_device_train_batch_size = B / 2``, and the same settings on the reference config (``cpu``: one process
with ``B``; ``cpu_2proc``: two unsharded processes with ``B / 2``, for a recipe that draws per process, as GRPO
samples completions). ``--global-batch 0`` leaves the batch to the recipe (one that sets no per-device batch).
Every number of the two ``results.json`` files is compared at the same place (timings left out: keys naming
seconds or time); reported: the largest absolute and relative difference and where, and the places only one
run wrote. The last line is JSON.
"""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

from _harness import benchmark_parser, emit

TIMED = re.compile(r"second|time|_m?s$", re.IGNORECASE)


def numbers(value, path: str = "") -> dict[str, float]:
    """Every number in a JSON value by its place (``a/b/0``), timings left out."""
    if isinstance(value, dict):
        leaves = {}
        for key, entry in value.items():
            if not TIMED.search(str(key)):
                leaves |= numbers(entry, f"{path}/{key}")
        return leaves
    if isinstance(value, list):
        return {k: v for i, entry in enumerate(value) for k, v in numbers(entry, f"{path}/{i}").items()}
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {}
    return {path: float(value)}


def compare(ours: dict[str, float], reference: dict[str, float]) -> dict:
    """The largest absolute and relative differences over the places both have (NaN equals NaN)."""
    worst = {"max_abs": 0.0, "max_abs_at": None, "max_rel": 0.0, "max_rel_at": None}
    for place in ours.keys() & reference.keys():
        a, b = ours[place], reference[place]
        if math.isnan(a) and math.isnan(b) or a == b:
            continue
        absolute = abs(a - b) if math.isfinite(a) and math.isfinite(b) else math.inf
        relative = absolute / abs(b) if b else math.inf
        if absolute > worst["max_abs"]:
            worst |= {"max_abs": absolute, "max_abs_at": place}
        if relative > worst["max_rel"]:
            worst |= {"max_rel": relative, "max_rel_at": place}
    return worst | {
        "compared": len(ours.keys() & reference.keys()),
        "only_sharded": sorted(ours.keys() - reference.keys()),
        "only_reference": sorted(reference.keys() - ours.keys()),
    }


def run(recipe: str, config: str, settings: list[str], output_dir: Path) -> dict:
    """``hf-ext run`` of ``recipe`` into ``output_dir``; its ``results.json``."""
    command = [sys.executable, "-m", "hf_ext.cli", "run", recipe, "--accelerate-config", config, *settings]
    subprocess.run([*command, f"output_dir={output_dir}"], check=True)
    return json.loads((output_dir / "results.json").read_text())


def main(argv=None) -> dict:
    args = parse(argv)
    out = Path(args.output_dir) / args.recipe
    batch = args.global_batch
    shared = [*(["--config", args.config] if args.config else []), *args.settings]
    halves = [f"per_device_train_batch_size={batch // 2}"] if batch else []
    whole = [f"per_device_train_batch_size={batch // (2 if args.reference == 'cpu_2proc' else 1)}"] if batch else []
    sharded = run(args.recipe, "fsdp2_cpu_2proc", [*shared, *halves], out / "fsdp2_cpu_2proc")
    reference = run(args.recipe, args.reference, [*shared, *whole], out / args.reference)
    result = {key: getattr(args, key) for key in ("recipe", "config", "settings", "global_batch", "reference")}
    result |= compare(numbers(sharded), numbers(reference))
    emit(result)
    return result


def parse(argv=None):
    parser = benchmark_parser(__doc__, output_dir="outputs/benchmarks/recipe_parity")
    parser.add_argument("recipe")
    parser.add_argument("settings", nargs="*", help="key=value settings given to both runs")
    parser.add_argument("--config", help="the recipe's shipped config or YAML file, both runs (default: its own)")
    parser.add_argument("--global-batch", type=int, default=4, help="per step, both runs (0: the recipe's own)")
    parser.add_argument("--reference", default="cpu", choices=["cpu", "cpu_2proc"])
    args = parser.parse_args(argv)
    if args.global_batch % 2:
        parser.error(f"--global-batch must be even (two processes), got {args.global_batch}")
    return args


if __name__ == "__main__":
    main()
