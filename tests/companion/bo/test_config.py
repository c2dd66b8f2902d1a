import dataclasses
import math
import warnings

import pytest

from hf_ext.companion.bo import RCGPUCB, BayesianOptimization, BayesianOptimizationConfig

UNIT = [[0.0], [1.0]]


def _parabola(x):
    return -(x - 0.3).pow(2).sum()


def test_every_field_has_help():
    for field in dataclasses.fields(BayesianOptimizationConfig):
        assert field.metadata.get("help"), field.name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "tree"}, r"`model` must be one of \['gp', 'rcgp', 'relevance_pursuit'\], got 'tree'"),
        ({"acquisition": "ei"}, r"`acquisition` must be one of \['ucb', 'ts', 'lognei'\], got 'ei'"),
        ({"c": 0.0}, r"`c` must be a positive number or None \(adaptive\), got 0.0"),
        ({"c": math.inf}, "`c` must be a finite number, got inf"),
        ({"epsilon": 1.0}, r"`epsilon` must be in \(0, 1\), got 1.0"),
        ({"beta_scale": math.nan}, "`beta_scale` must be a finite number, got nan"),
        ({"beta_scale": 0.0}, "`beta_scale` must be > 0, got 0.0"),
        ({"n_initial": 0}, r"`n_initial` must be an integer >= 1 or None \(2 \(d \+ 1\)\), got 0"),
        ({"num_restarts": 0}, "`num_restarts` must be an integer >= 1, got 0"),
    ],
)
def test_bad_settings_are_refused_at_construction_by_name(kwargs, message):
    with pytest.raises(ValueError, match=f"BayesianOptimizationConfig: {message}"):
        BayesianOptimizationConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"raw_samples": 2.5}, r"`raw_samples` must be an integer, got 2.5 \(float\)"),
        ({"ts_candidates": True}, r"`ts_candidates` must be an integer, got True \(bool\)"),
        ({"seed": "0"}, r"`seed` must be an integer, got '0' \(str\)"),
        ({"asynchronous": "yes"}, r"`asynchronous` must be True or False, got 'yes' \(str\)"),
        ({"c": "2"}, r"`c` must be a number or None, got '2' \(str\)"),
        ({"beta_scale": None}, r"`beta_scale` must be a number, got None \(NoneType\)"),
    ],
)
def test_a_setting_of_another_type_is_a_type_error_by_name(kwargs, message):
    """Issue 72: a string in a number's field failed in a comparison naming nothing (``beta_scale=None``), or was
    a ValueError; a wrong type is a TypeError, as for every config (hf_ext._validation.check_finite_fields)."""
    with pytest.raises(TypeError, match=f"BayesianOptimizationConfig: {message}"):
        BayesianOptimizationConfig(**kwargs)


def test_the_loop_takes_only_a_config_as_its_settings():
    with pytest.raises(TypeError, match="`config` must be a BayesianOptimizationConfig, got str"):
        BayesianOptimization(_parabola, UNIT, "rcgp")
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['iterations'\]"):
        BayesianOptimization(_parabola, UNIT, iterations=3)
    with pytest.raises(TypeError, match=r"pass the settings in `config` only, not also as \['seed'\]"):
        BayesianOptimization(_parabola, UNIT, BayesianOptimizationConfig(), seed=1)


def test_the_old_keyword_arguments_still_work_with_a_warning_naming_the_config(tmp_path):
    settings = {"model": "gp", "acquisition": "ts", "n_initial": 3, "seed": 4, "ts_candidates": 32}
    with pytest.warns(FutureWarning, match=r"pass config=BayesianOptimizationConfig\(model='gp', .*seed=4"):
        old_style = BayesianOptimization(_parabola, UNIT, history_file=tmp_path / "old.jsonl", **settings)
    config = BayesianOptimizationConfig(**settings)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        new_style = BayesianOptimization(_parabola, UNIT, config, history_file=tmp_path / "new.jsonl")
    assert old_style.config == new_style.config
    assert old_style.run(5) == new_style.run(5)


def test_rcgp_ucb_variants_set_the_threshold():
    assert RCGPUCB(_parabola, UNIT).config == BayesianOptimizationConfig(model="rcgp", acquisition="ucb", c=2.0)
    assert RCGPUCB(_parabola, UNIT, "adaptive", BayesianOptimizationConfig(c=5.0, seed=3)).config.c is None
    assert RCGPUCB(_parabola, UNIT, "stable", BayesianOptimizationConfig(c=5.0)).config.c == 5.0
    with pytest.warns(FutureWarning, match=r"RCGPUCB\(c=3.0\) is deprecated"):
        assert RCGPUCB(_parabola, UNIT, c=3.0).config.c == 3.0
    with pytest.raises(ValueError, match=r"`variant` must be one of \['stable', 'adaptive'\], got 'robust'"):
        RCGPUCB(_parabola, UNIT, "robust")
    with pytest.raises(ValueError, match="`config.model` must be 'rcgp' and `config.acquisition` 'ucb', got 'gp'"):
        RCGPUCB(_parabola, UNIT, config=BayesianOptimizationConfig(model="gp"))
    with pytest.raises(ValueError, match="variant='stable' needs a fixed threshold `config.c`"):
        RCGPUCB(_parabola, UNIT, config=BayesianOptimizationConfig(c=None))
