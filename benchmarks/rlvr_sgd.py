"""SGD vs AdamW for GRPO on verifiable arithmetic: reward, update sparsity, optimizer state, delta size.

    python benchmarks/rlvr_sgd.py [--max-steps 80] [--model smollm2] [--param-dtype bfloat16]

Runs the ``grpo_sgd`` recipe with its shipped config (SmolLM2-135M-Instruct, presets' learning
rates, same seed and budget for both optimizers) and reports for each: held-out mean reward
(greedy exact answer) at start and end, the fraction of parameter entries changed (bit-exact
in fp32, and large enough to survive bf16), optimizer-state bytes, and the sparse delta's size
as a fraction of a full checkpoint. ``--param-dtype bfloat16`` stores and updates the weights
in bf16 (no fp32 master copy), the setting where small steps round away. Expected shape:
comparable reward gains, SGD's changed fraction far smaller, zero optimizer state, a small
delta. About 25 minutes on 2 CPU cores.
The last line is JSON.
"""

import argparse
from pathlib import Path

from _harness import emit, save_json

from hf_ext.models import CAUSAL_LMS
from hf_ext.recipes import recipes_dir
from hf_ext.recipes.grpo_sgd import PARAM_DTYPES
from hf_ext.recipes.grpo_sgd import main as run_recipe

REPORTED = (
    "held_out_reward_before",
    "held_out_reward_after",
    "changed_fraction",
    "changed_fraction_bf16",
    "optimizer_state_bytes",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=80)
    parser.add_argument("--model", choices=sorted(CAUSAL_LMS), default="smollm2")
    parser.add_argument("--param-dtype", choices=sorted(PARAM_DTYPES), default="float32")
    parser.add_argument("--output-dir", default="outputs/benchmarks")
    args = parser.parse_args()
    name = "rlvr_sgd" if args.param_dtype == "float32" else f"rlvr_sgd_{args.param_dtype}"
    results = run_recipe(
        ["--config", str(recipes_dir() / "configs" / "grpo_sgd.yaml"), "--model", args.model]
        + ["--param_dtype", args.param_dtype, "--output_dir", str(Path(args.output_dir) / name)]
        + ["--max_steps", str(args.max_steps), "--disable_tqdm", "true"]
    )
    summary = {"model": args.model, "max_steps": args.max_steps, "param_dtype": args.param_dtype}
    for optimizer, result in results.items():
        summary |= {f"{optimizer}_{key}": result[key] for key in REPORTED}
        summary[f"{optimizer}_delta_over_full"] = result["sparse_delta_bytes"] / result["full_checkpoint_bytes"]
    for key in ("changed_fraction", "changed_fraction_bf16"):
        if summary.get(f"sgd_{key}"):
            summary[f"adamw_over_sgd_{key}"] = summary[f"adamw_{key}"] / summary[f"sgd_{key}"]
    save_json(args.output_dir, name, summary)
    emit(summary)


if __name__ == "__main__":
    main()
