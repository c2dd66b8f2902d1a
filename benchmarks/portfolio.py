"""K-sparse TCO vs TCO1/TCO2 and top-K TCO at 0.25% cost on six real markets, universal-portfolios' TCO side by side.

    python benchmarks/portfolio.py [--ks 3 5 10] [--seeds 0 1 2] [--cost 0.0025]

Runs the ``portfolio`` recipe at one cost rate on DJIA, MSCI, NYSE-N, NYSE-O, SP500 and TSE (exact
self-financing accounting) and reports, for each K: final wealth and annualised volatility of K-sparse TCO,
top-K TCO, TCO1 and TCO2 per data set; the issue's goals as booleans (K-sparse TCO richer than top-K TCO on at
least 5 of 6 data sets, than TCO1 on at least 4 of 6, every portfolio K-sparse); PSGA iterations and
milliseconds per period, and how often the DC penalty alone made the portfolio K-sparse. Then runs
universal-portfolios' own TCO1/TCO2 on the same prices: the largest weight difference from ours, and the
relative wealth difference, both under our exact accounting and under theirs (the fee charged additively on
the period's return, ``c ||b_t - b~_{t-1}||_1``). The real markets are deterministic; ``--seeds`` adds
synthetic mean-reverting markets (one per seed) on which the same strategies are compared as mean and
standard deviation. About 10 minutes on 2 CPU cores. The last line is JSON.
"""

import statistics
from pathlib import Path

import numpy as np
from _harness import benchmark_parser, emit, save_json
from universal import tools
from universal.algos import TCO1, TCO2

from hf_ext.companion.evaluation.portfolio import TopKTCO, backtest
from hf_ext.companion.portfolio import (
    DATASETS,
    TCO,
    SparseTCO,
    SparseTCOConfig,
    TCOConfig,
    load_relatives,
    synthetic_relatives,
)
from hf_ext.recipes.portfolio import main as run_recipe

COMPARED = ("sparse_tco", "topk_tco", "tco1", "tco2")


def package_cross_check(dataset: str, cost: float) -> dict:
    """Our TCO1/TCO2 against universal-portfolios' on ``dataset``: weights and wealth."""
    relatives = load_relatives(dataset)
    report = {}
    for name, ours_config, theirs in (
        ("tco1", TCOConfig(cost=cost, predictor="reversal"), TCO1(trx_fee_pct=cost)),
        ("tco2", TCOConfig(cost=cost, predictor="window", window=5), TCO2(trx_fee_pct=cost, window=5)),
    ):
        ours = backtest(TCO(ours_config), relatives)
        result = theirs.run(tools.dataset(dataset), log_progress=False)
        result.fee = cost
        their_wealth = float(result.total_wealth)
        # their accounting applied to our portfolios: the fee subtracted from the period's gross return
        additive = float(np.prod((ours.weights * relatives).sum(axis=1) - cost * ours.turnover))
        report |= {
            f"{dataset}/{name}/wealth_ours": float(ours.wealth[-1]),
            f"{dataset}/{name}/wealth_package": their_wealth,
            f"{dataset}/{name}/rel_diff_exact_accounting": float(ours.wealth[-1] / their_wealth - 1),
            f"{dataset}/{name}/rel_diff_their_accounting": additive / their_wealth - 1,
            f"{dataset}/{name}/max_weight_diff": float(np.abs(ours.weights - result.B.to_numpy()[1:]).max()),
        }
    return report


def synthetic_comparison(seeds: list[int], cost: float, k: int) -> dict:
    """Final wealth of the compared strategies on one synthetic market per seed: mean and std."""
    wealth = {name: [] for name in COMPARED}
    for seed in seeds:
        relatives = synthetic_relatives(500, 20, seed=seed)
        strategies = {
            "sparse_tco": SparseTCO(SparseTCOConfig(cost=cost, k=k)),
            "topk_tco": TopKTCO(TCO(TCOConfig(cost=cost)), k),
            "tco1": TCO(TCOConfig(cost=cost, predictor="reversal")),
            "tco2": TCO(TCOConfig(cost=cost)),
        }
        for name, strategy in strategies.items():
            wealth[name].append(float(backtest(strategy, relatives).wealth[-1]))
    summary = {}
    for name, values in wealth.items():
        summary[f"synthetic/k{k}/{name}/final_wealth"] = statistics.fmean(values)
        summary[f"synthetic/k{k}/{name}/final_wealth_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
    return summary


def goals(runs: dict, ks: list[int], cost: float) -> dict:
    """The issue's goals, per K, from the recipe's per-run metrics."""
    report = {}
    for k in ks:

        def wealth(dataset, name, k=k):
            return runs[f"{dataset}/{cost}/{name}" + (f"/k{k}" if name in ("sparse_tco", "topk_tco") else "")][
                "final_wealth"
            ]

        sparse = [runs[f"{dataset}/{cost}/sparse_tco/k{k}"] for dataset in DATASETS]
        report |= {
            f"k{k}/beats_topk_tco_on": sum(wealth(d, "sparse_tco") > wealth(d, "topk_tco") for d in DATASETS),
            f"k{k}/beats_tco1_on": sum(wealth(d, "sparse_tco") > wealth(d, "tco1") for d in DATASETS),
            f"k{k}/beats_tco2_on": sum(wealth(d, "sparse_tco") > wealth(d, "tco2") for d in DATASETS),
            f"k{k}/every_portfolio_k_sparse": all(run["max_holdings"] <= k for run in sparse),
            f"k{k}/psga_iterations_per_period": statistics.fmean(run["psga_iterations"] for run in sparse),
            f"k{k}/admm_iterations_per_period": statistics.fmean(run["admm_iterations"] for run in sparse),
            f"k{k}/ms_per_period": statistics.fmean(run["ms_per_period"] for run in sparse),
            f"k{k}/penalty_sparse_fraction": statistics.fmean(run["penalty_sparse_fraction"] for run in sparse),
        }
        report[f"k{k}/goal_topk_5_of_6"] = report[f"k{k}/beats_topk_tco_on"] >= 5
        report[f"k{k}/goal_tco1_4_of_6"] = report[f"k{k}/beats_tco1_on"] >= 4
    return report


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2], seeds_help="synthetic markets, one per seed")
    parser.add_argument("--ks", type=int, nargs="+", default=[3, 5, 10])
    parser.add_argument("--cost", type=float, default=0.0025)
    args = parser.parse_args()
    results = run_recipe(
        ["--strategies", *COMPARED, "--costs", str(args.cost), "--ks", *map(str, args.ks)]
        + ["--plot_cost", str(args.cost), "--plot_k", str(args.ks[len(args.ks) // 2])]
        + ["--output_dir", str(Path(args.output_dir) / "portfolio")]
    )
    runs = results["runs"]
    summary = {"cost": args.cost, "ks": args.ks, "seeds": args.seeds}
    for name, metrics in runs.items():
        summary[f"{name}/final_wealth"] = metrics["final_wealth"]
        summary[f"{name}/annual_volatility"] = metrics["annual_volatility"]
    summary |= goals(runs, args.ks, args.cost)
    cross = {}
    for dataset in DATASETS:
        cross |= package_cross_check(dataset, args.cost)
    summary |= cross
    exact = [abs(v) for key, v in cross.items() if key.endswith("rel_diff_exact_accounting")]
    theirs = [abs(v) for key, v in cross.items() if key.endswith("rel_diff_their_accounting")]
    summary["tco_within_1pct_of_package_exact_accounting"] = max(exact) <= 0.01
    summary["tco_within_1pct_of_package_their_accounting"] = max(theirs) <= 0.01
    summary["tco_max_weight_diff"] = max(v for key, v in cross.items() if key.endswith("max_weight_diff"))
    for k in args.ks:
        summary |= synthetic_comparison(args.seeds, args.cost, k)
    save_json(args.output_dir, "portfolio", summary)
    emit(summary)


if __name__ == "__main__":
    main()
