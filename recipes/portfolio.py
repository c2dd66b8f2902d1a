"""K-sparse TCO (PSGA + ADMM) vs TCO1/TCO2, top-K TCO, buy-and-hold and the best CRP on six real markets.

    hf-ext run portfolio                                   # shipped config: 6 data sets x 4 costs x K in {3, 5, 10}
    hf-ext run portfolio datasets="djia msci" costs=0.0025 ks=5
    hf-ext run portfolio quick=true                        # seconds: the end-to-end check
    hf-ext run portfolio --accelerate-config cpu_2proc     # the runs split over two CPU processes

Backtests every strategy online with exact self-financing accounting (``hf_ext.companion.portfolio``) on the
data sets shipped by universal-portfolios, for each proportional cost rate; the sparse strategies (K-sparse TCO
and TCO's portfolio cut to its K largest weights) for each K. The best constant rebalanced portfolio is chosen
in hindsight before costs (a reference, not an online rule). Writes ``metrics.csv`` (one row per run: wealth,
annualised return and volatility, Sharpe, drawdown, turnover, holdings; PSGA iterations and milliseconds per
period), ``wealth.csv`` (every run's wealth after each period), ``results.json`` and ``wealth.png`` (wealth
curves at ``plot_cost`` and ``plot_k``, one panel per data set) to ``output_dir``.
"""

import csv
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from accelerate import PartialState
from accelerate.utils import gather_object
from tqdm.auto import tqdm
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.companion.portfolio import (
    DATASETS,
    TCO,
    BuyAndHold,
    ConstantRebalanced,
    SparseTCO,
    SparseTCOConfig,
    TCOConfig,
    TopKTCO,
    backtest,
    best_constant_rebalanced,
    load_relatives,
    summarize,
)
from hf_ext.plotting import plot_bands
from hf_ext.recipes._results import write_results, write_rows

SPARSE = ("sparse_tco", "topk_tco")  # run once per K
STRATEGIES = (*SPARSE, "tco1", "tco2", "buy_and_hold", "best_crp")
QUICK = {"datasets": ["djia"], "costs": [0.0, 0.0025], "ks": [3], "max_periods": 80, "plot_cost": 0.0025, "plot_k": 3}


@dataclass
class PortfolioArguments:
    datasets: list[str] = field(default_factory=lambda: list(DATASETS), metadata={"help": f"Any of {list(DATASETS)}."})
    strategies: list[str] = field(default_factory=lambda: list(STRATEGIES), metadata={"help": f"Any of {STRATEGIES}."})
    costs: list[float] = field(
        default_factory=lambda: [0.0, 0.001, 0.0025, 0.005],
        metadata={"help": "Proportional transaction cost rates in [0, 1) (0.0025 = 0.25%)."},
    )
    ks: list[int] = field(default_factory=lambda: [3, 5, 10], metadata={"help": "Cardinalities K of the sparse ones."})
    predictor: str = field(
        default="window", metadata={"help": "Prediction of K-sparse and top-K TCO: 'window' (TCO2's) or 'reversal'."}
    )
    window: int = field(default=5, metadata={"help": "Prices averaged by the 'window' predictor (TCO2's window)."})
    eta: float = field(default=10.0, metadata={"help": "Step on the predicted relative gains (TCO's 10)."})
    lambda_scale: float = field(default=10.0, metadata={"help": "Soft threshold lambda = lambda_scale * cost."})
    rho: float = field(default=1.0, metadata={"help": "DC penalty weight of K-sparse TCO."})
    step: float = field(default=1.0, metadata={"help": "PSGA proximal step alpha."})
    psga_tol: float = field(default=1e-6, metadata={"help": "PSGA stopping tolerance on the largest weight change."})
    psga_max_iter: int = field(default=200, metadata={"help": "PSGA iterations per period at most."})
    admm_penalty: float = field(default=1.0, metadata={"help": "ADMM's augmented-Lagrangian penalty."})
    admm_tol: float = field(default=1e-9, metadata={"help": "ADMM stopping tolerance on both residuals."})
    admm_max_iter: int = field(default=1000, metadata={"help": "ADMM iterations per proximal step at most."})
    max_periods: int = field(default=0, metadata={"help": "Use only the first max_periods periods (0 = all)."})
    plot_cost: float = field(default=0.0025, metadata={"help": "Cost rate of the plotted wealth curves."})
    plot_k: int = field(default=5, metadata={"help": "K of the plotted sparse wealth curves."})
    output_dir: str = field(default="outputs/portfolio", metadata={"help": "Where the CSVs, JSON and PNG go."})
    quick: bool = field(default=False, metadata={"help": "DJIA, 80 periods, costs 0 and 0.25%, K = 3: a check."})

    def __post_init__(self):
        check_finite_fields(self)
        for name, chosen, allowed in (
            ("datasets", self.datasets, DATASETS),
            ("strategies", self.strategies, STRATEGIES),
        ):
            unknown = [value for value in chosen if value not in allowed]
            if unknown or not chosen:
                allowed = list(allowed)
                raise ValueError(f"PortfolioArguments: `{name}` must be a non-empty list from {allowed}, got {chosen}")
        if not self.costs or not all(0 <= cost < 1 for cost in self.costs):
            raise ValueError(f"PortfolioArguments: `costs` must be rates in [0, 1), got {self.costs}")
        if not self.ks or not all(k >= 1 for k in self.ks):
            raise ValueError(f"PortfolioArguments: `ks` must be integers >= 1, got {self.ks}")
        if self.max_periods < 0:
            raise ValueError(f"PortfolioArguments: `max_periods` must be >= 0 (0 = all), got {self.max_periods}")
        self.sparse_config(self.plot_cost, self.plot_k)  # the strategy settings, checked by their own config

    def sparse_config(self, cost: float, k: int) -> SparseTCOConfig:
        names = ("predictor", "window", "eta", "lambda_scale", "rho", "step", "psga_tol", "psga_max_iter")
        names += ("admm_penalty", "admm_tol", "admm_max_iter")
        return SparseTCOConfig(cost=cost, k=k, **{name: getattr(self, name) for name in names})


def make_strategy(args: PortfolioArguments, name: str, cost: float, k: int | None, relatives: np.ndarray):
    """The strategy ``name`` at ``cost`` (and ``k`` for the sparse ones); the best CRP is fitted on ``relatives``."""
    if name == "sparse_tco":
        return SparseTCO(args.sparse_config(cost, k))
    if name == "topk_tco":
        return TopKTCO(TCO(TCOConfig(cost, args.eta, args.lambda_scale, args.predictor, args.window)), k)
    if name in ("tco1", "tco2"):
        predictor = "reversal" if name == "tco1" else "window"
        return TCO(TCOConfig(cost, args.eta, args.lambda_scale, predictor, args.window))
    if name == "buy_and_hold":
        return BuyAndHold()
    return ConstantRebalanced(best_constant_rebalanced(relatives))


def jobs_of(args: PortfolioArguments) -> list[tuple[str, float, str, int | None]]:
    """Every (data set, cost, strategy, K) run; K is None for the strategies that are not sparse."""
    return [
        (dataset, cost, name, k)
        for dataset in args.datasets
        for cost in args.costs
        for name in args.strategies
        for k in (args.ks if name in SPARSE else [None])
    ]


def run_one(args: PortfolioArguments, dataset: str, cost: float, name: str, k: int | None) -> dict:
    """One backtest: its key, metrics (with PSGA's iterations and time for K-sparse TCO) and wealth curve."""
    relatives = load_relatives(dataset)
    if args.max_periods:
        relatives = relatives[: args.max_periods]
    if k is not None and k > relatives.shape[1]:
        raise ValueError(f"PortfolioArguments: `ks` holds {k}, more than the {relatives.shape[1]} assets of {dataset}")
    strategy = make_strategy(args, name, cost, k, relatives)
    started = time.perf_counter()
    run = backtest(strategy, relatives, cost)
    metrics = summarize(run) | {"seconds": time.perf_counter() - started}
    if isinstance(strategy, SparseTCO):
        rebalances = max(len(strategy.iterations), 1)
        metrics |= {
            "psga_iterations": float(np.mean(strategy.iterations)),
            "admm_iterations": float(np.mean(strategy.admm_iterations)),
            "ms_per_period": 1000 * float(np.mean(strategy.seconds)),
            "penalty_sparse_fraction": strategy.penalty_sparse / rebalances,
        }
    key = {"dataset": dataset, "cost": cost, "strategy": name, "k": k}
    return {"key": key, "metrics": metrics, "wealth": run.wealth.tolist()}


def run_name(key: dict) -> str:
    return f"{key['dataset']}/{key['cost']}/{key['strategy']}" + (f"/k{key['k']}" if key["k"] is not None else "")


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return TrlParser((PortfolioArguments,))


def parse_args(argv: list[str] | None) -> PortfolioArguments:
    (args,) = parser(argv).parse_args_and_config(argv)
    if args.quick:
        args = PortfolioArguments(**(asdict(args) | QUICK))
    return args


def plot_wealth(runs: list[dict], args: PortfolioArguments, path: Path) -> None:
    """Wealth curves at ``plot_cost`` (sparse ones at ``plot_k``), one panel per data set, log scale."""
    panels: dict[str, dict[str, list[list[float]]]] = {}
    for run in runs:
        key = run["key"]
        if key["cost"] == args.plot_cost and key["k"] in (None, args.plot_k):
            label = key["strategy"] + (f" (K={key['k']})" if key["k"] is not None else "")
            panels.setdefault(key["dataset"], {})[label] = [run["wealth"]]
    if not panels:
        return
    figure = plot_bands(panels, path, f"Wealth at cost {args.plot_cost:.2%}", "period", "wealth", ncols=3)
    for ax in figure.axes:
        ax.set_yscale("log")
    figure.savefig(path, dpi=120)


def write_csvs(runs: list[dict], out: Path) -> None:
    fields = list(runs[0]["key"]) + sorted({name for run in runs for name in run["metrics"]})
    write_rows(out / "metrics.csv", (run["key"] | run["metrics"] for run in runs), fields)
    with (out / "wealth.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*runs[0]["key"], "period", "wealth"])
        for run in runs:
            writer.writerows([*run["key"].values(), t, w] for t, w in enumerate(run["wealth"]))


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    state = PartialState(cpu=not torch.cuda.is_available())
    jobs = jobs_of(args)
    mine = jobs[state.process_index :: state.num_processes]
    runs = [run_one(args, *job) for job in tqdm(mine, desc=f"portfolio (process {state.process_index})", unit="run")]
    runs = sorted(gather_object(runs), key=lambda run: jobs.index(tuple(run["key"].values())))
    results = {"runs": {run_name(run["key"]): run["metrics"] for run in runs}, "args": asdict(args)}
    out = Path(args.output_dir)
    if state.is_main_process:
        write_results(out, results)
        write_csvs(runs, out)
        plot_wealth(runs, args, out / "wealth.png")
        for dataset in args.datasets:
            line = ", ".join(
                f"{run['key']['strategy']}{'' if run['key']['k'] is None else run['key']['k']} "
                f"{run['metrics']['final_wealth']:.3g}"
                for run in runs
                if run["key"]["dataset"] == dataset and run["key"]["cost"] == args.plot_cost
            )
            print(f"{dataset} at cost {args.plot_cost}: final wealth {line}")
        print(f"wrote {out / 'metrics.csv'}, {out / 'wealth.csv'}, {out / 'results.json'} and {out / 'wealth.png'}")
    state.wait_for_everyone()
    return results


if __name__ == "__main__":
    main()
