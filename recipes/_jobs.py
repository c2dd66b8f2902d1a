"""A recipe's finished jobs, one JSON file each under ``output_dir/jobs/``, so that a rerun resumes instead of redoing.

A recipe made of independent jobs (cam's (problem, seed) pairs, set_cover's instances) stores each job's result as
it finishes; a rerun into the same ``output_dir`` reads the stored ones and runs only the rest, and its report is
built from the files alone, so a run killed at any point and resumed reports what the uninterrupted one would. A
rerun is refused unless it has the settings the stored jobs were made under (``settings.json``). :func:`run_all` runs
the jobs on an executor: the recipes' one way to fan out; :func:`on_main_process` keeps the processes of a launch
from each running every job.
"""

import functools
import json
import os
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import field
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState
from tqdm.auto import tqdm

from hf_ext._files import read_json
from hf_ext._settings import check_and_store_settings
from hf_ext._validation import check_count
from hf_ext.executors import local_executor, run_jobs

JOBS = "jobs"
SETTINGS = "settings.json"


def on_main_process(main: Callable[..., dict]) -> Callable[..., dict]:
    """A recipe's ``main`` that runs on the main process of a launch while the others wait, and returns ``{}`` on them.

    A recipe whose jobs fan out through ``workers`` or an executor, not through ``accelerate launch``'s processes,
    would otherwise run every job once per process, with two writers on each of its files. Without a GPU the
    processes join over gloo here (no ``TrainingArguments`` sets them up). The ranks leave together, also when the
    main one raises: a rank that exits while another holds the gloo group aborts it.
    """

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> dict:
        state = PartialState(cpu=not torch.cuda.is_available())
        try:
            return main(*args, **kwargs) if state.is_main_process else {}
        finally:
            state.wait_for_everyone()

    return run


def check_job_settings(output_dir: str | Path, settings: dict[str, Any], recipe: str) -> None:
    """Refuse to add jobs to ``output_dir`` under settings other than its stored jobs'; store ``settings`` there."""
    out = Path(output_dir)
    check_and_store_settings(
        out / SETTINGS,
        settings,
        resuming=any((out / JOBS).glob("*.json")),
        run=f"the {recipe} jobs in {out}",
        start_fresh=f"pass another output_dir, or delete {out}",
    )


def stored_or_run(output_dir: str | Path, name: str, run: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Job ``name``'s stored result, or ``run(*args)``'s, stored first (written whole or not at all).

    Either way the result is what the file holds (JSON: tuples come back as lists), so a job read back and one
    just run give the same report.
    """
    path = Path(output_dir) / JOBS / f"{name}.json"
    if path.is_file():
        return read_json(path, f"the stored job {name!r}")
    text = json.dumps(run(*args))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text + "\n")
    os.replace(partial, path)  # a run killed while writing leaves no file, and the job is redone
    return json.loads(text)


WORKERS_HELP = (
    "Jobs run at once (>= 1): 1 runs them in this process, more on that many local processes. From Python, "
    "main(argv, executor=...) takes any concurrent.futures.Executor instead (Dask, Ray: docs/cluster.md)."
)


def workers_field(launch: str = ""):
    """The ``workers`` setting of a recipe made of independent jobs (default 1: in this process), its one declaration;
    :func:`check_workers` is its one check. ``launch`` adds to the help what a launch of several processes does to
    it, where that is not the usual (the main process runs the jobs, the others wait)."""
    return field(default=1, metadata={"help": f"{WORKERS_HELP} {launch}".strip()})


def check_workers(owner: str, workers: Any) -> None:
    """Refuse a ``workers`` that is not an integer >= 1, naming ``owner`` (:func:`~hf_ext._validation.check_count`)."""
    check_count(owner, "workers", workers, least=1)


def run_all(
    fn: Callable[..., Any],
    jobs: list[tuple],
    workers: int,
    desc: str,
    executor: Executor | None = None,
    threads: int = 1,
    unit: str = "run",
) -> list[Any]:
    """``fn(*job)`` for every job, in job order, under one progress bar: on ``executor`` when given, else in this
    process (``workers=1``) or on ``workers`` local processes of ``threads`` torch threads each.

    The one way a recipe fans its jobs out (:func:`hf_ext.executors.run_jobs`): a job whose worker dies
    is run again, and the first job that raises stops the rest and raises. Under ``accelerate launch`` only the
    main process calls it (the others wait), so the number of processes launched does not change the jobs run.
    """
    with tqdm(total=len(jobs), desc=desc, unit=unit) as bar:
        if executor is not None:
            return run_jobs(executor, fn, jobs, on_result=lambda index, result: bar.update())
        pool = local_executor(workers, initializer=torch.set_num_threads, initargs=(threads,))
        try:
            return run_jobs(pool, fn, jobs, on_result=lambda index, result: bar.update())
        finally:
            pool.shutdown()
