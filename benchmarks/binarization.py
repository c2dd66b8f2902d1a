"""Perplexity of SmolLM2-135M-Instruct binarized four ways, and the packed size of its linear layers.

    python benchmarks/binarization.py [--max-steps 100] [--model smollm2]

On held-out standard-library source (files not trained on): (a) the full-precision model,
(b) one-shot binarization (sign with a per-row mean-|W| scale, no training), (c) the
binary-aware init alone (rank-1 ``|W|`` scales, no training), (d) progressive training
(lambda 0 -> 1 over the first half of the steps, logit distillation), and (e) the same training
binary from step 0 (no progression), at the same number of steps as (d). Also the packed size of
the binarized linear layers (bits + scales) over their fp16 size. Expected shape: (d) far below
(b). About 35 minutes on 2 CPU cores. The last line is JSON.
"""

import argparse
from pathlib import Path

from _harness import emit, save_json

from hf_ext.evaluation import perplexity
from hf_ext.models import CAUSAL_LMS, load_causal_lm
from hf_ext.quant import binarize_model, set_binarization_mix
from hf_ext.recipes import recipes_dir
from hf_ext.recipes.binarize_progressive import corpus_splits, parse_args
from hf_ext.recipes.binarize_progressive import main as run_recipe


def one_shot(recipe_argv: list[str]) -> dict[str, float]:
    """(b): sign(W) with a per-row mean-|W| scale, no training, on the recipe's held-out blocks."""
    script_args, training_args = parse_args(recipe_argv)
    model, tokenizer = load_causal_lm(script_args.model)
    _, held_out = corpus_splits(tokenizer, script_args, training_args.seed)
    errors = binarize_model(model, init="mean_abs")
    set_binarization_mix(model, 1.0)
    return {"perplexity": perplexity(model, held_out), "init_error": sum(errors.values()) / len(errors)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--model", choices=sorted(CAUSAL_LMS), default="smollm2")
    parser.add_argument("--output-dir", default="outputs/benchmarks")
    args = parser.parse_args()
    out = Path(args.output_dir) / "binarization"
    common = ["--config", str(recipes_dir() / "configs" / "binarize_progressive.yaml"), "--model", args.model]
    common += ["--max_steps", str(args.max_steps), "--disable_tqdm", "true"]
    baseline = one_shot([*common, "--output_dir", str(out / "one_shot")])
    progressive = run_recipe([*common, "--output_dir", str(out / "progressive")])
    one_jump = run_recipe([*common, "--progressive", "false", "--output_dir", str(out / "one_jump")])
    summary = {
        "model": args.model,
        "steps": progressive["steps"],
        "perplexity_full_precision": progressive["perplexity_teacher"],
        "perplexity_one_shot": baseline["perplexity"],
        "perplexity_binary_aware_init": progressive["perplexity_binary_init"],
        "perplexity_progressive": progressive["perplexity_trained"],
        "perplexity_one_jump_trained": one_jump["perplexity_trained"],
        "perplexity_progressive_packed": progressive["perplexity_packed"],
        "init_error_one_shot": baseline["init_error"],
        "init_error_binary_aware": progressive["init_error_mean"],
        "packed_over_fp16": progressive["packed_over_fp16"],
        "train_seconds_progressive": progressive["train_seconds"],
    }
    summary["one_shot_over_progressive"] = summary["perplexity_one_shot"] / summary["perplexity_progressive"]
    save_json(args.output_dir, "binarization", summary)
    emit(summary)


if __name__ == "__main__":
    main()
