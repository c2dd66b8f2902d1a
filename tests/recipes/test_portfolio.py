import csv
import json

import pytest

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.portfolio import PortfolioArguments, main


def _flags(tmp_path, *extra):
    config = str(recipes_dir() / "configs" / "portfolio.yaml")
    return ["--config", config, "--quick", "true", "--output_dir", str(tmp_path), *extra]


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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"datasets": ["ftse"]}, r"`datasets` must be a non-empty list from \['djia'"),
        ({"costs": [-0.001]}, r"`costs` must be rates in \[0, 1\)"),
        ({"ks": [0]}, "`ks` must be integers >= 1"),
        ({"rho": -1.0}, "SparseTCOConfig: `rho` must be >= 0"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PortfolioArguments(**kwargs)


def test_k_above_the_assets_of_a_data_set_is_refused(tmp_path):
    with pytest.raises(ValueError, match="`ks` holds 31, more than the 30 assets of djia"):
        main(["--datasets", "djia", "--strategies", "topk_tco", "--ks", "31", "--output_dir", str(tmp_path)])


@pytest.mark.slow
def test_two_processes_split_the_runs_and_write_them_all(run_on_two_processes, tmp_path):
    out = run_on_two_processes("portfolio", ["quick=true"])
    assert "djia at cost 0.0025: final wealth" in out
    with (tmp_path / "metrics.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 12
