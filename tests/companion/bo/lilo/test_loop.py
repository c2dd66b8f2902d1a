import json

import numpy as np
import pytest
import torch

from hf_ext.companion.bo import RCGPFactory, UCBFactory
from hf_ext.companion.bo.lilo import (
    LILO,
    LILOConfig,
    LLMAnswerError,
    OpenAIBackend,
    ScriptedBackend,
    make_environment,
)
from hf_ext.companion.bo.lilo.loop import implied_labels

CONFIG = LILOConfig(n_initial=4, batch_size=2, rounds=2, pairs_per_round=2, samples=2, num_restarts=1, raw_samples=16)
ANSWERS = ["What matters most to you?", '{"choice": "A", "reason": "closer"}', 'Sure: {"choice": "A"}']


@pytest.fixture(scope="module")
def dtlz2():
    return make_environment("dtlz2")


def test_lilo_runs_asks_labels_and_writes_an_auditable_transcript(tmp_path, dtlz2):
    backend = ScriptedBackend(ANSWERS)
    loop = LILO(dtlz2, backend, CONFIG, transcript_file=tmp_path / "t.jsonl")
    results = loop.run()
    assert [r.evaluations for r in results] == [4, 6, 8]
    assert all(0 <= r.correct_labels <= r.labels for r in results) and results[-1].labels == 4
    best = [r.best_utility for r in results]
    assert best == sorted(best) and best[-1] <= dtlz2.best_utility
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds.count("answer") == 2 and kinds.count("label") == 4 and kinds.count("evaluation") == 8
    # rounds x (question + pairs x samples + one retry: the cycle hands one label call the question's text)
    assert kinds.count("llm") == len(backend.calls) == 2 * (1 + 2 * 2 + 1)
    answer = next(r for r in records if r["kind"] == "answer")
    assert answer["question"] == ANSWERS[0] and "option" in answer["answer"]
    assert "The decision maker said:" in backend.calls[1][1]["content"]  # the labels see the conversation
    assert backend.calls[1][-1] == {"role": "assistant", "content": '{"choice": "'}  # prefilled JSON


def test_a_killed_run_resumes_from_its_transcript_without_repeating_an_llm_call(tmp_path, dtlz2):
    path = tmp_path / "t.jsonl"
    full = LILO(dtlz2, ScriptedBackend(ANSWERS), CONFIG, transcript_file=path).run()
    lines = path.read_text().splitlines()
    last_llm = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "llm")
    path.write_text("\n".join(lines[: last_llm + 1]) + "\n" + lines[last_llm + 1][:10])  # killed mid-write
    backend = ScriptedBackend(ANSWERS)  # the same settings, as a resume requires
    with pytest.warns(UserWarning, match="dropped a torn last line"):
        resumed = LILO(dtlz2, backend, CONFIG, transcript_file=path)
    assert resumed.run() == full
    assert backend.calls == [] and resumed.transcript.llm_calls == 0
    assert len(path.read_text().splitlines()) == len(lines)  # every record once


def test_a_resume_under_other_settings_is_refused_naming_them(tmp_path, dtlz2):
    LILO(dtlz2, ScriptedBackend(ANSWERS), CONFIG, transcript_file=tmp_path / "t.jsonl").transcript.record("e", "x")
    other = LILOConfig(**{**CONFIG.__dict__, "samples": 1})
    with pytest.raises(ValueError, match=r"config.samples: stored 2, now 1"):
        LILO(dtlz2, ScriptedBackend(ANSWERS), other, transcript_file=tmp_path / "t.jsonl")


def test_a_resume_with_other_factories_is_refused_naming_them(tmp_path, dtlz2):
    path = tmp_path / "t.jsonl"
    LILO(dtlz2, None, CONFIG, method="preferential", transcript_file=path).transcript.record("e", "x")
    with pytest.raises(ValueError, match=r"model_factory.type: stored 'SingleTaskGPFactory', now 'RCGPFactory'"):
        LILO(dtlz2, None, CONFIG, method="preferential", transcript_file=path, model_factory=RCGPFactory())
    with pytest.raises(ValueError, match=r"acquisition_factory.type: stored 'LogNEIFactory', now 'UCBFactory'"):
        LILO(dtlz2, None, CONFIG, method="preferential", transcript_file=path, acquisition_factory=UCBFactory(4))


def test_a_run_makes_the_same_points_whatever_the_global_generators_hold(dtlz2):
    """Issue 37: PairwiseGP starts its solver from np.random, so three processes gave three round-1 batches."""
    points = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed), np.random.seed(global_seed)
        loop = LILO(dtlz2, None, CONFIG, method="preferential")
        loop.run()
        points.append([record["x"] for record in loop.transcript.of_kind("evaluation")])
    assert points[0] == points[1]


def test_a_transcript_holding_points_this_run_does_not_make_is_refused(tmp_path, dtlz2):
    path = tmp_path / "t.jsonl"
    LILO(dtlz2, None, CONFIG, method="random", transcript_file=path).run()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    next(r for r in records if r["key"] == "evaluation:5")["x"][0] = 0.5
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    with pytest.raises(
        ValueError,
        match=r"t.jsonl: the replayed run evaluates x = \[.*\] where the transcript holds "
        r"x = \[0.5, .*\] \(evaluation 5, round 1\)",
    ):
        LILO(dtlz2, None, CONFIG, method="random", transcript_file=path).run()


def test_a_resume_may_change_how_answers_are_fetched_but_not_which(tmp_path, dtlz2):
    path = tmp_path / "t.jsonl"
    LILO(dtlz2, OpenAIBackend(timeout=60.0, retries=2), CONFIG, transcript_file=path).transcript.record("e", "x")
    LILO(dtlz2, OpenAIBackend(timeout=900.0, retries=5, backoff=3.0), CONFIG, transcript_file=path)
    with pytest.raises(ValueError, match=r"backend.prefill: stored 'response_format', now 'continue'"):
        LILO(dtlz2, OpenAIBackend(prefill="continue"), CONFIG, transcript_file=path)


def test_an_llm_that_never_answers_json_fails_clearly_and_keeps_its_state(tmp_path, dtlz2):
    backend = ScriptedBackend(["I think the first one is nicer."])
    loop = LILO(dtlz2, backend, CONFIG, transcript_file=tmp_path / "t.jsonl")
    with pytest.raises(LLMAnswerError, match=r"round 1: .*valid JSON for 0 of 2 pairs after 2 tries each .*t.jsonl"):
        loop.run()
    kept = [json.loads(line)["kind"] for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert kept.count("llm") == 1 + 2 * 2 * 2  # the question, then pairs x samples x tries, all kept


def test_the_scalar_variant_scores_every_outcome(dtlz2):
    backend = ScriptedBackend(["Why?", '{"probability": 0.7, "reason": "ok"}', '{"probability": "80"}'])
    config = LILOConfig(**{**CONFIG.__dict__, "feedback": "scalar", "samples": 1})
    loop = LILO(dtlz2, backend, config)
    results = loop.run()
    assert [r.evaluations for r in results] == [4, 6, 8]
    scores, evaluations = loop.transcript.of_kind("score"), loop.transcript.of_kind("evaluation")
    assert [r["outcome"] for r in scores] == [*range(4), *range(6)]  # every outcome observed, each round
    truth = dtlz2.true_utility(torch.tensor([e["x"] for e in evaluations], dtype=torch.float64))
    assert [r["utility"] for r in scores] == [truth[r["outcome"]].item() for r in scores]
    assert results[-1].labels == len(implied_labels(scores)) > 0


def test_scores_of_one_round_imply_a_label_per_pair_they_order():
    scores = [
        {"round": 1, "samples": [0.9], "utility": 0.5},
        {"round": 1, "samples": [0.2, 0.4], "utility": 0.1},  # below the first in score and utility: right
        {"round": 1, "samples": [0.9], "utility": 0.7},  # scored as the first: no label; above the second: right
        {"round": 1, "samples": [], "utility": 0.0},  # no valid sample: no score, no label
        {"round": 2, "samples": [0.1], "utility": 0.9},  # compared within its own round only
        {"round": 2, "samples": [0.6], "utility": 0.2},  # scored above an outcome of higher utility: wrong
    ]
    assert sorted(implied_labels(scores)) == [False, True, True]


@pytest.mark.parametrize("method", ["preferential", "true_utility", "random"])
def test_baselines_run_in_the_same_harness_without_an_llm(method, dtlz2):
    results = LILO(dtlz2, None, CONFIG, method=method).run()
    assert [r.evaluations for r in results] == [4, 6, 8] and results[-1].llm_calls == 0


def test_the_llm_only_baseline_replaces_invalid_points_by_random_ones(dtlz2):
    backend = ScriptedBackend(["?", '{"x": [0.1, 0.2, 0.3, 0.4]}', '{"x": [2, 0, 0, 0]}'])
    loop = LILO(dtlz2, backend, CONFIG, method="llm_only")
    results = loop.run()
    assert results[-1].evaluations == 8 and loop.proposer.invalid == 2  # [2, 0, 0, 0] is outside the unit cube
    points = torch.tensor([r["x"] for r in loop.transcript.of_kind("evaluation")], dtype=torch.float64)
    assert torch.allclose(points[4], torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "bandit"}, r"`method` must be one of \['lilo', 'preferential'"),
        ({"method": "lilo", "backend": None}, "method 'lilo' needs a `backend`"),
    ],
)
def test_bad_loop_arguments_are_refused(kwargs, message, dtlz2):
    with pytest.raises(ValueError, match=message):
        LILO(dtlz2, **{"backend": ScriptedBackend(ANSWERS)} | kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"feedback": "ranking"}, r"`feedback` must be one of \['pairwise', 'scalar'\], got 'ranking'"),
        ({"n_initial": 1}, "`n_initial` must be an integer >= 2, got 1"),
        ({"samples": 0}, "`samples` must be an integer >= 1, got 0"),
        ({"min_answer_rate": 1.5}, r"`min_answer_rate` must be in \[0, 1\], got 1.5"),
        ({"min_answer_rate": float("nan")}, "`min_answer_rate` must be a finite number"),
    ],
)
def test_bad_config_is_refused_by_field_name(kwargs, message):
    with pytest.raises(ValueError, match=f"LILOConfig: {message}"):
        LILOConfig(**kwargs)
