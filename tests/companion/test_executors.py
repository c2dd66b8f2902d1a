"""The companion loops on any executor: in this process, local processes, a Dask LocalCluster and a local Ray.

The cluster tests start one Dask cluster and one Ray instance for the whole module (a Ray start costs seconds)
and are marked slow; their objectives sleep 0.05 s so that evaluations overlap.
"""

import concurrent.futures as cf
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from botorch.test_functions import Branin

from hf_ext.companion.bo import BayesianOptimization, BayesianOptimizationConfig
from hf_ext.companion.es import ESConfig, minimize
from hf_ext.executors import (
    Dispatcher,
    InProcessExecutor,
    Lost,
    Raised,
    RayExecutor,
    RestartingProcessPool,
    check_executor,
    local_executor,
    run_jobs,
)

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # the workers of Dask (spawned with this sys.path) and Ray (PYTHONPATH) import from it
from _executor_objectives import KillsItsWorker, Sleepy  # noqa: E402

BRANIN = Branin(negate=True)


class FailingFutures(cf.Executor):
    """Runs calls in this process, but the first ``failures`` futures fail as a dead worker's would."""

    def __init__(self, failures: int):
        self.failures = failures

    def submit(self, fn, /, *args, **kwargs):
        future = cf.Future()
        if self.failures:
            self.failures -= 1
            future.set_exception(ConnectionError("worker gone"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def _square(x):
    return x * x


def _fails(x):
    raise KeyError(f"no {x}")


def test_none_runs_in_this_process_and_anything_but_an_executor_is_refused():
    assert isinstance(check_executor(None, "Loop"), InProcessExecutor)
    pool = cf.ThreadPoolExecutor(1)
    assert check_executor(pool, "Loop") is pool
    with pytest.raises(TypeError, match=r"Loop: `executor` must be a concurrent.futures.Executor .* got int"):
        check_executor(4, "Loop")
    with pytest.raises(ValueError, match="`workers` must be an integer >= 1, got 0"):
        local_executor(0)
    assert isinstance(local_executor(1), InProcessExecutor)


def test_a_raising_function_is_told_apart_from_a_lost_call_which_is_retried():
    dispatcher = Dispatcher(FailingFutures(failures=1), _square, retries=1)
    dispatcher.submit("a", 3)
    assert dispatcher.next_done() == ("a", 9)  # lost once, submitted again
    failing = FailingFutures(failures=0)
    dispatcher = Dispatcher(failing, _square, retries=1)
    dispatcher.submit("b", 2)
    assert dispatcher.next_done() == ("b", 4)
    failing.failures = 2
    dispatcher.submit("a", 3)
    key, outcome = dispatcher.next_done()
    assert key == "a" and outcome == Lost("ConnectionError: worker gone", attempts=2)
    dispatcher = Dispatcher(None, _fails)
    dispatcher.submit("b", 1)
    key, outcome = dispatcher.next_done()
    assert isinstance(outcome, Raised) and isinstance(outcome.error, KeyError) and len(dispatcher) == 0


def test_an_executor_that_refuses_work_gives_a_refused_loss_at_once():
    pool = cf.ThreadPoolExecutor(1)
    dispatcher = Dispatcher(pool, _square, retries=3)
    dispatcher.submit("b", 1)
    assert dispatcher.next_done() == ("b", 1)
    pool.shutdown()
    dispatcher.submit("a", 2)
    key, outcome = dispatcher.next_done()
    assert outcome.refused and outcome.attempts == 1 and "shutdown" in outcome.reason


class _Unpicklable:
    """Branin holding a lock: it runs in this process and cannot travel to a worker process."""

    dim = 2

    def __init__(self):
        self.lock = threading.Lock()

    def __call__(self, x):
        return BRANIN(x)


class _Refusing(cf.Executor):
    def submit(self, fn, /, *args, **kwargs):
        raise RuntimeError("cannot schedule new futures after shutdown")


def test_a_call_that_cannot_be_pickled_for_a_process_pool_is_refused_before_any_work():
    """Issue 72: an unpicklable objective on a ProcessPoolExecutor was every evaluation lost to the pickling error,
    and BayesianOptimization(...).run(3) returned three failed evaluations."""
    config = BayesianOptimizationConfig(n_initial=3)
    for pool in (cf.ProcessPoolExecutor(1), RestartingProcessPool(1)):
        with (
            pool,
            pytest.raises(
                TypeError,
                match=r"BayesianOptimization: the function and its arguments must be "
                r"picklable to run on a \w+ .*cannot pickle '_thread.lock' object",
            ),
        ):
            BayesianOptimization(_Unpicklable(), BRANIN.bounds, config, executor=pool).run(3)
    with cf.ProcessPoolExecutor(1) as pool, pytest.raises(TypeError, match="minimize: the function .* picklable"):
        minimize(lambda x: 0.0, [1.0, 2.0], ESConfig(sigma0=1.0, max_evaluations=8, seed=0), executor=pool)
    BayesianOptimization(_Unpicklable(), BRANIN.bounds, config, executor=cf.ThreadPoolExecutor(1)).run(3)
    with cf.ProcessPoolExecutor(1) as pool:  # what pickles still runs
        assert run_jobs(pool, _square, [(3,)]) == [9]


def test_a_run_whose_calls_are_lost_before_any_came_back_raises_instead_of_returning_failures():
    """Issue 72: minimize on an executor whose submit() raised counted every evaluation as NaN and returned
    fbest=inf, and a BO run whose every evaluation was lost returned them all as failed."""
    with pytest.raises(
        RuntimeError,
        match=r"minimize: call 0 was refused \(RuntimeError: cannot schedule new .*"
        r"before any call on this _Refusing came back",
    ):
        minimize(_noisy_sphere, [1.0, 2.0], ESConfig(sigma0=1.0, max_evaluations=40, seed=0), executor=_Refusing())
    loop = BayesianOptimization(
        BRANIN, BRANIN.bounds, BayesianOptimizationConfig(n_initial=3), executor=FailingFutures(failures=10)
    )
    with pytest.raises(RuntimeError, match=r"BayesianOptimization: call 0 was lost 2 times \(ConnectionError"):
        loop.run(3)
    assert loop.history == [] and sorted(loop.pending) == [0]


def test_run_jobs_keeps_job_order_and_in_this_process_stops_at_the_first_failure():
    assert run_jobs(cf.ThreadPoolExecutor(2), _square, [(3,), (1,), (2,)]) == [9, 1, 4]
    calls = []

    def job(x):
        calls.append(x)
        if x == 1:
            raise OSError("disk full")
        return x

    with pytest.raises(OSError, match="disk full"):
        run_jobs(None, job, [(0,), (1,), (2,)])
    assert calls == [0, 1]


def _noisy_sphere(x):
    return float(np.sum(np.asarray(x) ** 2))


def test_an_es_population_is_evaluated_through_the_executor_with_the_same_result():
    config = ESConfig(sigma0=1.0, max_evaluations=120, seed=3)
    alone = minimize(_noisy_sphere, [1.0, -2.0, 0.5], config)
    threaded = minimize(_noisy_sphere, [1.0, -2.0, 0.5], config, executor=cf.ThreadPoolExecutor(4))
    assert threaded.fbest == alone.fbest and np.array_equal(threaded.xfavorite, alone.xfavorite)
    lost = minimize(_noisy_sphere, [1.0, -2.0, 0.5], config, executor=FailingFutures(failures=1), retries=0)
    assert lost.nan_values == 1 and lost.evaluations == 120


# ---- local processes, Dask and Ray (slow: each starts processes) ----


@pytest.fixture(scope="module")
def dask_client():
    pytest.importorskip("distributed", reason="the [cluster] extra (dask[distributed]) is not installed")
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def ray_runtime():
    ray = pytest.importorskip("ray", reason="the [cluster] extra (ray) is not installed")
    runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False, runtime_env=runtime_env)
    yield ray
    ray.shutdown()


@pytest.fixture(params=["processes", "dask", "ray"])
def executor(request):
    """A two-worker executor of each kind (the cluster ones shared by the module)."""
    if request.param == "processes":
        pool = RestartingProcessPool(2)
        yield pool
        pool.shutdown()
    elif request.param == "dask":
        yield request.getfixturevalue("dask_client").get_executor()
    else:
        request.getfixturevalue("ray_runtime")
        yield RayExecutor()


CONFIG = BayesianOptimizationConfig(model="gp", n_initial=4, num_restarts=2, raw_samples=32, q=3)


@pytest.mark.slow
def test_a_batch_run_is_the_same_on_every_executor(executor):
    def queries(history):
        return sorted((e.query, e.x, e.true) for e in history)

    alone = BayesianOptimization(Sleepy(), BRANIN.bounds, CONFIG).run(10)
    spread = BayesianOptimization(Sleepy(), BRANIN.bounds, CONFIG, executor=executor).run(10)
    assert queries(spread) == queries(alone) and len({tuple(e.x) for e in alone}) == 10


@pytest.mark.slow
def test_a_worker_killed_mid_evaluation_loses_only_its_evaluation(executor, tmp_path):
    log = tmp_path / "calls.log"
    objective = KillsItsWorker(str(tmp_path / "killed"), str(log))
    config = BayesianOptimizationConfig(n_initial=6, q=2, asynchronous=True)
    history = BayesianOptimization(objective, BRANIN.bounds, config, executor=executor).run(6)
    assert sorted(e.query for e in history) == list(range(6)) and all(e.failed is None for e in history)
    calls = log.read_text().splitlines()
    assert sum(line.startswith("killed") for line in calls) == 1
    # Dask and Ray replace only the dead worker; the stdlib pool fails every call in flight with it
    assert len(calls) == 7 or (isinstance(executor, RestartingProcessPool) and len(calls) <= 8)


@pytest.mark.slow
def test_an_evaluation_lost_on_every_retry_is_recorded_as_failed_and_the_run_goes_on(tmp_path):
    config = BayesianOptimizationConfig(n_initial=5)
    point = BayesianOptimization(BRANIN, BRANIN.bounds, config).run(5)[2].x  # the Sobol point of query 2
    objective = KillsItsWorker(str(tmp_path / "killed"), str(tmp_path / "calls.log"), point=point)
    with RestartingProcessPool(1) as pool:
        history_file = tmp_path / "h.jsonl"
        loop = BayesianOptimization(objective, BRANIN.bounds, config, history_file=history_file, executor=pool)
        history = loop.run(5)
    failed = [e for e in history if e.failed is not None]
    assert [e.query for e in failed] == [2] and failed[0].true is None and "lost 2 times" in failed[0].failed
    assert [json.loads(line)["failed"] is not None for line in (tmp_path / "h.jsonl").read_text().splitlines()] == [
        False,
        False,
        True,
        False,
        False,
    ]


@pytest.mark.slow
def test_every_call_runs_even_where_dask_would_merge_equal_ones(dask_client):
    """Dask's executor keys a task by its function and arguments (pure=True): three resamples of one ES candidate
    would be one evaluation, three times the same noisy value."""
    dispatcher = Dispatcher(dask_client.get_executor(), time.perf_counter_ns)  # a new value at every call
    for key in range(3):
        dispatcher.submit(key)
    assert len({dispatcher.next_done()[1] for _ in range(3)}) == 3


@pytest.mark.slow
def test_an_asynchronous_run_killed_with_its_workers_resumes_from_its_history(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, time\n"
        "from botorch.test_functions import Branin\n"
        "from hf_ext.companion.bo import BayesianOptimization, BayesianOptimizationConfig\n"
        "from hf_ext.executors import RestartingProcessPool\n"
        "branin = Branin(negate=True)\n"
        "def slow(x):\n"
        "    time.sleep(0.2)\n"
        "    return branin(x)\n"
        "slow.dim = 2\n"
        "config = BayesianOptimizationConfig(model='gp', acquisition='ts', n_initial=4, q=2, asynchronous=True,\n"
        "                                    ts_candidates=64)\n"
        "with RestartingProcessPool(2) as pool:\n"
        "    loop = BayesianOptimization(slow, branin.bounds, config, history_file=sys.argv[1], executor=pool)\n"
        "    loop.run(int(sys.argv[2]))\n"
    )
    history = tmp_path / "h.jsonl"
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, str(script), str(history), "10"], env=env, start_new_session=True)
    deadline = time.monotonic() + 300
    while not (history.is_file() and len(history.read_text().splitlines()) >= 5) and time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before the point to kill it at"
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    lines_at_kill = len(history.read_text().splitlines())
    pending = json.loads((tmp_path / "h.pending.json").read_text())
    assert pending and lines_at_kill < 10
    subprocess.run([sys.executable, str(script), str(history), "10"], env=env, check=True, timeout=300)
    records = [json.loads(line) for line in history.read_text().splitlines()]
    queries = [record["query"] for record in records]
    assert len(records) == 10 and len(set(queries)) == 10 and [r["round"] for r in records] == list(range(10))
    assert {p["query"] for p in pending} <= set(queries)  # the points in flight at the kill were evaluated
    assert not (tmp_path / "h.pending.json").exists()
    assert all(torch.isfinite(torch.tensor(record["true"])) for record in records)
