import pytest

from hf_ext import cli
from hf_ext.recipes import available_recipes, recipe_parser, recipe_script


@pytest.mark.parametrize("name", sorted(available_recipes()))
def test_no_recipe_parser_completes_a_prefix_to_a_setting(name):
    """argparse's prefix matching gave `k=3` to portfolio's `ks` and `problem=` to cam's `problems`, silently."""
    assert recipe_parser(name).allow_abbrev is False


def test_a_prefix_of_a_setting_is_an_unknown_setting(monkeypatch, capsys):
    monkeypatch.setattr(cli.subprocess, "call", lambda command: pytest.fail(f"launched {command}"))
    assert cli.main(["run", "portfolio", "k=3"]) == 2
    assert "unknown setting 'k'" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(available_recipes()))
def test_a_quick_check_is_a_shipped_config_never_a_setting(name):
    """Issue 38: rep3d's `quick=true` replaced sizes after parsing, so `quick=true size=8` silently ran 16."""
    settings = {field for kind in recipe_parser(name).dataclass_types for field in kind.__dataclass_fields__}
    assert "quick" not in settings


def test_hf_ext_run_refuses_settings_that_contradict_each_other_before_launching(monkeypatch, capsys):
    """Issue 74: dpo_regularized ran its 'regularized' variant at regularizer_coef 0, the vanilla run again."""
    monkeypatch.setattr(cli.subprocess, "call", lambda command: pytest.fail(f"launched {command}"))
    assert cli.main(["run", "dpo_regularized", "regularizer_coef=0"]) == 2
    assert "`regularizer_coef` must be > 0 for the 'regularized' variant" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(available_recipes()))
def test_every_recipe_ends_the_same_way(name):
    """Issue 74: five recipes ended with `main()`, so a refused setting or resume was a traceback there."""
    assert recipe_script(name).read_text().rstrip().splitlines()[-2:] == [
        'if __name__ == "__main__":',
        "    run_as_script(main)",
    ]
