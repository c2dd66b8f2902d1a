import dataclasses
import json

import pytest

from hf_ext.companion.bo.lilo import TransformersBackend
from hf_ext.recipes import shipped_config
from hf_ext.recipes.lilo import LILOArguments, main, make_backend, parser


def _flags(tmp_path, *extra):
    return ["--config", str(shipped_config("lilo_quick")), "--output_dir", str(tmp_path), *extra]


def test_quick_run_of_the_baselines_writes_results_plot_and_transcripts(tmp_path, capfd):
    results = main(_flags(tmp_path, "--methods", "preferential", "random"))
    summary = json.loads((tmp_path / "results.json").read_text())["summary"]
    assert summary == results["summary"] and set(summary) == {
        "dtlz2/preferential",
        "dtlz2/random",
    }
    assert all(len(entry["gap_per_round"]) == 2 and entry["final_gap"] >= 0 for entry in summary.values())
    assert (tmp_path / "utility_gap.png").stat().st_size > 1000
    transcript = tmp_path / "transcripts" / "dtlz2" / "preferential" / "seed_0.jsonl"
    assert sum(json.loads(line)["kind"] == "evaluation" for line in transcript.read_text().splitlines()) == 6
    assert "dtlz2/random: final gap" in capfd.readouterr().out


def test_each_run_takes_its_seed_from_seeds_and_the_rest_from_the_parsed_config(tmp_path):
    """Issue 38: LILOConfig's `seed` was a setting that every run replaced by one of `seeds`."""
    _, config, _ = parser().parse_args_and_config(_flags(tmp_path))
    assert "seed" not in {field.name for field in dataclasses.fields(config) if field.init}
    results = main(_flags(tmp_path, "--seeds", "3", "--rounds", "2", "--methods", "random"))
    assert results["config"]["rounds"] == 2 and "seed" not in results["config"]
    stored = json.loads((tmp_path / "transcripts" / "dtlz2" / "random" / "seed_3.settings.json").read_text())
    assert (stored["config"]["seed"], stored["config"]["rounds"]) == (3, 2)


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match=r"`methods` must be a non-empty list from \['lilo'"):
        LILOArguments(methods=["bandit"])
    with pytest.raises(ValueError, match=r"`backend` must be one of \['local', 'http'\], got 'grpc'"):
        LILOArguments(backend="grpc")
    with pytest.raises(ValueError, match=r"OpenAIBackend: `prefill` must be one of \['response_format', 'continue'\]"):
        parser().parse_args_and_config(["--prefill", "none"])


def test_the_backend_settings_are_openai_backends_own_and_drive_either_backend():
    """Issue 38: the recipe copied OpenAIBackend's fields (its own max_new_tokens default differed, 32 vs 48)."""
    flags = ["--timeout", "5", "--prefill", "continue", "--model", "tiny", "--max_new_tokens", "7"]
    args, _, server = parser().parse_args_and_config(["--backend", "http", *flags])
    assert make_backend(args, server) is server and (server.timeout, server.prefill) == (5.0, "continue")
    args, _, server = parser().parse_args_and_config(["--backend", "local", *flags])
    local = make_backend(args, server)
    assert isinstance(local, TransformersBackend) and (local.model, local.max_new_tokens) == ("tiny", 7)


@pytest.mark.slow
def test_quick_run_with_smollm2_labels_and_proposes(tmp_path):
    results = main(_flags(tmp_path, "--methods", "lilo", "llm_only"))
    lilo = results["summary"]["dtlz2/lilo"]
    assert lilo["llm_calls"] >= 2 and results["summary"]["dtlz2/llm_only"]["llm_calls"] >= 2
    transcript = tmp_path / "transcripts" / "dtlz2" / "lilo" / "seed_0.jsonl"
    kinds = [json.loads(line)["kind"] for line in transcript.read_text().splitlines()]
    assert kinds.count("answer") == 1 and kinds.count("label") == 1
    again = main(_flags(tmp_path, "--methods", "lilo", "llm_only"))  # resumed: every answer from the transcripts
    assert again["summary"]["dtlz2/lilo"]["llm_calls"] == 0
    assert again["runs"][0]["gap"] == results["runs"][0]["gap"]


@pytest.mark.slow
def test_on_two_cpu_processes_the_main_one_runs_them_on_two_workers(tmp_path, run_on_two_processes):
    stdout = run_on_two_processes("lilo", ["--config", "lilo_quick", "methods=preferential random", "workers=2"])
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert sorted(run["method"] for run in runs) == ["preferential", "random"]  # each run once, from either rank
    assert stdout.count("dtlz2/preferential: final gap") == 1  # the summary printed once
    for method in ("preferential", "random"):
        assert (tmp_path / "transcripts" / "dtlz2" / method / "seed_0.jsonl").is_file()


def test_a_run_sigkilled_mid_way_and_resumed_in_a_new_process_ends_as_the_uninterrupted_one(tmp_path, resume_check):
    """Issue 37: PairwiseGP drew its start from the process's global NumPy state, so a resume replayed other points.

    Preferential BO (the simulated decision maker, no LLM), killed once round 1's points are in the transcript.
    """
    flags = ["--config", str(shipped_config("lilo_quick")), "--methods", "preferential", "--rounds", "3"]
    transcript = "transcripts/dtlz2/preferential/seed_0.jsonl"

    def round_1_done(folder):
        path = folder / transcript
        return path.is_file() and b'"key": "evaluation:5"' in path.read_bytes()

    outputs = resume_check.assert_resumes_identically(
        resume_check.module_command("hf_ext.recipes.lilo", *flags),
        round_1_done,
        tmp_path,
        ignored_keys={"results.json": {"seconds"}},
    )
    assert outputs[transcript].count(b'"kind": "evaluation"') == 4 + 3 * 2
