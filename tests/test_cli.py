import sys

import pytest

from hf_ext import cli


def test_env_reports_versions_and_kernel_backend(capsys):
    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out
    for key in ("python", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "triton"):
        assert any(line.split()[0] == key for line in out.splitlines()), key
    assert "cuda available" in out and "triton kernels" in out


def test_list_shows_recipes_with_descriptions(capsys):
    assert cli.main(["list"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("sft_arithmetic"))
    assert "fine-tuning" in line


def test_run_builds_an_accelerate_launch_command_with_the_default_config():
    command = cli.launch_command("sft_arithmetic", None, ["model=tiny", "learning_rate=1e-4"], "cpu")
    assert command[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert command[command.index("--config_file") + 1].endswith("accelerate/cpu.yaml")
    assert command[command.index("--config") + 1].endswith("configs/sft_arithmetic.yaml")
    assert command[-4:] == ["--model", "tiny", "--learning_rate", "1e-4"]


def test_a_value_with_spaces_sets_a_list_field():
    assert cli.overrides_to_flags(["weight_decays=0.0 1.0", "seed=1"]) == [
        "--weight_decays",
        "0.0",
        "1.0",
        "--seed",
        "1",
    ]


def test_config_may_name_a_shipped_config():
    command = cli.launch_command("dpo_regularized", "simpo_regularized", [], None)
    assert command[command.index("--config") + 1].endswith("configs/simpo_regularized.yaml")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "no_such_recipe"],
            "unknown recipe 'no_such_recipe'; available: ['agzo_finetune', 'binarize_progressive'",
        ),
        (["run", "sft_arithmetic", "oops"], "overrides must look like key=value, got 'oops'"),
        (["run", "sft_arithmetic", "--config", "missing.yaml"], "--config: no such file or shipped config"),
        (["run", "sft_arithmetic", "--accelerate-config", "tpu"], "one of ['cpu', 'cpu_2proc']"),
    ],
)
def test_run_rejects_bad_input_with_a_clear_message(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err
