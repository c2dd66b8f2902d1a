import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hf_ext import cli
from hf_ext.recipes import available_recipes, recipe_parser, recipe_script, shipped_configs


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A help page cached by an earlier run would let the help tests pass without building it."""
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path / "cache"))


def test_env_reports_versions_and_kernel_backend(capsys):
    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out
    for key in ("python", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "triton"):
        assert any(line.split()[0] == key for line in out.splitlines()), key
    assert "cuda available" in out and "triton kernels" in out
    line = next(line for line in out.splitlines() if line.startswith("cuda available"))
    assert line.split()[-1] == str(torch.cuda.is_available())


def test_env_imports_no_torch_where_torch_finds_no_gpu():
    """`hf-ext env` took 12 s, importing torch and torch._dynamo to learn that a CPU build of torch has no GPU."""
    if not cli._torch_finds_no_gpu():
        pytest.skip("torch may find a GPU here: env asks it")
    code = "import sys; from hf_ext import cli; cli.main(['env']); print({'torch', 'transformers'} & set(sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "cuda available   False" in result.stdout and result.stdout.splitlines()[-1] == "set()"


def test_torch_build_reads_torch_version_as_torch_does():
    build = cli._torch_build()
    assert build["__version__"] == torch.__version__
    assert (build["cuda"], build["hip"]) == (torch.version.cuda, torch.version.hip)


def _no_driver(name):
    raise OSError(f"{name}: cannot open shared object file")


@pytest.mark.parametrize(
    ("build", "load_driver", "finds_no_gpu"),
    [
        ({"cuda": None, "hip": None}, None, True),  # a CPU build
        ({"cuda": "12.8", "hip": None}, _no_driver, True),  # a CUDA build without the NVIDIA driver
        ({"cuda": "12.8", "hip": None}, lambda name: None, False),  # with it: torch is asked
        ({"cuda": None, "hip": "6.4"}, None, False),  # ROCm: torch is asked
        ({}, None, False),  # torch/version.py not as expected: torch is asked
    ],
)
def test_torch_finds_no_gpu_only_where_certain(monkeypatch, build, load_driver, finds_no_gpu):
    monkeypatch.setattr(cli, "_torch_build", lambda: build)
    monkeypatch.setattr(cli.sys, "platform", "linux")
    if load_driver is not None:
        monkeypatch.setattr(cli.ctypes, "CDLL", load_driver)
    assert cli._torch_finds_no_gpu() is finds_no_gpu


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


def test_a_cpu_run_gets_accelerates_thread_count_without_its_warning(monkeypatch):
    """CI's stderr began with accelerate's warning about ``--num_cpu_threads_per_process`` when OMP_NUM_THREADS was
    unset, before a refused resume's one line."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    command = cli.launch_command("sft_arithmetic", None, [], "cpu")
    assert int(command[command.index("--num_cpu_threads_per_process") + 1]) >= 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert "--num_cpu_threads_per_process" not in cli.launch_command("sft_arithmetic", None, [], "cpu")


def test_two_cpu_processes_are_started_by_torchrun():
    command = cli.launch_command("sft_arithmetic", None, ["model=tiny"], "cpu_2proc")
    torchrun = [sys.executable, "-m", "hf_ext._torchrun", "--nproc_per_node=2"]
    assert command[:6] == ["env", "ACCELERATE_USE_CPU=true", *torchrun]


def test_fsdp_on_two_cpu_processes_starts_torchrun_with_the_fsdp_settings_through_hf_ext_distributed():
    command = cli.launch_command("sft_arithmetic", None, ["model=tiny"], "fsdp2_cpu_2proc")
    start = command.index(sys.executable)
    assert command[0] == "env" and {"ACCELERATE_USE_FSDP=true", "FSDP_VERSION=2", "ACCELERATE_USE_CPU=true"} <= set(
        command[1:start]
    )
    torchrun = [sys.executable, "-m", "hf_ext._torchrun", "--nproc_per_node=2", "--master_port=29519"]
    assert command[start : start + 7] == [*torchrun, "-m", "hf_ext.distributed"]
    assert command[start + 7] == str(recipe_script("sft_arithmetic"))


def test_fsdp_on_gpus_is_accelerate_launch_with_the_shipped_config():
    command = cli.launch_command("sft_arithmetic", None, [], "fsdp2_gpu")
    assert command[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert command[command.index("--config_file") + 1].endswith("accelerate/fsdp2_gpu.yaml")


@pytest.mark.slow
def test_the_two_process_launch_really_starts_two_ranks(tmp_path):
    """accelerate 1.15 launched the cpu_2proc config as one process: the two-process recipe tests ran on one."""
    script = tmp_path / "ranks.py"
    script.write_text(  # as the recipes do: TrainingArguments set up the processes, then PartialState reads them
        "from accelerate import PartialState\n"
        "from transformers import TrainingArguments\n"
        "TrainingArguments(output_dir='out', report_to='none')\n"
        "state = PartialState()\n"
        "print(f'rank {state.process_index} of {state.num_processes}', flush=True)\n"
    )
    command = cli.launch_command("sft_arithmetic", None, [], "cpu_2proc")
    launcher = command[: command.index(str(recipe_script("sft_arithmetic")))]
    result = subprocess.run([*launcher, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    # the two ranks share one pipe: print's text and its newline are separate writes that may interleave
    assert sorted(re.findall(r"rank \d+ of \d+", result.stdout)) == ["rank 0 of 2", "rank 1 of 2"]


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
        (["run", "sft_arithmetic", "--accelerate-config", "tpu"], "one of ['cpu', 'cpu_2proc', 'fsdp2_cpu_2proc'"),
    ],
)
def test_run_rejects_bad_input_with_a_clear_message(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_list_reads_recipes_without_importing_the_training_stack():
    code = "import sys; from hf_ext import cli; cli.main(['list']); assert not {'torch', 'trl'} & set(sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def launches(monkeypatch):
    """The commands `hf-ext run` launched (none are started)."""
    launched = []
    monkeypatch.setattr(cli.subprocess, "call", lambda command: launched.append(command) or 0)
    return launched


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["max_stepz=3"], "unknown setting 'max_stepz'; close matches: max_steps"),
        (["nosuch_key=3"], "unknown setting 'nosuch_key'; see `hf-ext run agzo_finetune --help`"),
        (["max_steps=abc"], "invalid int value: 'abc'"),
        (["methods=sgd"], "`methods` must be a non-empty subset of ['agzo', 'mezo'], got ['sgd']"),
        (["seed=1 2"], "unexpected values ['2']"),
    ],
)
def test_bad_settings_are_one_line_before_anything_launches(overrides, message, launches, capsys):
    assert cli.main(["run", "agzo_finetune", *overrides]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hf-ext run agzo_finetune: ") and message in err
    assert err.count("\n") == 1 and launches == []


def test_an_unknown_key_in_a_config_file_is_caught_too(tmp_path, launches, capsys):
    config = tmp_path / "mine.yaml"
    config.write_text("max_steps: 2\nagzo_learnig_rate: 1.0e-3\n")
    assert cli.main(["run", "agzo_finetune", "--config", str(config)]) == 2
    assert "unknown setting 'agzo_learnig_rate'; close matches: agzo_learning_rate" in capsys.readouterr().err
    assert launches == []


def test_settings_of_every_dataclass_launch(launches):
    overrides = ["agzo_learning_rate=1e-4", "rank=4", "max_steps=2"]
    assert cli.main(["run", "agzo_finetune", *overrides]) == 0
    (command,) = launches
    assert command[-6:] == ["--agzo_learning_rate", "1e-4", "--rank", "4", "--max_steps", "2"]


def test_run_help_without_a_recipe_is_the_generic_help(launches, capsys):
    assert cli.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hf-ext run RECIPE") and "--accelerate-config" in out and launches == []


def test_recipe_help_lists_its_settings_with_the_config_values_marked(tmp_path, launches, capsys):
    config = tmp_path / "mine.yaml"
    config.write_text("max_steps: 7\n")
    assert cli.main(["run", "agzo_finetune", "--config", str(config), "-h"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].startswith("AGZO vs MeZO: zeroth-order fine-tuning of MiniLM")
    assert "AGZOFinetuneArguments:\n  methods: list[str] = ['agzo', 'mezo']\n      Any of ['agzo', 'mezo']." in out
    assert "\n  max_steps: int = 7 (set by mine.yaml; default -1)\n" in out
    assert "\nAGZOFinetuneZOConfig:\n" in out and "\n  rank: int = 8\n      Subspace rank r per layer" in out
    assert launches == []


@pytest.mark.parametrize("recipe", sorted(available_recipes()))
def test_every_recipe_has_a_help(recipe, capsys):
    assert cli.main(["run", recipe, "--help"]) == 0
    out = capsys.readouterr().out
    for dataclass_type in recipe_parser(recipe, cli.recipe_argv(recipe, None, [])).dataclass_types:
        assert f"\n{dataclass_type.__name__}:\n  " in out


def test_a_help_page_asked_again_comes_from_the_cache_without_importing_the_recipe(monkeypatch, capsys):
    """Issue 37: each `hf-ext run NAME --help` took 5-55 s, importing the recipe and torch."""
    assert cli.main(["run", "cam", "--help"]) == 0
    first = capsys.readouterr().out

    def no_import(*args):
        raise AssertionError("the recipe was imported for a cached help page")

    monkeypatch.setattr(cli, "recipe_parser", no_import)
    assert cli.main(["run", "cam", "--help"]) == 0
    assert capsys.readouterr().out == first
    with pytest.raises(AssertionError, match="imported"):  # other settings are another page
        cli.main(["run", "cam", "--help", "num_nodes=50"])


def test_help_follows_the_config_that_picks_the_trl_config_class(capsys):
    assert cli.main(["run", "dpo_regularized", "--config", "simpo_regularized", "--help"]) == 0
    assert "\nRegularizedSimPOConfig:\n" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("recipe", "config"),
    [(recipe, None) for recipe in sorted(set(available_recipes()) & set(shipped_configs()))]
    + [("dpo_regularized", "simpo_regularized")]
    + [(name.removesuffix("_quick"), name) for name in shipped_configs() if name.endswith("_quick")],
)
def test_every_shipped_config_passes_the_settings_check(recipe, config):
    cli.check_settings(recipe, cli.recipe_argv(recipe, config, []))


def test_a_missing_required_setting_is_one_line(launches, capsys):
    assert cli.main(["run", "token_shift"]) == 2
    assert capsys.readouterr().err == "hf-ext run token_shift: the following arguments are required: --policy\n"


def test_the_recipes_page_has_a_row_and_a_section_for_every_recipe():
    """Issue 37: docs/recipes.md covered 10 of the 20 recipes."""
    page = (Path(__file__).parents[1] / "docs" / "recipes.md").read_text()
    headings = {name for line in page.splitlines() if line.startswith("## ") for name in re.findall(r"`(\w+)`", line)}
    rows = {name for line in page.splitlines() if line.startswith("| `") for name in re.findall(r"`(\w+)`", line[:60])}
    assert set(available_recipes()) - headings == set()
    assert set(available_recipes()) - rows == set()


@pytest.mark.parametrize(
    "argv",
    [
        ["bo_robust", "rounds=4", "rounds=5", "setting 'rounds' is given twice (rounds=4, rounds=5): give it once"],
        ["bo_robust", "workers=0", "BORobustArguments: `workers` must be an integer >= 1, got 0"],
        ["bo_robust", "exponent=-1", "`exponent` must be in (0, 1), got -1.0"],
        ["sft_arithmetic", "num_train=0", "SFTArithmeticArguments: `num_train` must be an integer >= 1, got 0"],
        ["sft_arithmetic", "max_steps=-5", "TrainingArguments: `max_steps` must be a number of steps >= 1, or -1"],
    ],
)
def test_settings_once_taken_or_refused_in_a_traceback_are_one_line_before_anything_launches(argv, launches, capsys):
    """Issue 72: the last of two `rounds` won, `max_steps=-5` trained a whole epoch, `workers=0` was a traceback from
    the executor and `num_train=0` named `num_examples`, a field the recipe does not have."""
    *settings, message = argv
    assert cli.main(["run", *settings]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hf-ext run {settings[0]}: ") and message in err
    assert err.count("\n") == 1 and launches == []


def _unwritable_output_dir(tmp_path: Path) -> str:
    (tmp_path / "a_file").write_text("")
    return str(tmp_path / "a_file" / "out")


def _read_only_output_dir(tmp_path: Path) -> str:
    (tmp_path / "read_only").mkdir(mode=0o555)
    return str(tmp_path / "read_only" / "out")


@pytest.mark.parametrize(
    ("write_files", "message"),
    [
        (lambda tmp: ["--config", _write(tmp / "bad.yaml", "a: [1\n")], "bad.yaml: not valid YAML (while parsing"),
        (lambda tmp: ["--config", _write(tmp / "list.yaml", "- 1\n")], "must hold `key: value` settings, got a list"),
        (
            lambda tmp: ["--accelerate-config", _write(tmp / "accelerate.yaml", "distributed_type: BOGUS\n")],
            "accelerate.yaml: `distributed_type` must be one of ['NO', 'MULTI_CPU'",
        ),
        (  # the launcher read it with int(), whose message named no setting
            lambda tmp: ["--accelerate-config", _write(tmp / "accelerate.yaml", "num_processes: zero\n")],
            "accelerate.yaml: `num_processes` must be an integer >= 1, got 'zero'",
        ),
        (
            lambda tmp: ["--accelerate-config", _write(tmp / "accelerate.yaml", "num_processes: 0\n")],
            "accelerate.yaml: `num_processes` must be an integer >= 1, got 0",
        ),
        (lambda tmp: [f"output_dir={_unwritable_output_dir(tmp)}"], "a_file is not a writable folder"),
        pytest.param(  # writable by its permission bits, even for root; the run failed at its end, in a traceback
            lambda tmp: ["output_dir=/proc/hf_ext_test_out"],
            "/proc is not a writable folder",
            marks=pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc"),
        ),
        pytest.param(
            lambda tmp: [f"output_dir={_read_only_output_dir(tmp)}"],
            "read_only is not a writable folder",
            marks=pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder"),
        ),
    ],
)
def test_files_that_would_fail_the_run_are_one_line_naming_them(tmp_path, write_files, message, launches, capsys):
    """Issue 72: a bad `--config` was a yaml traceback through cli.py, a bad accelerate config 37 lines of accelerate,
    and an output_dir that cannot be written a raw PermissionError once the run was done."""
    assert cli.main(["run", "sft_arithmetic", "model=tiny", *write_files(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hf-ext run sft_arithmetic: ") and message in err
    assert err.count("\n") == 1 and launches == []


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_an_unknown_setting_is_refused_from_the_cached_list_without_importing_the_recipe(monkeypatch, launches, capsys):
    """Issue 72: `hf-ext run sft_arithmetic max_step=5` was refused well, but after 8 s (82 s on a loaded machine)
    of importing the recipe, every time. The list follows a setting that picks the parser's dataclasses:
    dpo_regularized's `algorithm=simpo` makes SimPO's `simpo_gamma` a setting."""
    assert cli.main(["run", "sft_arithmetic", "max_step=5"]) == 2  # the first time builds the list
    first = capsys.readouterr().err
    assert cli.main(["run", "dpo_regularized", "model=tiny", "algorithm=simpo", "simpo_gamma=0.3"]) == 0
    assert launches[-1][-2:] == ["--simpo_gamma", "0.3"]

    def no_import(*args):
        raise AssertionError("the recipe was imported to check the keys")

    monkeypatch.setattr(cli, "load_recipe", no_import)
    monkeypatch.setattr(cli, "recipe_parser", no_import)
    assert cli.main(["run", "sft_arithmetic", "max_step=5"]) == 2
    assert capsys.readouterr().err == first == (
        "hf-ext run sft_arithmetic: unknown setting 'max_step'; close matches: max_steps, save_steps, eval_steps\n"
    )
