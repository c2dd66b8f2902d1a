import json

import pytest

from hf_ext.companion.combinatorial.set_cover import DenoiserTrainingConfig, load_denoiser
from hf_ext.recipes import recipes_dir, shipped_config
from hf_ext.recipes.set_cover_denoiser import SetCoverDenoiserArguments, main, parser


def test_quick_run_saves_a_loadable_checkpoint_with_its_loss_curve(tmp_path):
    results = main(["--config", str(shipped_config("set_cover_denoiser_quick")), "--output_dir", str(tmp_path)])
    assert len(results["loss_per_epoch"]) == 3
    assert json.loads((tmp_path / "results.json").read_text())["loss_per_epoch"] == results["loss_per_epoch"]
    assert (tmp_path / "training_loss.png").stat().st_size > 1000
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["training"]["examples"] == 4 and load_denoiser(tmp_path).hidden == 32


def test_shipped_config_is_the_cached_default():
    config = str(recipes_dir() / "configs" / "set_cover_denoiser.yaml")
    (args,) = parser().parse_args_and_config(["--config", config])
    assert isinstance(args, SetCoverDenoiserArguments)
    assert args.training() == DenoiserTrainingConfig()


def test_a_setting_given_with_the_quick_config_is_kept():
    flags = ["--config", str(shipped_config("set_cover_denoiser_quick")), "--epochs", "5"]
    (args,) = parser().parse_args_and_config(flags)
    assert (args.training().epochs, args.training().examples) == (5, 4)


@pytest.mark.slow
def test_two_processes_train_once(run_on_two_processes):
    out = run_on_two_processes("set_cover_denoiser", ["--config", "set_cover_denoiser_quick"])
    assert out.count("final loss") == 1
