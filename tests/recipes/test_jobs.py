"""recipes/_jobs.run_all: the recipes' one way to fan their jobs out."""

import dataclasses
import inspect

import pytest

from hf_ext.recipes import available_recipes, load_recipe, recipe_parser
from hf_ext.recipes._jobs import WORKERS_HELP, check_workers, run_all
from hf_ext.recipes.portfolio import PortfolioArguments

# The recipes of independent jobs, each with the one `workers` setting (pem takes CocoConfig's, the library's).
JOB_RECIPES = ("agzo_finetune", "bo_robust", "cam", "lilo", "portfolio", "single_index", "stepsize_sensitivity")


def _power(base, exponent):
    return base**exponent


def test_the_jobs_run_on_the_executor_given_and_come_back_in_job_order(counting_executor):
    jobs = [(2, 3), (3, 2), (10, 0)]
    assert run_all(_power, jobs, workers=1, desc="test", executor=counting_executor) == [8, 9, 1]
    assert counting_executor.submitted == 3
    assert run_all(_power, jobs, workers=1, desc="test") == [8, 9, 1]  # in this process


def test_the_first_job_that_raises_stops_the_run_with_its_error():
    with pytest.raises(ZeroDivisionError):
        run_all(_power, [(2, 1), (0, -1), (3, 1)], workers=1, desc="test")


@pytest.mark.parametrize(
    ("workers", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError), ("2", TypeError)]
)
def test_bad_workers_are_refused_by_name(workers, error):
    with pytest.raises(error, match=rf"Recipe: `workers` must be an integer >= 1, got {workers!r}"):
        check_workers("Recipe", workers)
    # a value of another type is the config's field-type TypeError, one below 1 the ValueError
    with pytest.raises((TypeError, ValueError), match="PortfolioArguments: `workers` must be an integer"):
        PortfolioArguments(workers=workers)


@pytest.mark.slow
def test_under_two_processes_the_main_one_runs_and_both_leave_together(tmp_path, torchrun_two_processes):
    """bo_robust and token_shift ran every job on each launched process, two writers on each file (issue 37)."""
    script = tmp_path / "run_once.py"
    script.write_text(
        "import os, sys\nfrom pathlib import Path\nfrom hf_ext.recipes._jobs import on_main_process\n\n"
        "@on_main_process\ndef main(folder):\n"
        "    (Path(folder) / f\"ran_on_rank_{os.environ['RANK']}\").touch()\n"
        "    return {'ran': True}\n\n"
        "result = main(sys.argv[1])\n"
        "(Path(sys.argv[1]) / f\"rank_{os.environ['RANK']}_returned_{sorted(result)}\").touch()\n"
    )
    torchrun_two_processes(script)
    assert sorted(path.name for path in tmp_path.iterdir() if path.suffix != ".py") == [
        "ran_on_rank_0",
        "rank_0_returned_['ran']",
        "rank_1_returned_[]",
    ]


@pytest.mark.parametrize("name", JOB_RECIPES)
def test_every_recipe_of_jobs_declares_workers_once_the_same_way_and_takes_an_executor(name):
    """Issue 74: `workers` was declared three ways (bo_robust's with its own default, 2); one declaration now."""
    (field,) = [
        field
        for kind in recipe_parser(name).dataclass_types
        for field in dataclasses.fields(kind)
        if field.name == "workers"
    ]
    assert field.default == 1 and field.metadata["help"].startswith(WORKERS_HELP)
    assert "executor" in inspect.signature(load_recipe(name).main).parameters


def test_the_list_holds_every_recipe_with_workers():
    with_workers = {
        name
        for name in available_recipes()
        if any("workers" in kind.__dataclass_fields__ for kind in recipe_parser(name).dataclass_types)
    }
    assert with_workers == {*JOB_RECIPES, "pem"}
