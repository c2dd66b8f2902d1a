import json
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.slow  # three processes, ~60 s
def test_a_run_killed_after_a_checkpoint_resumes_from_it_in_a_new_process_as_the_uninterrupted_run_ends(
    tmp_path, resume_check
):
    """`resume_from_checkpoint=last` reaches trainer.train() (it was parsed and dropped): killed once checkpoint-3
    appears, the rerun resumes from the newest complete checkpoint, leaving the earlier ones as they were (a rerun
    from the start would write them again), and writes the uninterrupted run's weights, optimizer, loss curve and
    accuracies."""
    config = str(recipes_dir() / "configs" / "sft_arithmetic.yaml")
    checkpointed = [*TINY_RUN, "logging_steps=1", "save_strategy=steps", "save_steps=1", "resume_from_checkpoint=last"]
    arguments = resume_check.module_command("hf_ext.recipes.sft_arithmetic", "--config", config, *_flags(checkpointed))
    first = Path("checkpoint-1") / "model.safetensors"
    written = {}

    def killed_when(folder: Path) -> bool:
        if (folder / "checkpoint-3").is_dir():
            written["first"] = (folder / first).stat().st_mtime_ns
            return True
        return False

    pickled_paths = frozenset(f"checkpoint-{step}/training_args.bin" for step in range(1, 5))  # hold output_dir
    outputs = resume_check.assert_resumes_identically(
        arguments,
        killed_when,
        tmp_path,
        ignored_keys={"results.json": {"train_seconds"}},
        timed_files=pickled_paths,
    )
    assert (tmp_path / "resumed" / first).stat().st_mtime_ns == written["first"]
    assert {"checkpoint-4/model.safetensors", "checkpoint-4/optimizer.pt", "loss.png"} <= outputs.keys()
    assert [step for step, _ in json.loads(outputs["results.json"])["loss"]] == [1, 2, 3, 4]


def test_a_resume_under_other_settings_is_refused_in_one_line_and_a_longer_run_is_not(tmp_path):
    """Issue 72: rerun with `learning_rate=1e-3` added, the run resumed from its last checkpoint, trained 0 steps and
    rewrote results.json (which did not record the training arguments), with exit status 0 and no word."""
    config = str(recipes_dir() / "configs" / "sft_arithmetic.yaml")
    run = ["--config", config, *_flags([*TINY_RUN, "num_train=8", "save_strategy=steps", "save_steps=1"])]
    run += ["--resume_from_checkpoint", "last", "--output_dir", str(tmp_path)]
    main([*run, "--max_steps", "1"])
    results = (tmp_path / "results.json").read_bytes()
    assert json.loads((tmp_path / "settings.json").read_text())["learning_rate"] == 5e-5  # beside the results

    command = [sys.executable, "-m", "hf_ext.recipes.sft_arithmetic", *run, "--max_steps", "1"]
    refused = subprocess.run([*command, "--learning_rate", "1e-3"], capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr[-3000:]
    assert f"cannot resume the checkpoint {tmp_path / 'checkpoint-1'} under other settings" in refused.stderr
    assert "learning_rate: stored 5e-05, now 0.001. Rerun with the stored settings" in refused.stderr
    assert (tmp_path / "results.json").read_bytes() == results

    longer = main([*run, "--max_steps", "2"])  # as transformers resumes: on to the new end
    assert [step for step, _ in longer["loss"]] == [2] and (tmp_path / "checkpoint-2").is_dir()
