"""Cosine similarity between zeroth-order gradient estimates and the true (backprop) gradient.

    python benchmarks/zo_alignment.py [--models minilm smollm2] [--seeds 0 ... 31] [--ranks 2 4 8]

For each model, the true gradient of one batch is computed once by backprop (eval mode), then
AGZO and MeZO each produce one-perturbation two-point estimates, one per seed of ``--seeds``. Both
perturb the same parameters (every targeted linear weight; other parameters frozen), so the
cosines compare like with like. Reports the mean cosine per layer type and over all targeted
weights, writes JSON and a PNG to ``--output-dir``; the last line is the JSON summary with the
AGZO/MeZO ratio per rank and, per rank, whether it reaches the target (>= 10 on both models).
"""

import json
import re
import time
from collections import defaultdict
from pathlib import Path

import torch
from _harness import benchmark_parser, emit
from tqdm import tqdm
from transformers import DataCollatorForSeq2Seq

from hf_ext.data import arithmetic_dataset, docstring_classification
from hf_ext.data.sft import tokenize_prompt_completion
from hf_ext.models import load_minilm, load_smollm2
from hf_ext.plotting import plot_grouped_bars
from hf_ext.zo import AGZOConfig, MeZOConfig, zo_gradient_estimate


def minilm_batch(batch_size: int):
    model, tokenizer = load_minilm(num_labels=4)
    rows = docstring_classification(num_classes=4)["train"].select(range(batch_size))
    batch = tokenizer(list(rows["text"]), padding=True, truncation=True, max_length=128, return_tensors="pt")
    batch["labels"] = torch.tensor(list(rows["label"]))
    return model, dict(batch)


def smollm2_batch(batch_size: int):
    model, tokenizer = load_smollm2()
    rows = arithmetic_dataset(batch_size, difficulty=2, seed=0)
    features = [tokenize_prompt_completion(row, tokenizer) for row in rows]
    return model, dict(DataCollatorForSeq2Seq(tokenizer, padding=True, return_tensors="pt")(features))


MODELS = {"minilm": minilm_batch, "smollm2": smollm2_batch}


def layer_type(parameter_name: str) -> str:
    """``model.layers.3.self_attn.q_proj.weight`` -> ``self_attn.q_proj``."""
    name = parameter_name.removesuffix(".weight")
    match = re.search(r"\.\d+\.(.+)$", name)
    return match.group(1) if match else name.rsplit(".", 1)[-1]


def true_gradient(model, batch) -> dict[str, torch.Tensor]:
    model.eval()
    model.zero_grad()
    model(**batch).loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    return grads


def cosines(estimate: dict[str, torch.Tensor], truth: dict[str, torch.Tensor]) -> dict[str, float]:
    """Cosine over all estimated parameters (``"all"``) and per layer type."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for name, est in estimate.items():
        ref = truth[name].float()
        parts = (torch.sum(est * ref).item(), torch.sum(est * est).item(), torch.sum(ref * ref).item())
        for key in ("all", layer_type(name)):
            for i, value in enumerate(parts):
                sums[key][i] += value
    return {key: dot / max((ee * rr) ** 0.5, 1e-30) for key, (dot, ee, rr) in sums.items()}


def measure(model_name: str, seeds: list[int], ranks: list[int], batch_size: int) -> dict:
    model, batch = MODELS[model_name](batch_size)
    truth = true_gradient(model, batch)
    configs = {"mezo": MeZOConfig(other_params="frozen")} | {f"agzo_r{r}": AGZOConfig(rank=r) for r in ranks}
    result = {"batch_size": batch_size, "seeds": seeds}
    for method, config in configs.items():
        start = time.perf_counter()
        totals: dict[str, float] = defaultdict(float)
        for seed in tqdm(seeds, desc=f"{model_name} {method}", leave=False):
            for key, value in cosines(zo_gradient_estimate(model, batch, config, seed), truth).items():
                totals[key] += value / len(seeds)
        result[method] = dict(totals)
        print(
            f"{model_name} {method}: mean cosine {totals['all']:.3e} ({time.perf_counter() - start:.0f} s)", flush=True
        )
    result["ratio"] = {method: result[method]["all"] / result["mezo"]["all"] for method in configs if method != "mezo"}
    return result


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=range(32), seeds_help="perturbation seeds, one estimate each")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    args.ranks = sorted(set(args.ranks))
    results = {name: measure(name, args.seeds, args.ranks, args.batch_size) for name in args.models}
    methods = ["mezo"] + [f"agzo_r{r}" for r in args.ranks]
    for name, result in results.items():
        print(f"\n{name}: mean cosine with the true gradient, by layer type")
        print(f"  {'layer type':32s}" + "".join(f"{m:>12s}" for m in methods))
        for key in result["mezo"]:
            print(f"  {key:32s}" + "".join(f"{result[m][key]:12.3e}" for m in methods))
        print(
            "  AGZO/MeZO over all targeted weights: " + ", ".join(f"{m} {r:.1f}x" for m, r in result["ratio"].items())
        )
        plot_grouped_bars(
            {m: {k: abs(v) for k, v in result[m].items()} for m in methods},
            out / f"zo_alignment_{name}.png",
            f"{name}: cosine(ZO estimate, true gradient), {len(args.seeds)} seeds",
            "|mean cosine| (log scale; per-type means can be negative)",
            log_scale=True,
        )
    (out / "zo_alignment.json").write_text(json.dumps(results, indent=2))
    summary = {
        name: {"mezo": r["mezo"]["all"], "agzo": {m: r[m]["all"] for m in methods[1:]}, "ratio": r["ratio"]}
        for name, r in results.items()
    }
    summary["default_rank"] = AGZOConfig.rank
    summary["target_met_by_rank"] = {m: all(r["ratio"][m] >= 10 for r in results.values()) for m in methods[1:]}
    emit(summary)


if __name__ == "__main__":
    main()
