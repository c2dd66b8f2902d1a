import json

import pytest

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.agzo_finetune import AGZOFinetuneArguments, main, results_table


@pytest.mark.slow
def test_recipe_runs_both_methods_on_minilm_with_equal_forward_budgets(tmp_path, capsys):
    config = recipes_dir() / "configs" / "agzo_finetune.yaml"
    argv = ["--config", str(config), "--max_steps", "3", "--logging_steps", "1", "--output_dir", str(tmp_path)]
    results = main(argv)
    assert set(results) == {"agzo", "mezo"}
    assert results["agzo"]["forward_passes"] == results["mezo"]["forward_passes"] == 6
    for result in results.values():
        assert 0 <= result["accuracy_before"] <= 1 and 0 <= result["accuracy_after"] <= 1
        assert len(result["loss"]) == 3
    assert json.loads((tmp_path / "results.json").read_text()).keys() == results.keys()
    assert (tmp_path / "loss.png").stat().st_size > 1000
    assert capsys.readouterr().out.rstrip().endswith(results_table(results))


def test_unknown_method_is_rejected():
    with pytest.raises(ValueError, match=r"`methods` must be a non-empty subset of \['agzo', 'mezo'\]"):
        AGZOFinetuneArguments(methods=["sgd"])


def test_results_table_has_one_row_per_method():
    result = {"steps": 150, "accuracy_before": 0.15625, "accuracy_after": 0.5, "eval_loss_after": 1.3604}
    table = results_table({"agzo": {**result, "train_seconds": 61.4}, "mezo": {**result, "train_seconds": 95.5}})
    assert table.splitlines() == [
        "| method | steps | accuracy before | accuracy after | eval loss | train seconds |",
        "|---|---|---|---|---|---|",
        "| AGZO | 150 | 0.156 | 0.500 | 1.360 | 61 |",
        "| MeZO | 150 | 0.156 | 0.500 | 1.360 | 96 |",
    ]
