"""K-sparse TCO (PSGA + ADMM) vs TCO1/TCO2, top-K TCO, buy-and-hold and the best CRP on six real markets.

    hf-ext run portfolio                                   # shipped config: 6 data sets x 4 costs x K in {3, 5, 10}
    hf-ext run portfolio datasets="djia msci" costs=0.0025 ks=5
    hf-ext run portfolio --config portfolio_quick          # seconds: the end-to-end check
    hf-ext run portfolio workers=2                         # two runs at a time, on local processes

Backtests every strategy online with exact self-financing accounting (``hf_ext.companion.portfolio``) on the
data sets shipped by universal-portfolios, for each proportional cost rate; the sparse strategies (K-sparse TCO
and TCO's portfolio cut to its K largest weights) for each K. The best constant rebalanced portfolio is chosen
in hindsight before costs (a reference, not an online rule). Writes ``metrics.csv`` (one row per run: wealth,
annualised return and volatility, Sharpe, drawdown, turnover, holdings; PSGA iterations and milliseconds per
period), ``wealth.csv`` (every run's wealth after each period), ``results.json`` and ``wealth.png`` (wealth
curves at ``plot_cost`` and ``plot_k``, one panel per data set) to ``output_dir``.

The runs go ``workers`` at a time to local processes, or to any ``concurrent.futures.Executor`` passed to
``main(argv, executor=...)`` (Dask, Ray: docs/cluster.md). Launched on several processes
(``--accelerate-config cpu_2proc``), the main one runs them and the others wait.
"""

import csv
import time
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.companion.evaluation.portfolio import (
    BuyAndHold,
    ConstantRebalanced,
    TopKTCO,
    backtest,
    best_constant_rebalanced,
    summarize,
)
from hf_ext.companion.portfolio import DATASETS, TCO, SparseTCO, SparseTCOConfig, TCOConfig, load_relatives
from hf_ext.recipes._jobs import check_workers, on_main_process, run_all, workers_field
from hf_ext.recipes._plotting import plot_bands
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser, shared_settings

SPARSE = ("sparse_tco", "topk_tco")  # run once per K
STRATEGIES = (*SPARSE, "tco1", "tco2", "buy_and_hold", "best_crp")


@dataclass
class PortfolioArguments:
    datasets: list[str] = field(default_factory=lambda: list(DATASETS), metadata={"help": f"Any of {list(DATASETS)}."})
    strategies: list[str] = field(default_factory=lambda: list(STRATEGIES), metadata={"help": f"Any of {STRATEGIES}."})
    costs: list[float] = field(
        default_factory=lambda: [0.0, 0.001, 0.0025, 0.005],
        metadata={"help": "Proportional transaction cost rates, each a SparseTCOConfig `cost` (0.0025 = 0.25%)."},
    )
    ks: list[int] = field(
        default_factory=lambda: [3, 5, 10], metadata={"help": "Cardinalities K of the sparse ones, each a `k`."}
    )
    max_periods: int = field(default=0, metadata={"help": "Use only the first max_periods periods (0 = all)."})
    plot_cost: float = field(default=0.0025, metadata={"help": "Cost rate of the plotted wealth curves."})
    plot_k: int = field(default=5, metadata={"help": "K of the plotted sparse wealth curves."})
    workers: int = workers_field()
    output_dir: str = field(default="outputs/portfolio", metadata={"help": "Where the CSVs, JSON and PNG go."})

    def __post_init__(self):
        check_finite_fields(self)
        check_workers("PortfolioArguments", self.workers)
        for name, chosen, allowed in (
            ("datasets", self.datasets, DATASETS),
            ("strategies", self.strategies, STRATEGIES),
        ):
            unknown = [value for value in chosen if value not in allowed]
            if unknown or not chosen:
                allowed = list(allowed)
                raise ValueError(f"PortfolioArguments: `{name}` must be a non-empty list from {allowed}, got {chosen}")
        for name, values, config_field in (("costs", self.costs, "cost"), ("ks", self.ks, "k")):
            if not values:
                raise ValueError(f"PortfolioArguments: `{name}` must not be empty")
            for value in values:  # checked where the strategies check it
                try:
                    SparseTCOConfig(**{config_field: value})
                except ValueError as error:
                    raise ValueError(f"PortfolioArguments: `{name}` holds {value!r}: {error}") from None
        if self.max_periods < 0:
            raise ValueError(f"PortfolioArguments: `max_periods` must be >= 0 (0 = all), got {self.max_periods}")


@dataclass
class PortfolioStrategyConfig(SparseTCOConfig):
    """The strategies' settings, shared by every run: K-sparse TCO's, of which TCO's are a part.

    ``cost`` and ``k`` are set for each run from PortfolioArguments' ``costs`` and ``ks``. ``predictor`` is
    K-sparse and top-K TCO's; TCO1 and TCO2 are TCO with the reversal and window predictors.
    """

    cost: float = set_per_run(SparseTCOConfig, "cost", by="PortfolioArguments' `costs`")
    k: int = set_per_run(SparseTCOConfig, "k", by="PortfolioArguments' `ks`")


def make_strategy(config: PortfolioStrategyConfig, name: str, cost: float, k: int | None, relatives: np.ndarray):
    """The strategy ``name`` at ``cost`` (and ``k`` for the sparse ones); the best CRP is fitted on ``relatives``."""
    if name == "sparse_tco":
        return SparseTCO(run_config(SparseTCOConfig, config, cost=cost, k=k))
    if name == "topk_tco":
        return TopKTCO(TCO(run_config(TCOConfig, config, cost=cost)), k)
    if name in ("tco1", "tco2"):
        return TCO(run_config(TCOConfig, config, cost=cost, predictor="reversal" if name == "tco1" else "window"))
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


def run_one(
    args: PortfolioArguments, config: PortfolioStrategyConfig, dataset: str, cost: float, name: str, k: int | None
) -> dict:
    """One backtest: its key, metrics (with PSGA's iterations and time for K-sparse TCO) and wealth curve."""
    relatives = load_relatives(dataset)
    if args.max_periods:
        relatives = relatives[: args.max_periods]
    strategy = make_strategy(config, name, cost, k, relatives)
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
    return settings_parser(PortfolioArguments, PortfolioStrategyConfig)


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
    plot_bands(panels, path, f"Wealth at cost {args.plot_cost:.2%}", "period", "wealth (log scale)", log_y=True)


def write_csvs(runs: list[dict], out: Path) -> None:
    fields = list(runs[0]["key"]) + sorted({name for run in runs for name in run["metrics"]})
    write_rows(out / "metrics.csv", (run["key"] | run["metrics"] for run in runs), fields)
    with (out / "wealth.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*runs[0]["key"], "period", "wealth"])
        for run in runs:
            writer.writerows([*run["key"].values(), t, w] for t, w in enumerate(run["wealth"]))


@on_main_process
def main(argv: list[str] | None = None, executor: Executor | None = None) -> dict:
    """The recipe; its backtests run on ``executor`` when given (a Dask or Ray executor), else as ``workers`` says."""
    args, config = parser(argv).parse_args_and_config(argv)
    runs = run_all(run_one, [(args, config, *job) for job in jobs_of(args)], args.workers, "portfolio", executor)
    results = {
        "runs": {run_name(run["key"]): run["metrics"] for run in runs},
        "args": asdict(args),
        "strategy": shared_settings(config),
    }
    out = Path(args.output_dir)
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
    return results


if __name__ == "__main__":
    run_as_script(main)
