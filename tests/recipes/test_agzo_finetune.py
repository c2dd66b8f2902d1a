import json

import pytest

from hf_ext.recipes import agzo_finetune, recipes_dir
from hf_ext.recipes.agzo_finetune import AGZOFinetuneArguments, main, parser, results_table, run_method
from hf_ext.zo import AGZOConfig, MeZOConfig


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


def test_both_methods_share_the_parsed_zo_settings_and_each_gets_its_learning_rate(monkeypatch, tmp_path):
    """Issue 38: `eps` and `rank` were copies of the ZO configs' fields; AGZOConfig is now parsed itself."""

    class Built(Exception):
        pass

    def zo_trainer(model, args, zo_config, **kwargs):
        raise Built(args, zo_config)

    monkeypatch.setattr(agzo_finetune, "ZOTrainer", zo_trainer)
    monkeypatch.setattr(agzo_finetune, "load_minilm", lambda num_labels: (None, None))
    flags = ["--eps", "0.01", "--rank", "4", "--weight_decay", "0.1", "--agzo_learning_rate", "0.02"]
    flags += ["--output_dir", str(tmp_path), "--use_cpu", "true", "--report_to", "none"]
    script_args, zo_config, training_args = parser().parse_args_and_config(flags)
    built = {}
    for method in ("agzo", "mezo"):
        with pytest.raises(Built) as caught:
            run_method(method, script_args, zo_config, training_args, {"train": None, "validation": None})
        built[method] = caught.value.args
    (agzo_args, agzo), (mezo_args, mezo) = built["agzo"], built["mezo"]
    assert type(agzo) is AGZOConfig and (agzo.eps, agzo.rank, agzo.weight_decay) == (0.01, 4, 0.1)
    assert type(mezo) is MeZOConfig and (mezo.eps, mezo.weight_decay, mezo.other_params) == (0.01, 0.1, "frozen")
    assert (agzo_args.learning_rate, mezo_args.learning_rate) == (0.02, 7e-4)
    assert agzo_args.weight_decay == mezo_args.weight_decay == 0.0  # ZOTrainer decays by the ZO config's
    assert agzo_args.output_dir == str(tmp_path / "agzo") and mezo_args.max_steps == training_args.max_steps


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
