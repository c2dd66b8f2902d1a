"""Cosine similarity between zeroth-order gradient estimates and the true (backprop) gradient.

    python benchmarks/zo_alignment.py [--models minilm smollm2] [--seeds 0 ... 31] [--ranks 2 4 8]
        [--batches 0 1] [--subspaces shared unshared]

For each model and batch, the true gradient is computed once by backprop (eval mode), then AGZO
and MeZO each produce one-perturbation two-point estimates, one per seed of ``--seeds``. Both
perturb the same parameters (every targeted linear weight; other parameters frozen), so the
cosines compare like with like. Batch ``b`` is MiniLM's ``b``-th block of ``--batch-size``
training docstrings and SmolLM2's arithmetic problems drawn with seed ``b``, so ``--batches 0 1``
repeats the measurement on a batch the default run never sees. ``--subspaces unshared`` adds AGZO
with one range finder per layer (``share_subspaces=False``). Reports the mean cosine per layer type
and over all targeted weights, its 95% interval over the seeds, and the AGZO/MeZO ratio with a
bootstrap 95% interval; writes JSON and a PNG per model and batch to ``--output-dir``. The last line
is the JSON summary, with, per rank, whether the ratio reaches the target (>= 10 on every model and
batch).
"""

import json
import re
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from _harness import benchmark_parser, emit
from tqdm import tqdm
from transformers import DataCollatorForSeq2Seq

from hf_ext.data import arithmetic_dataset, docstring_classification
from hf_ext.data.sft import tokenize_prompt_completion
from hf_ext.models import load_minilm, load_smollm2
from hf_ext.recipes._plotting import plot_grouped_bars
from hf_ext.zo import AGZOConfig, MeZOConfig, zo_gradient_estimate

BOOTSTRAP_SAMPLES = 2000


def minilm_batch(batch_size: int, batch: int):
    model, tokenizer = load_minilm(num_labels=4)
    rows = docstring_classification(num_classes=4)["train"].select(range(batch * batch_size, (batch + 1) * batch_size))
    inputs = tokenizer(list(rows["text"]), padding=True, truncation=True, max_length=128, return_tensors="pt")
    inputs["labels"] = torch.tensor(list(rows["label"]))
    return model, dict(inputs)


def smollm2_batch(batch_size: int, batch: int):
    model, tokenizer = load_smollm2()
    rows = arithmetic_dataset(batch_size, difficulty=2, seed=batch)
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


def methods(ranks: list[int], subspaces: list[str]) -> dict[str, object]:
    """MeZO, then AGZO at each rank with shared range finders and, if asked, with one per layer."""
    configs: dict[str, object] = {"mezo": MeZOConfig(other_params="frozen")}
    for rank in ranks:
        for sharing in subspaces:
            suffix = "" if sharing == "shared" else "_unshared"
            configs[f"agzo_r{rank}{suffix}"] = AGZOConfig(rank=rank, share_subspaces=sharing == "shared")
    return configs


def interval(values: list[float]) -> list[float]:
    """Normal 95% interval of the mean of ``values`` (one per seed)."""
    array = np.asarray(values)
    half = 1.96 * array.std(ddof=1) / np.sqrt(len(array)) if len(array) > 1 else 0.0
    return [float(array.mean() - half), float(array.mean() + half)]


def ratio_interval(agzo: list[float], mezo: list[float]) -> list[float]:
    """Bootstrap 95% interval of mean(agzo) / mean(mezo), the two seed sets resampled independently."""
    rng = np.random.default_rng(0)
    a, m = np.asarray(agzo), np.asarray(mezo)
    ratios = rng.choice(a, (BOOTSTRAP_SAMPLES, len(a))).mean(1) / rng.choice(m, (BOOTSTRAP_SAMPLES, len(m))).mean(1)
    return [float(q) for q in np.percentile(ratios, [2.5, 97.5])]


def measure(model_name: str, batch_index: int, seeds: list[int], configs: dict, batch_size: int) -> dict:
    model, batch = MODELS[model_name](batch_size, batch_index)
    truth = true_gradient(model, batch)
    result = {"batch_size": batch_size, "batch": batch_index, "seeds": seeds}
    for method, config in configs.items():
        start = time.perf_counter()
        by_type: dict[str, float] = defaultdict(float)
        overall = []
        for seed in tqdm(seeds, desc=f"{model_name} batch {batch_index} {method}", leave=False):
            measured = cosines(zo_gradient_estimate(model, batch, config, seed), truth)
            overall.append(measured["all"])
            for key, value in measured.items():
                by_type[key] += value / len(seeds)
        low, high = interval(overall)
        result[method] = {"by_type": dict(by_type), "by_seed": overall, "mean": by_type["all"], "ci95": [low, high]}
        print(
            f"{model_name} batch {batch_index} {method}: mean cosine {by_type['all']:.3e} [{low:.3e}, {high:.3e}] "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    mezo = result["mezo"]
    result["ratio"] = {
        method: {
            "mean": result[method]["mean"] / mezo["mean"],
            "ci95": ratio_interval(result[method]["by_seed"], mezo["by_seed"]),
        }
        for method in configs
        if method != "mezo"
    }
    return result


def report(name: str, result: dict, methods: list[str], out: Path, num_seeds: int) -> None:
    """Print the per-layer-type table and the ratios of one model and batch, and draw its bars."""
    print(f"\n{name}, batch {result['batch']}: mean cosine with the true gradient, by layer type")
    print(f"  {'layer type':32s}" + "".join(f"{m:>20s}" for m in methods))
    for key in result["mezo"]["by_type"]:
        print(f"  {key:32s}" + "".join(f"{result[m]['by_type'][key]:20.3e}" for m in methods))
    ratios = [f"{m} {r['mean']:.1f}x [{r['ci95'][0]:.1f}, {r['ci95'][1]:.1f}]" for m, r in result["ratio"].items()]
    print("  AGZO/MeZO over all targeted weights (95% interval): " + ", ".join(ratios))
    plot_grouped_bars(
        {m: {k: abs(v) for k, v in result[m]["by_type"].items()} for m in methods},
        out / f"zo_alignment_{name}_batch{result['batch']}.png",
        f"{name}, batch {result['batch']}: cosine(ZO estimate, true gradient), {num_seeds} seeds",
        "|mean cosine| (log scale; per-type means can be negative)",
        log_scale=True,
    )


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=range(32), seeds_help="perturbation seeds, one estimate each")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--batches", type=int, nargs="+", default=[0], help="which batches (default: %(default)s)")
    parser.add_argument("--subspaces", nargs="+", default=["shared"], choices=["shared", "unshared"])
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    configs = methods(sorted(set(args.ranks)), args.subspaces)
    results = {
        name: {f"batch{b}": measure(name, b, args.seeds, configs, args.batch_size) for b in args.batches}
        for name in args.models
    }
    for name, by_batch in results.items():
        for result in by_batch.values():
            report(name, result, list(configs), out, len(args.seeds))
    (out / "zo_alignment.json").write_text(json.dumps(results, indent=2))
    summary = {
        name: {
            key: {"mezo": r["mezo"]["mean"], "agzo": {m: r[m]["mean"] for m in r["ratio"]}, "ratio": r["ratio"]}
            for key, r in by_batch.items()
        }
        for name, by_batch in results.items()
    }
    summary["default_rank"] = AGZOConfig.rank
    summary["target_met_by_rank"] = {
        m: all(r["ratio"][m]["mean"] >= 10 for by_batch in results.values() for r in by_batch.values())
        for m in configs
        if m != "mezo"
    }
    emit(summary)


if __name__ == "__main__":
    main()
