import json
import math
import re
from dataclasses import replace

import pytest

from hf_ext.companion.bo import BayesianOptimization, BayesianOptimizationConfig
from hf_ext.companion.evaluation.bo import FrequencyLimitedAdversary

UNIT = [[0.0], [1.0]]
SOBOL_ONLY = BayesianOptimizationConfig(n_initial=10)  # no model fit in the first 10 rounds: fast


def _parabola(x):
    return -(x - 0.3).pow(2).sum()


def _loop(path, config=SOBOL_ONLY, adversary=None):
    return BayesianOptimization(_parabola, UNIT, config, adversary=adversary, history_file=path)


def test_settings_are_stored_next_to_the_history(tmp_path):
    _loop(tmp_path / "h.jsonl").run(2)
    stored = json.loads((tmp_path / "h.settings.json").read_text())
    # q and asynchronous at their defaults are left out: sequential histories written before them still resume
    sequential = {name: value for name, value in vars(SOBOL_ONLY).items() if name not in ("q", "asynchronous")}
    assert stored["config"] == json.loads(json.dumps(sequential))
    assert stored["bounds"] == UNIT and stored["objective"] == {"type": "_parabola"}
    assert stored["adversary"] == {"type": "NoCorruption"}
    _loop(tmp_path / "b.jsonl", replace(SOBOL_ONLY, q=2)).run(2)
    assert json.loads((tmp_path / "b.settings.json").read_text())["config"]["q"] == 2


def test_resuming_under_other_settings_is_refused_by_field(tmp_path):
    history = tmp_path / "h.jsonl"
    _loop(history, BayesianOptimizationConfig(n_initial=10, c=2.0)).run(3)
    before = history.read_text()
    message = (
        rf"cannot resume the history {re.escape(str(history))} under other settings .*"
        r"config\.c: stored 2\.0, now 50\.0; "
        r"adversary\.type: stored 'NoCorruption', now 'FrequencyLimitedAdversary'.*"
        rf"start fresh: pass another `history_file`, or delete {re.escape(str(history))} and .*h\.settings\.json"
    )
    with pytest.raises(ValueError, match=message):
        _loop(history, BayesianOptimizationConfig(n_initial=10, c=50.0), FrequencyLimitedAdversary(10)).run(6)
    assert history.read_text() == before
    assert len(_loop(history, BayesianOptimizationConfig(n_initial=10, c=2.0)).run(6)) == 6


def test_a_corrupted_run_is_not_resumed_under_another_horizon(tmp_path):
    _loop(tmp_path / "h.jsonl", adversary=FrequencyLimitedAdversary(24, magnitude=math.inf)).run(2)
    with pytest.raises(ValueError, match="adversary.horizon: stored 24, now 10"):
        _loop(tmp_path / "h.jsonl", adversary=FrequencyLimitedAdversary(10, magnitude=math.inf))


def test_a_history_without_stored_settings_resumes_with_a_warning_and_gets_them(tmp_path):
    _loop(tmp_path / "h.jsonl").run(3)
    (tmp_path / "h.settings.json").unlink()
    with pytest.warns(UserWarning, match=r"h.jsonl has no stored settings .*cannot check"):
        assert len(_loop(tmp_path / "h.jsonl").history) == 3
    assert (tmp_path / "h.settings.json").is_file()


def test_settings_left_by_a_deleted_history_are_replaced(tmp_path):
    _loop(tmp_path / "h.jsonl").run(3)
    (tmp_path / "h.jsonl").unlink()
    assert _loop(tmp_path / "h.jsonl", BayesianOptimizationConfig(n_initial=10, seed=7)).run(2)
    assert json.loads((tmp_path / "h.settings.json").read_text())["config"]["seed"] == 7


def test_a_torn_last_line_is_dropped_with_a_warning_and_cut_from_the_file(tmp_path):
    history = tmp_path / "h.jsonl"
    complete = _loop(history).run(4)
    with history.open("a") as handle:
        handle.write('{"round": 4, "x": [0.1')  # the writer was killed mid-line
    with pytest.warns(UserWarning, match=r"h.jsonl, line 5: dropped a torn last line"):
        resumed = _loop(history)
    assert resumed.history == complete
    assert resumed.run(6)[:4] == complete
    assert [json.loads(line)["round"] for line in history.read_text().splitlines()] == list(range(6))


def test_a_complete_last_line_without_newline_is_kept(tmp_path):
    history = tmp_path / "h.jsonl"
    complete = _loop(history).run(3)
    history.write_text(history.read_text().rstrip("\n"))
    assert _loop(history).run(4)[:3] == complete
    assert len(history.read_text().splitlines()) == 4


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"round": 1, "x": [0.1', r"Expecting"),
        ('{"round": 1, "x": [0.1]}', r"expected a JSON object with keys \['round', 'x', 'observed'"),
        ('{"round": 7, "x": [0.1], "observed": 1.0, "true": 1.0, "corrupted": false}', "holds round 7 where round 1"),
        ('{"round": 1, "x": [0.1, 0.2], "observed": 1.0, "true": 1.0, "corrupted": false}', "list of 1 coordinates"),
    ],
)
def test_a_bad_line_before_the_last_is_an_error_naming_file_and_line(tmp_path, line, problem):
    history = tmp_path / "h.jsonl"
    _loop(history).run(3)
    lines = history.read_text().splitlines()
    history.write_text("\n".join([lines[0], line, *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=rf"h.jsonl, line 2: .*{problem}"):
        _loop(history)


def test_a_history_written_before_model_factory_states_resumes(tmp_path):
    history = tmp_path / "h.jsonl"
    complete = _loop(history).run(3)
    lines = [json.loads(line) for line in history.read_text().splitlines()]
    assert [line.pop("model_factory_state") for line in lines] == [{}, {}, {}]  # RCGP before its first fit
    history.write_text("".join(json.dumps(line) + "\n" for line in lines))
    resumed = _loop(history)
    assert resumed.history == [replace(e, model_factory_state=None) for e in complete]
    assert len(resumed.run(4)) == 4
