"""Curvature from weight-space symmetries: accuracy against exact Hessians vs storage, and training vs AdamW / Muon.

    OMP_NUM_THREADS=1 python benchmarks/symmetry_curvature.py [--seeds 0 1 2]

Runs ``recipes/symmetry_curvature.py`` and prints, as measured (mean over the seeds):

- per layer (an MLP on digits, a one-layer Llama on standard-library source), each estimate's numbers
  stored and the cosine of ``H = S^(1/2)`` with the exact Hessian (Frobenius, on random directions and on
  secants):
  the symmetry groups, the full gradient second moment, KFAC-style and Shampoo-style; the diagonal
  (Adam-like) estimate is the group ``scaling:scaling``;
- whether the cosine falls along each chain of groups ordered by inclusion (a larger group has a
  smaller commutant), and which groups beat both the diagonal and KFAC-style at no more storage than KFAC's;
- held-out loss at equal steps of SymmetryCurvature, the Shampoo-style one-sided group, AdamW and
  ``torch.optim.Muon`` (+ AdamW) on both tasks, with step time as a ratio to AdamW's.

The last line is JSON.
"""

from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.symmetry_curvature import main as run_recipe

# Chains of groups, each a subgroup of the next: their commutants shrink along a chain.
CHAINS = [
    ["full", "scaling:identity", "orthogonal:identity"],
    ["full", "permutation:identity", "orthogonal:identity"],
    ["full", "identity:permutation", "identity:orthogonal"],
    ["permutation:identity", "permutation:permutation", "orthogonal:orthogonal"],
    ["scaling:identity", "scaling:scaling", "orthogonal:orthogonal"],
]


def _layer_key(entry: dict) -> str:
    return f"{entry['model']}/{entry['layer'].removeprefix('model.layers.0.')}"


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2])
    parser.add_argument("--lm-steps", type=int, default=300, help="Llama optimizer steps (the shipped config's)")
    args = parser.parse_args()
    config = str(recipes_dir() / "configs" / "symmetry_curvature.yaml")
    out = f"{args.output_dir}/symmetry_curvature"
    flags = ["--config", config, "--output_dir", out, "--seeds", *map(str, args.seeds)]
    results = run_recipe([*flags, "--lm_steps", str(args.lm_steps)])
    summary = {"seeds": args.seeds, "lm_steps": args.lm_steps}

    layers: dict[str, dict] = {}
    for entry in results["accuracy"]:
        if entry["power"] == "H=S^1/2":
            layers.setdefault(_layer_key(entry), {})[entry["estimate"]] = entry
    chain_steps, ordered = 0, 0
    for layer, table in layers.items():
        shape = next(iter(table.values()))["shape"]
        print(f"\n{layer} {tuple(shape)}: estimate, numbers stored, cos(H, Hessian), cos(Hu, Hessian u) on random u,")
        print("  and on secants u (the last pretraining steps)", flush=True)
        for name, entry in sorted(table.items(), key=lambda item: -item[1]["storage"]):
            print(
                f"  {name:<24} {entry['storage']:>8}  {entry['cosine']:+.3f} +- {entry['cosine_std']:.3f}"
                f"  {entry['action_cosine']:+.3f} +- {entry['action_cosine_std']:.3f}"
                f"  {entry['secant_cosine']:+.3f} +- {entry['secant_cosine_std']:.3f}"
            )
            summary[f"{layer}/{name}/cosine"] = entry["cosine"]
            summary[f"{layer}/{name}/secant_cosine"] = entry["secant_cosine"]
            summary[f"{layer}/{name}/storage"] = entry["storage"]
        for chain in CHAINS:
            if all(name in table for name in chain):
                for larger, smaller in zip(chain, chain[1:], strict=False):
                    chain_steps += 1
                    ordered += table[larger]["cosine"] >= table[smaller]["cosine"]
        kfac, diagonal = table["kfac_style"], table["scaling:scaling"]
        winners = [
            name
            for name, entry in table.items()
            if ":" in name
            and entry["storage"] <= kfac["storage"]
            and entry["cosine"] > max(kfac["cosine"], diagonal["cosine"])
        ]
        summary[f"{layer}/beats_diagonal_and_kfac_at_no_more_storage"] = winners
        print(f"  groups beating diagonal and KFAC-style with no more storage than KFAC: {winners or 'none'}")
    summary["chain_steps_ordered_as_theory"] = f"{ordered}/{chain_steps}"
    print(f"\nchain steps where the larger group's estimate is no closer to the Hessian: {ordered}/{chain_steps}")

    for task, table in results["training"].items():
        print(f"\n{task}: held-out loss (mean +- std over seeds), step time / AdamW's")
        for name, row in table.items():
            print(
                f"  {name:<14} lr {row['lr']:<7g} {row['final_loss']:.4f} +- {row['final_loss_std']:.4f}"
                f"  x{row['step_time_vs_adamw']:.2f}"
            )
            summary[f"{task}/{name}/loss"] = row["final_loss"]
            summary[f"{task}/{name}/loss_std"] = row["final_loss_std"]
            summary[f"{task}/{name}/step_time_vs_adamw"] = row["step_time_vs_adamw"]
            summary[f"{task}/{name}/lr"] = row["lr"]
        summary[f"{task}/symmetry_vs_best_baseline"] = table["symmetry"]["vs_best_baseline"]
        print(f"  SymmetryCurvature vs the best baseline: {100 * table['symmetry']['vs_best_baseline']:+.2f}%")
    save_json(args.output_dir, "symmetry_curvature", summary)
    emit(summary)


if __name__ == "__main__":
    main()
