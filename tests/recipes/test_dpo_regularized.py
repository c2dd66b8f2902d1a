import json

import pytest

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.dpo_regularized import main, parse_args

TINY_RUN = ["--model", "tiny", "--num_train", "8", "--num_eval", "4", "--max_steps", "2", "--logging_steps", "1"]


def _config(algorithm):
    return str(recipes_dir() / "configs" / f"{algorithm}_regularized.yaml")


@pytest.mark.parametrize("algorithm", ["dpo", "simpo"])
def test_recipe_compares_vanilla_and_regularized_and_writes_its_reports(tmp_path, algorithm):
    results = main(["--config", _config(algorithm), *TINY_RUN, "--output_dir", str(tmp_path)])
    assert results["vanilla"]["regularizer_coef"] == 0.0 and results["regularized"]["regularizer_coef"] == 1.0
    for result in results.values():
        assert result["steps"] == 2
        assert 0 <= result["held_out_after"]["reward_accuracy"] <= 1
        displacement = result["held_out_displacement"]
        change = displacement["chosen_mean_logp_after"] - displacement["chosen_mean_logp_before"]
        assert displacement["chosen_mean_logp_change"] == pytest.approx(change)
        assert len(result["train_mean_logps_chosen"]) == 2
    assert json.loads((tmp_path / "results.json").read_text())["vanilla"]["steps"] == 2
    shift = json.loads((tmp_path / "token_shift.json").read_text())
    assert set(shift) == {"vanilla", "regularized"} and 0 < shift["vanilla"]["chosen"]["top_5pct_share"] <= 1
    for plot in ("token_shift.png", "logps.png"):
        assert (tmp_path / plot).stat().st_size > 1000


def test_yaml_config_selects_the_algorithms_trl_config(tmp_path):
    from hf_ext.alignment import RegularizedDPOConfig, RegularizedSimPOConfig

    _, dpo = parse_args(["--config", _config("dpo"), "--output_dir", str(tmp_path)])
    recipe, simpo = parse_args(["--config", _config("simpo"), "--regularizer_form", "two_sided"])
    assert type(dpo) is RegularizedDPOConfig and (dpo.learning_rate, dpo.max_steps) == (3e-5, 60)
    assert type(simpo) is RegularizedSimPOConfig and recipe.algorithm == "simpo"
    assert (simpo.beta, simpo.simpo_gamma, simpo.regularizer_form) == (2.0, 0.5, "two_sided")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--algorithm", "ipo"], r"`algorithm` must be one of \['dpo', 'simpo'\]"),
        (["--variants", "vanilla", "other"], r"`variants` must be a non-empty subset"),
        (["--regularizer_coef", "-1"], r"`regularizer_coef` must be >= 0"),
        (["--regularizer_form", "l1"], r"`regularizer_form` must be one of"),
        (["--num_train", "0"], r"PreferenceRecipeArguments: `num_train` must be an integer >= 1, got 0"),
        (["--num_eval", "-4"], r"PreferenceRecipeArguments: `num_eval` must be an integer >= 1, got -4"),
    ],
)
def test_bad_arguments_name_the_field(flags, message):
    with pytest.raises(ValueError, match=message):
        parse_args(["--config", _config("dpo"), *flags])


@pytest.mark.parametrize("algorithm", ["dpo", "simpo"])
def test_a_regularized_variant_without_a_regularizer_is_refused_not_run_as_the_vanilla_one(algorithm):
    """Issue 74: the vanilla run's coefficient is 0 by definition; the regularized one's is the user's, never 0."""
    zero = ["--config", _config(algorithm), "--regularizer_coef", "0"]
    with pytest.raises(ValueError, match=r"Config: `regularizer_coef` must be > 0 for the 'regularized' variant"):
        parse_args(zero)
    recipe_args, config = parse_args([*zero, "--variants", "vanilla"])  # no regularized run: nothing contradicts
    assert recipe_args.variants == ["vanilla"] and config.regularizer_coef == 0


@pytest.mark.slow
def test_cli_runs_dpo_with_the_regularizer_on_two_cpu_processes(tmp_path, run_on_two_processes):
    overrides = ["model=tiny", "num_train=8", "num_eval=4", "max_steps=2", "variants=regularized"]
    stdout = run_on_two_processes("dpo_regularized", overrides)
    assert stdout.count("dpo regularized: held-out chosen mean log-prob") == 1
    assert json.loads((tmp_path / "results.json").read_text())["regularized"]["steps"] == 2


@pytest.mark.slow
def test_cli_runs_dpo_sharded_on_two_cpu_processes_as_one_process_does(tmp_path, run_on_two_processes):
    settings = ["model=tiny", "num_train=8", "num_eval=4", "max_steps=2", "logging_steps=1"]
    run_on_two_processes("dpo_regularized", [*settings, "per_device_train_batch_size=2"], "fsdp2_cpu_2proc")
    sharded = json.loads((tmp_path / "results.json").read_text())
    one = main(["--config", _config("dpo"), *TINY_RUN, "--output_dir", str(tmp_path / "one")])
    for variant in ("vanilla", "regularized"):
        for key in ("loss", "train_mean_logps_chosen"):
            assert [v for _, v in sharded[variant][key]] == pytest.approx([v for _, v in one[variant][key]], rel=1e-6)
        for key in ("held_out_after", "held_out_displacement"):
            assert sharded[variant][key] == pytest.approx(one[variant][key], rel=1e-5, abs=1e-7), key
