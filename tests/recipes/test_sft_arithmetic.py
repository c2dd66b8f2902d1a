import json

import pytest

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.sft_arithmetic import main

TINY_RUN = ["model=tiny", "num_train=16", "num_eval=4", "max_new_tokens=3", "per_device_train_batch_size=4"]


def _flags(overrides):
    return [part for item in overrides for part in ("--" + item.split("=")[0], item.split("=")[1])]


def test_recipe_trains_and_writes_results_and_plot(tmp_path):
    config = recipes_dir() / "configs" / "sft_arithmetic.yaml"
    results = main(["--config", str(config), *_flags(TINY_RUN), "--output_dir", str(tmp_path)])
    assert 0 <= results["accuracy_before"] <= 1 and 0 <= results["accuracy_after"] <= 1
    assert len(results["loss"]) >= 2
    assert json.loads((tmp_path / "results.json").read_text())["loss"] == [list(p) for p in results["loss"]]
    assert (tmp_path / "loss.png").stat().st_size > 1000


def test_recipe_rejects_unknown_model(tmp_path):
    with pytest.raises(ValueError, match=r"`model` must be one of \['smollm2', 'tiny'\]"):
        main(["--model", "gpt5", "--output_dir", str(tmp_path)])


@pytest.mark.slow
def test_cli_runs_the_recipe_on_two_cpu_processes(tmp_path, run_on_two_processes):
    assert "accuracy after training" in run_on_two_processes("sft_arithmetic", TINY_RUN)
    assert (tmp_path / "results.json").exists() and (tmp_path / "loss.png").exists()


@pytest.mark.slow
def test_cli_runs_the_recipe_sharded_on_two_cpu_processes_as_one_process_does(tmp_path, run_on_two_processes):
    halves = [item.replace("per_device_train_batch_size=4", "per_device_train_batch_size=2") for item in TINY_RUN]
    run_on_two_processes("sft_arithmetic", [*halves, "logging_steps=1"], accelerate_config="fsdp2_cpu_2proc")
    sharded = json.loads((tmp_path / "results.json").read_text())
    config = str(recipes_dir() / "configs" / "sft_arithmetic.yaml")  # as `hf-ext run` reads it
    one = main(["--config", config, *_flags([*TINY_RUN, "logging_steps=1"]), "--output_dir", str(tmp_path / "one")])
    assert [step for step, _ in sharded["loss"]] == [step for step, _ in one["loss"]] == [1, 2, 3, 4]
    assert [loss for _, loss in sharded["loss"]] == pytest.approx([loss for _, loss in one["loss"]], rel=1e-6)
    assert sharded["accuracy_after"] == one["accuracy_after"]
