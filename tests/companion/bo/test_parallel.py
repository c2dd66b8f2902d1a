"""Batch (q > 1) and asynchronous BO in this process: proposals, bookkeeping, errors and resume."""

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from botorch.acquisition import PosteriorMean
from botorch.exceptions.errors import OptimizationGradientError
from botorch.test_functions import Branin

from hf_ext.companion.bo import (
    BayesianOptimization,
    BayesianOptimizationConfig,
    ClippedGPFactory,
    ThompsonSamplingFactory,
)
from hf_ext.companion.evaluation.bo import FrequencyLimitedAdversary, regret_curves

BRANIN = Branin(negate=True)
FAST = {"num_restarts": 2, "raw_samples": 32, "ts_candidates": 64, "n_initial": 4}


@pytest.mark.parametrize(
    ("model", "acquisition"),
    [
        ("rcgp", "ucb"),
        pytest.param(ClippedGPFactory(), "ucb", id="clipped_gp-ucb"),  # "gp" refuses the infinite corruption
        ("rcgp", "ts"),
        pytest.param(ClippedGPFactory(), "lognei", id="clipped_gp-lognei"),
        ("rcgp", "lognei"),
    ],
)
def test_a_batch_round_proposes_q_distinct_points_and_the_bookkeeping_counts_every_evaluation(model, acquisition):
    adversary = FrequencyLimitedAdversary(13, magnitude=math.inf, direction=1, placement="random", seed=1)
    config = BayesianOptimizationConfig(model=model, acquisition=acquisition, q=3, **FAST)
    loop = BayesianOptimization(BRANIN, BRANIN.bounds, config, adversary=adversary)
    history = loop.run(13)
    assert [e.query for e in history] == list(range(13)) and [e.round for e in history] == list(range(13))
    model_batches = [history[i : i + 3] for i in (4, 7, 10)]  # the Sobol design is 4 (a batch of 3, then 1)
    assert all(len({json.dumps(e.model_factory_state) for e in batch}) == 1 for batch in model_batches)  # one fit
    corrupted = [e.query for e in history if e.corrupted]
    assert corrupted == sorted(adversary._planned) and len(corrupted) == adversary.budget == 1
    regret = regret_curves(torch.tensor([e.true for e in history]), BRANIN.optimal_value, tolerance=1.0)
    assert (regret["simple"] >= 0).all() and (regret["lenient"] <= regret["cumulative"]).all()


def test_a_nan_acquisition_gradient_proposes_the_best_raw_sample_instead_of_stopping(monkeypatch):
    """A GP wrecked by an infinite observation gave NaN gradients on one CPU and not another: the loop crashed."""

    def nan_gradient(*args, **kwargs):
        raise OptimizationGradientError("6 elements of the gradient are NaN", current_x=None)

    monkeypatch.setattr("hf_ext.companion.bo.loop.optimize_acqf", nan_gradient)
    config = BayesianOptimizationConfig(model="gp", acquisition="ucb", q=3, **FAST)
    with pytest.warns(UserWarning, match="gradient is NaN"):
        history = BayesianOptimization(BRANIN, BRANIN.bounds, config).run(7)
    proposed = torch.tensor([e.x for e in history[4:]])
    assert len(history) == 7 and len({tuple(x) for x in proposed.tolist()}) == 3
    assert ((proposed >= BRANIN.bounds[0]) & (proposed <= BRANIN.bounds[1])).all()


def test_an_analytic_acquisition_without_a_batch_form_is_refused_by_name():
    config = BayesianOptimizationConfig(model="gp", acquisition=lambda model, t: PosteriorMean(model), q=2, **FAST)
    with pytest.raises(TypeError, match=r"q = 2 needs a batch acquisition: .* returned PosteriorMean"):
        BayesianOptimization(BRANIN, BRANIN.bounds, config).run(6)


def test_a_thompson_batch_is_q_joint_samples_without_replacement():
    config = BayesianOptimizationConfig(model="gp", acquisition=ThompsonSamplingFactory(), q=4, **FAST)
    history = BayesianOptimization(BRANIN, BRANIN.bounds, config).run(8)
    assert len({tuple(e.x) for e in history[4:]}) == 4


def test_a_batch_run_stopped_mid_batch_resumes_with_the_uninterrupted_runs_queries(tmp_path):
    """The objective raising at query 5 stops the run once the batch's other points are recorded; the point stays
    pending and the resumed run evaluates it, then proposes what the uninterrupted run proposed."""
    config = BayesianOptimizationConfig(model="rcgp", q=3, **FAST)
    whole = BayesianOptimization(BRANIN, BRANIN.bounds, config).run(10)
    calls = []

    def flaky(x):
        calls.append(x)
        if len(calls) == 6:
            raise OSError("simulator crashed")
        return BRANIN(x)

    flaky.dim = 2
    history = tmp_path / "h.jsonl"
    with pytest.raises(RuntimeError, match=r"raised at round 5 .* 6 evaluations so far are in .*h.jsonl"):
        BayesianOptimization(flaky, BRANIN.bounds, config, history_file=history).run(10)
    assert [json.loads(line)["query"] for line in history.read_text().splitlines()] == [0, 1, 2, 3, 4, 6]
    assert [p["query"] for p in json.loads((tmp_path / "h.pending.json").read_text())] == [5]
    resumed = BayesianOptimization(flaky, BRANIN.bounds, config, history_file=history).run(10)
    assert [e.query for e in resumed] == [0, 1, 2, 3, 4, 6, 5, 7, 8, 9]
    torch.testing.assert_close(
        torch.tensor(sorted((e.query, *e.x) for e in resumed)), torch.tensor(sorted((e.query, *e.x) for e in whole))
    )
    assert not (tmp_path / "h.pending.json").exists()


def _slow_branin(x):
    time.sleep(0.05)
    return BRANIN(x)


def test_an_asynchronous_run_keeps_q_in_flight_and_proposes_with_the_others_pending():
    seen = []

    class Recording(BayesianOptimization):
        def suggest(self, count=1, X_pending=None):
            seen.append((self._next_query, count, 0 if X_pending is None else len(X_pending)))
            return super().suggest(count, X_pending)

    config = BayesianOptimizationConfig(model="gp", q=3, asynchronous=True, **FAST)
    with ThreadPoolExecutor(3) as threads:
        history = Recording(_slow_branin, BRANIN.bounds, config, executor=threads).run(10)
    assert len(history) == 10 and sorted(e.query for e in history) == list(range(10))
    assert all(count == 1 for _, count, _ in seen)  # one point at a time
    assert [pending for query, _, pending in seen if query >= 4] == [2] * 6  # the two others still running


def test_the_parallel_settings_are_checked_by_name():
    with pytest.raises(ValueError, match="BayesianOptimizationConfig: `q` must be an integer >= 1, got 0"):
        BayesianOptimizationConfig(q=0)
    with pytest.raises(TypeError, match="`asynchronous` must be True or False, got 'yes'"):
        BayesianOptimizationConfig(asynchronous="yes")
    with pytest.raises(ValueError, match="`retries` must be an integer >= 0, got -1"):
        BayesianOptimization(BRANIN, BRANIN.bounds, retries=-1)
