import csv
import json
import os
import re
import subprocess
import sys

import pytest

from hf_ext import cli
from hf_ext.companion.evaluation.es.coco import SEEDING
from hf_ext.recipes import shipped_config
from hf_ext.recipes.pem import PemArguments, main, parse_args

QUICK = ["--config", str(shipped_config("pem_quick"))]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """The shipped quick config run once into a fresh folder: (folder, results)."""
    out = tmp_path_factory.mktemp("pem")
    return out, main([*QUICK, "--output_dir", str(out), "--workers", "1"])


def test_quick_run_writes_coco_folders_csv_json_png(quick_run, capfd):
    out, results = quick_run
    with (out / "runs.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    assert len(runs) == 4 * 2  # methods x functions (one instance, one budget)
    assert all(int(run["evaluations"]) == 20 * 2 for run in runs)
    assert all(0 <= float(run["misranking"]) <= 1 for run in runs)  # mean pair misranking of the run
    assert (out / "coco" / "exdata" / "rb_pem_20D" / "f101_i01_d2" / "bbobexp_f101.info").exists()
    with (out / "winloss.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 2 * 3  # each challenger against the three other methods
    assert all(int(r["wins"]) + int(r["losses"]) + int(r["ties"]) == 2 for r in table)
    assert json.loads((out / "results.json").read_text())["winloss"] == results["winloss"]
    assert set(results["tasks"]) == {f"cartpole/{m}" for m in ("rb_pem", "probe_switch", "sep_cma", "pycma_noise")}
    assert all({"mean", "std", "mean_at_xbest"} <= set(summary) for summary in results["tasks"].values())
    assert (out / "ecdf.png").stat().st_size > 1000 and (out / "winloss.png").stat().st_size > 1000
    with (out / "slices.csv").open() as handle:
        slices = list(csv.DictReader(handle))
    # per challenger, baseline, budget: inside and outside the slice, for all functions and the three groups
    assert len(slices) == 2 * 3 * 2 * 4 and slices == [{k: str(v) for k, v in row.items()} for row in results["slices"]]
    assert (out / "winrate_misranking.png").stat().st_size > 1000


def test_the_runs_go_to_the_executor_given_and_end_as_in_this_process(quick_run, tmp_path, counting_executor):
    """Issue 39: `pem` and `bo_robust` took `workers` but no executor (Dask, Ray) from Python."""
    out, results = quick_run
    spread = main([*QUICK, "--output_dir", str(tmp_path)], executor=counting_executor)
    assert {k: v for k, v in spread.items() if k != "args"} == {k: v for k, v in results.items() if k != "args"}
    assert counting_executor.submitted == 4 * 2 + 4  # COCO runs (methods x functions), cart-pole runs (methods)
    assert (tmp_path / "runs.csv").read_text() == (out / "runs.csv").read_text()


def test_a_rerun_with_another_seed_is_refused_before_any_work(quick_run):
    out, _ = quick_run
    before = {name: (out / name).read_bytes() for name in ("runs.csv", "results.json", "ecdf.png")}
    message = rf"cannot resume the bbob-noisy runs in {re.escape(str(out / 'coco'))} .*seed: stored 0, now 1\."
    with pytest.raises(ValueError, match=message):
        main([*QUICK, "--output_dir", str(out), "--workers", "1", "--seed", "1"])
    assert {name: (out / name).read_bytes() for name in before} == before


def test_a_refused_rerun_as_a_script_says_why_in_one_line(tmp_path):
    """Issue 37: the pem script let the refusal out as a traceback, where the other recipes print one line."""
    (tmp_path / "coco" / "exdata").mkdir(parents=True)  # what a run with seed 0 left
    (tmp_path / "coco" / "settings.json").write_text(json.dumps({"seed": 0, "seeding": SEEDING}))
    command = [sys.executable, "-m", "hf_ext.recipes.pem", *QUICK, "--output_dir", str(tmp_path), "--seed", "1"]
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"pem: cannot resume the bbob-noisy runs in {tmp_path / 'coco'} under other settings than those stored in "
        f"{tmp_path / 'coco' / 'settings.json'}: seed: stored 0, now 1. Rerun with the stored settings to resume, or "
        f"start fresh: pass another result_folder (the pem recipe: output_dir), or delete {tmp_path / 'coco'}."
    ]


def test_a_field_set_by_the_user_wins_over_the_quick_config():
    # Reported: `hf-ext run pem quick=true dimension=3` ran D = 2.
    args = parse_args([*QUICK, "--dimension", "3"])
    assert args.dimension == 3 and args.functions == [101, 125] and args.budget_multipliers == [20]
    cli.check_settings("pem", cli.recipe_argv("pem", "pem_quick", ["dimension=3"]))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dimension": 7}, r"`dimension` must be one of \[2, 3, 5, 10, 20, 40\]"),
        ({"budget_multipliers": [0]}, "`budget_multipliers` must be a non-empty list of integers >= 1"),
        ({"tasks": ["pendulum"]}, r"`tasks` must be from \['cv_hyperparameters', 'cartpole'\]"),
        ({"misranking_threshold": 0.7}, r"`misranking_threshold` must be in \[0, 0.5\]"),
    ],
)
def test_refuses_bad_settings(fields, message):
    with pytest.raises(ValueError, match=message):
        PemArguments(**fields)


@pytest.mark.slow
def test_two_processes_run_the_jobs_once(run_on_two_processes, tmp_path):
    out = run_on_two_processes("pem", ["--config", "pem_quick", "workers=1"])
    assert out.count("rb_pem vs sep_cma at 20D:") == 1 and out.count("cartpole/rb_pem:") == 1
    assert f"python -m cocopp -o {tmp_path / 'ppdata'} {tmp_path / 'coco' / 'exdata'}/*" in out
    index = (tmp_path / "coco" / "index.jsonl").read_text().splitlines()
    assert len(index) == 4 * 2


def test_a_run_sigkilled_mid_way_and_resumed_in_a_new_process_ends_as_the_uninterrupted_one(tmp_path, resume_check):
    """Issue 37: every file (COCO's folders, the index, the CSVs, results.json, the plots) byte-identical."""
    flags = [*QUICK, "--methods", "rb_pem", "sep_cma", "--functions", "101", "125", "--workers", "1"]
    outputs = resume_check.assert_resumes_identically(
        resume_check.module_command("hf_ext.recipes.pem", *flags),
        lambda folder: resume_check.lines(folder / "coco" / "index.jsonl") >= 1,
        tmp_path,
    )
    assert outputs["coco/index.jsonl"].count(b"\n") == 2 * 2
