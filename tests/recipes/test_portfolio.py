import csv
import json

import pytest

from hf_ext import cli
from hf_ext.companion.portfolio import SparseTCOConfig
from hf_ext.recipes import shipped_config
from hf_ext.recipes._settings import run_config
from hf_ext.recipes.portfolio import PortfolioArguments, PortfolioStrategyConfig, main, parser


def _flags(tmp_path, *extra):
    return ["--config", str(shipped_config("portfolio_quick")), "--output_dir", str(tmp_path), *extra]


def test_quick_run_writes_metrics_wealth_curves_and_plot(tmp_path, capfd):
    results = main(_flags(tmp_path))
    with (tmp_path / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 6  # costs x strategies (one K)
    sparse = [row for row in rows if row["strategy"] in ("sparse_tco", "topk_tco")]
    assert sparse and all(int(row["max_holdings"]) <= 3 for row in sparse)
    free = {row["strategy"]: float(row["final_wealth"]) for row in rows if row["cost"] == "0.0"}
    costly = {row["strategy"]: float(row["final_wealth"]) for row in rows if row["cost"] == "0.0025"}
    assert all(costly[name] < free[name] for name in ("tco1", "tco2", "best_crp"))  # costs are paid
    assert costly["buy_and_hold"] == pytest.approx(free["buy_and_hold"])  # buy-and-hold never trades
    psga = results["runs"]["djia/0.0025/sparse_tco/k3"]
    assert psga["psga_iterations"] >= 1 and psga["ms_per_period"] > 0 and 0 <= psga["penalty_sparse_fraction"] <= 1
    with (tmp_path / "wealth.csv").open() as handle:
        assert sum(1 for _ in handle) == 1 + 12 * 80
    assert json.loads((tmp_path / "results.json").read_text())["runs"] == results["runs"]
    assert (tmp_path / "wealth.png").stat().st_size > 1000
    out, err = capfd.readouterr()
    assert "djia at cost 0.0025: final wealth sparse_tco3" in out
    assert "12/12" in err  # the progress bar
    assert results["strategy"] == {name: getattr(SparseTCOConfig(), name) for name in results["strategy"]}
    assert not {"cost", "k"} & results["strategy"].keys()


def test_a_setting_given_with_the_quick_config_wins_over_it(tmp_path):
    args, config = parser().parse_args_and_config(_flags(tmp_path, "--ks", "2", "4", "--rho", "3.0"))
    assert args.ks == [2, 4] and args.max_periods == 80 and config.rho == 3.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"datasets": ["ftse"]}, r"`datasets` must be a non-empty list from \['djia'"),
        (
            {"costs": [-0.001]},
            r"PortfolioArguments: `costs` holds -0.001: SparseTCOConfig: `cost` must be a rate in \[0, 1\)",
        ),
        ({"ks": [0]}, "PortfolioArguments: `ks` holds 0: SparseTCOConfig: `k` must be an integer >= 1, got 0"),
        ({"ks": []}, "PortfolioArguments: `ks` must not be empty"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PortfolioArguments(**kwargs)


def test_the_strategy_settings_are_sparse_tcos_own_checked_by_it():
    with pytest.raises(ValueError, match="PortfolioStrategyConfig: `rho` must be >= 0"):
        PortfolioStrategyConfig(rho=-1.0)
    config = run_config(SparseTCOConfig, PortfolioStrategyConfig(rho=2.0), cost=0.001, k=4)
    assert (config.cost, config.k, config.rho) == (0.001, 4, 2.0)


def test_the_swept_fields_are_settings_only_as_their_lists():
    """Issue 38: the recipe copied SparseTCOConfig's fields; `cost` and `k` are now set only by `costs` and `ks`."""
    settings = cli.recipe_help("portfolio", None, [])
    assert "\n  costs: list[float]" in settings and "\n  rho: float = 1.0" in settings
    assert "\n  cost:" not in settings and "\n  k:" not in settings


def test_k_above_the_assets_of_a_data_set_is_refused_by_the_strategy(tmp_path):
    with pytest.raises(ValueError, match=r"TopKTCO: `k` must be between 1 and the number of assets \(30\), got 31"):
        main(["--datasets", "djia", "--strategies", "topk_tco", "--ks", "31", "--output_dir", str(tmp_path)])


@pytest.mark.slow
def test_on_two_processes_the_main_one_runs_them_all_on_two_workers(run_on_two_processes, tmp_path):
    out = run_on_two_processes("portfolio", ["--config", "portfolio_quick", "workers=2"])
    assert "djia at cost 0.0025: final wealth" in out
    with (tmp_path / "metrics.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 12
