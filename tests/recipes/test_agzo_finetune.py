import json
import os
import subprocess
import sys

import pytest
import torch

from hf_ext._settings import SettingsError
from hf_ext.recipes import agzo_finetune, recipes_dir
from hf_ext.recipes.agzo_finetune import (
    AGZOFinetuneArguments,
    main,
    parser,
    results_table,
    run_method,
    summarize,
    wrapping_encoder_layers_under_fsdp,
)
from hf_ext.zo import AGZOConfig, MeZOConfig


@pytest.mark.slow
def test_recipe_runs_both_methods_on_minilm_with_equal_forward_budgets(tmp_path, capsys):
    config = recipes_dir() / "configs" / "agzo_finetune.yaml"
    argv = ["--config", str(config), "--max_steps", "3", "--logging_steps", "1", "--seeds", "0", "1"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each of the workers below runs
    try:
        results = main([*argv, "--workers", "1", "--output_dir", str(tmp_path / "in_turn")])
    finally:
        torch.set_num_threads(threads)
    assert set(results) == {"agzo", "mezo"}
    assert results["agzo"]["forward_passes"] == results["mezo"]["forward_passes"] == 6
    for result in results.values():
        assert list(result["runs"]) == [0, 1]
        assert 0 <= result["accuracy_before"] <= 1 and 0 <= result["accuracy_after"] <= 1
        assert all(len(run["loss"]) == 3 for run in result["runs"].values())
    assert json.loads((tmp_path / "in_turn" / "results.json").read_text()).keys() == results.keys()
    assert (tmp_path / "in_turn" / "loss.png").stat().st_size > 1000
    assert capsys.readouterr().out.rstrip().endswith(results_table(results))

    at_once = main([*argv, "--workers", "2", "--output_dir", str(tmp_path / "at_once")])
    for method, result in results.items():
        for seed, run in result["runs"].items():
            parallel = at_once[method]["runs"][seed]
            assert (parallel["loss"], parallel["accuracy_after"]) == (run["loss"], run["accuracy_after"])


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
            run_method(method, script_args, zo_config, training_args, {"train": None, "validation": None}, seed=3)
        built[method] = caught.value.args
    (agzo_args, agzo), (mezo_args, mezo) = built["agzo"], built["mezo"]
    assert type(agzo) is AGZOConfig and (agzo.eps, agzo.rank, agzo.weight_decay) == (0.01, 4, 0.1)
    assert type(mezo) is MeZOConfig and (mezo.eps, mezo.weight_decay, mezo.other_params) == (0.01, 0.1, "frozen")
    assert (agzo_args.learning_rate, mezo_args.learning_rate) == (0.02, 7e-4)
    assert agzo_args.weight_decay == mezo_args.weight_decay == 0.0  # ZOTrainer decays by the ZO config's
    assert agzo_args.output_dir == str(tmp_path / "agzo" / "seed_3") and agzo_args.seed == mezo_args.seed == 3
    assert mezo_args.max_steps == training_args.max_steps


def test_the_fsdp_wrap_class_is_set_for_the_run_only(monkeypatch):
    """Set for good by one in-process run, it made later FSDP runs of other recipes look for BertLayer (CI)."""
    monkeypatch.delenv("FSDP_TRANSFORMER_CLS_TO_WRAP", raising=False)
    with wrapping_encoder_layers_under_fsdp():
        assert os.environ["FSDP_TRANSFORMER_CLS_TO_WRAP"] == "BertLayer"
    assert "FSDP_TRANSFORMER_CLS_TO_WRAP" not in os.environ
    monkeypatch.setenv("FSDP_TRANSFORMER_CLS_TO_WRAP", "MyLayer")
    with wrapping_encoder_layers_under_fsdp():
        assert os.environ["FSDP_TRANSFORMER_CLS_TO_WRAP"] == "MyLayer"
    assert os.environ["FSDP_TRANSFORMER_CLS_TO_WRAP"] == "MyLayer"


def test_unknown_method_is_rejected():
    with pytest.raises(ValueError, match=r"`methods` must be a non-empty subset of \['agzo', 'mezo'\]"):
        AGZOFinetuneArguments(methods=["sgd"])


def _run(after: float, seconds: float) -> dict:
    return {
        "steps": 150,
        "accuracy_before": 0.15625,
        "accuracy_after": after,
        "eval_loss_after": 1.3604,
        "forward_passes": 300,
        "train_seconds": seconds,
        "learning_rate": 1e-2,
    }


def test_results_table_shows_the_spread_over_seeds_and_the_gap_paired_by_seed():
    """Issue 42: one seed's 150-step run showed AGZO 0.475 once and 0.350 after an unrelated change."""
    agzo = summarize({0: _run(0.5, 30.0), 1: _run(0.4, 31.0), 2: _run(0.45, 30.0)})
    mezo = summarize({0: _run(0.3, 40.0), 1: _run(0.42, 41.0), 2: _run(0.35, 40.0)})
    assert agzo["accuracy_after"] == pytest.approx(0.45) and agzo["accuracy_after_std"] == pytest.approx(0.05)
    assert results_table({"agzo": agzo, "mezo": mezo}).splitlines() == [
        "| method | seeds | steps | accuracy before | accuracy after (mean +- std, min-max) | eval loss | seconds |",
        "|---|---|---|---|---|---|---|",
        "| AGZO | 3 | 150 | 0.156 | 0.450 +- 0.050 (0.400-0.500) | 1.360 | 91 |",
        "| MeZO | 3 | 150 | 0.156 | 0.357 +- 0.060 (0.300-0.420) | 1.360 | 121 |",
        "",
        "AGZO - MeZO, paired by seed: +0.093 +- 0.110; AGZO ahead on 2 of 3",
    ]


@pytest.mark.parametrize("name", ["agzo_learning_rate", "mezo_learning_rate"])
def test_a_negative_learning_rate_is_refused_by_name(name):
    with pytest.raises(ValueError, match=f"AGZOFinetuneArguments: `{name}` must be >= 0, got -0.01"):
        AGZOFinetuneArguments(**{name: -0.01})


@pytest.mark.parametrize("workers", [0, 1.5, True])
def test_workers_must_be_a_positive_integer(workers):
    with pytest.raises((TypeError, ValueError), match="`workers` must be an integer"):
        AGZOFinetuneArguments(workers=workers)


class _TwoProcesses:
    num_processes = 2


def test_workers_are_refused_under_a_launch_of_several_processes(monkeypatch, tmp_path):
    """Under accelerate launch every process trains each run together; workers would train each run per process."""
    monkeypatch.setattr(agzo_finetune, "PartialState", _TwoProcesses)
    config = recipes_dir() / "configs" / "agzo_finetune.yaml"
    with pytest.raises(SettingsError, match="`workers` must be 1 under a launch of 2 processes"):
        main(["--config", str(config), "--workers", "2", "--output_dir", str(tmp_path)])


def test_the_shipped_configs_workers_follow_a_launch_of_several_processes(monkeypatch, tmp_path):
    """Issue 72: `hf-ext run agzo_finetune --accelerate-config fsdp2_cpu_2proc` refused the `workers: 2` of the
    shipped config, which the user never wrote."""

    def jobs_run(fn, jobs, workers, *args, **kwargs):
        raise RuntimeError(f"{len(jobs)} runs, {workers} at once")

    monkeypatch.setattr(agzo_finetune, "PartialState", _TwoProcesses)
    monkeypatch.setattr(agzo_finetune, "run_all", jobs_run)
    config = recipes_dir() / "configs" / "agzo_finetune.yaml"
    with pytest.raises(RuntimeError, match="2 runs, 1 at once"):
        main(["--config", str(config), "--output_dir", str(tmp_path)])
    own = tmp_path / "mine.yaml"  # a config of the user's own is what they wrote
    own.write_text("workers: 2\n")
    with pytest.raises(SettingsError, match="`workers` must be 1 under a launch of 2 processes"):
        main(["--config", str(own), "--output_dir", str(tmp_path)])


def test_the_runs_go_to_the_executor_given_and_none_is_taken_under_a_launch(monkeypatch, tmp_path):
    """Issue 74: the recipes made of jobs take an executor (Dask, Ray) from Python; agzo_finetune took none."""

    def jobs_run(fn, jobs, workers, desc, executor=None, **kwargs):
        raise RuntimeError(f"{len(jobs)} runs to {executor}")

    monkeypatch.setattr(agzo_finetune, "run_all", jobs_run)
    argv = ["--config", str(recipes_dir() / "configs" / "agzo_finetune.yaml"), "--output_dir", str(tmp_path)]
    with pytest.raises(RuntimeError, match="2 runs to my-cluster"):
        main(argv, executor="my-cluster")
    monkeypatch.setattr(agzo_finetune, "PartialState", _TwoProcesses)
    with pytest.raises(ValueError, match="main: `executor` runs each run in one of its workers; under a launch of 2"):
        main(argv, executor="my-cluster")


@pytest.mark.parametrize("seeds", [[0, 0], [-1]])
def test_seeds_must_be_distinct_and_non_negative(seeds):
    with pytest.raises(ValueError, match="`seeds` must be distinct non-negative integers"):
        AGZOFinetuneArguments(seeds=seeds)


@pytest.mark.slow  # two launches of two processes, ~2 minutes
def test_two_processes_take_the_shipped_workers_and_refuse_the_users_in_one_line(tmp_path, run_on_two_processes):
    """Issue 72: the README's `--accelerate-config fsdp2_cpu_2proc` run refused the shipped `workers: 2`, and
    `workers=2` under `cpu_2proc` printed a traceback per rank before the line that said why."""
    run_on_two_processes("agzo_finetune", ["max_steps=1", "methods=agzo"], accelerate_config="fsdp2_cpu_2proc")
    assert (tmp_path / "results.json").is_file()
    command = [sys.executable, "-m", "hf_ext.cli", "run", "agzo_finetune", "--accelerate-config", "cpu_2proc"]
    command += ["workers=2", "max_steps=1", f"output_dir={tmp_path / 'refused'}"]
    refused = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("agzo_finetune: `workers` must be 1 under a launch of 2")
