"""One way to fan out work (the companion loops' evaluations, the recipes' runs): any ``concurrent.futures.Executor``,
with calls that survive a lost worker.

The BO loop, ``minimize`` (an ES population), ``run_coco`` and the recipes that run many jobs take an
``executor``: ``None`` runs each call in this process (:class:`InProcessExecutor`), and anything that is a
``concurrent.futures.Executor`` works unchanged: a ``ProcessPoolExecutor``, :class:`RestartingProcessPool`,
Dask's ``distributed.Client(...).get_executor()``, or :class:`RayExecutor` (Ray 2.60 has no
``concurrent.futures`` executor of its own, only ``ObjectRef.future()``, which it wraps).

What the loops submit goes through :class:`Dispatcher`, which tells the two ways a call can fail apart. The
function itself raising (the objective's own error) comes back as :class:`Raised` and is the caller's to report;
any exception the future itself raises (a worker killed, a pool broken, a node gone) loses only that call, which
is submitted again up to ``retries`` times and then comes back as :class:`Lost`. An executor that refuses new
work (shut down, or a stdlib ``ProcessPoolExecutor`` broken by a dead worker) gives :class:`Lost` with
``refused=True`` at once: retrying on it cannot help. What can be checked before any work is: on a process pool
the first call is pickled once, so a function that cannot travel to the workers (a lambda, an object holding a
lock) is a ``TypeError`` at once rather than every call lost to the pickling error. And a call lost or refused
before any call has come back raises ``RuntimeError``: an executor that has not run one call cannot run them
(workers that cannot import the function, a pool shut down), and a run of nothing but failed calls is no result.
Every submission carries a token of its own, so Dask's content-hashed keys (``pure=True``, its default) never
merge two evaluations of the same point: resampling a noisy objective needs each call to run.
"""

import concurrent.futures as cf
import itertools
import logging
import pickle
import traceback
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any

from ._checks import check_count

logger = logging.getLogger(__name__)


class InProcessExecutor(cf.Executor):
    """Runs each call when it is submitted, in this process, and returns its finished future: the default.

    A loop on it makes exactly the calls, in the same order, that it made before it took an executor.
    """

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


class RestartingProcessPool(cf.Executor):
    """A ``ProcessPoolExecutor`` that replaces itself when one of its workers dies.

    The stdlib pool breaks for good when a worker is killed: every call in flight fails with
    ``BrokenProcessPool`` and so does every later ``submit``. Here the calls in flight still fail (the stdlib
    gives no way to tell whose worker died; :class:`Dispatcher` submits them again), but the next ``submit``
    starts a fresh pool instead of refusing. Dask's and Ray's workers are replaced by their schedulers, and
    only the dead worker's call is lost there.
    """

    def __init__(self, max_workers: int, initializer: Callable | None = None, initargs: tuple = ()):
        check_count("RestartingProcessPool", "max_workers", max_workers, least=1)
        self._arguments = {"max_workers": max_workers, "initializer": initializer, "initargs": initargs}
        self._pool = cf.ProcessPoolExecutor(**self._arguments)
        self.restarts = 0

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        try:
            return self._pool.submit(fn, *args, **kwargs)
        except BrokenProcessPool:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = cf.ProcessPoolExecutor(**self._arguments)
            self.restarts += 1
            logger.warning("RestartingProcessPool: a worker died; started a new pool (restart %d)", self.restarts)
            return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


def _call(fn: Callable, args: tuple, kwargs: dict) -> Any:
    return fn(*args, **kwargs)


class RayExecutor(cf.Executor):
    """Ray tasks as a ``concurrent.futures.Executor``: each ``submit`` is one remote task, its future
    ``ObjectRef.future()``.

    Call ``ray.init(...)`` (a local instance, or ``address="auto"`` on a cluster) first. ``num_cpus`` is what each
    task reserves; ``max_retries=0`` leaves retrying a task whose worker died to :class:`Dispatcher`, so every
    executor fails the same way (Ray alone would retry three times). Other ``options`` go to Ray's
    ``.options()`` (``resources``, ``runtime_env``, ...).
    """

    def __init__(self, num_cpus: float = 1, max_retries: int = 0, **options):
        import ray

        if not ray.is_initialized():
            raise RuntimeError("RayExecutor: call ray.init(...) first (a local instance, or address='auto')")
        self._ray = ray
        self._remote = ray.remote(_call).options(num_cpus=num_cpus, max_retries=max_retries, **options)
        self._refs: dict[cf.Future, Any] = {}

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        ref = self._remote.remote(fn, args, kwargs)
        future = ref.future()
        self._refs[future] = ref
        future.add_done_callback(lambda done: self._refs.pop(done, None))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        refs = list(self._refs.values())
        if cancel_futures:
            for ref in refs:
                self._ray.cancel(ref, force=False)
        elif wait and refs:
            self._ray.wait(refs, num_returns=len(refs))


def check_executor(executor: cf.Executor | None, owner: str) -> cf.Executor:
    """``executor`` itself, or an :class:`InProcessExecutor` for ``None``; anything else is a ``TypeError``."""
    if executor is None:
        return InProcessExecutor()
    if not isinstance(executor, cf.Executor):
        raise TypeError(
            f"{owner}: `executor` must be a concurrent.futures.Executor (ProcessPoolExecutor, Dask's "
            f"Client.get_executor(), RayExecutor, ...) or None (in this process), got {type(executor).__name__}"
        )
    return executor


def local_executor(workers: int, initializer: Callable | None = None, initargs: tuple = ()) -> cf.Executor:
    """``workers`` local processes (a :class:`RestartingProcessPool`), or this process for ``workers=1``."""
    check_count("local_executor", "workers", workers, least=1)
    return InProcessExecutor() if workers == 1 else RestartingProcessPool(workers, initializer, initargs)


@dataclass
class Raised:
    """The submitted function raised ``error`` (the objective's own exception, with its traceback as a note)."""

    error: BaseException


@dataclass
class Lost:
    """The call never returned: its worker or executor failed ``attempts`` times (``reason``: the last failure).

    ``refused``: the executor refused to take the call (shut down, or broken for good).
    """

    reason: str
    attempts: int
    refused: bool = False


class _Guarded:
    """``fn`` whose own exceptions come back as :class:`Raised` values, so that an exception the future raises is
    the executor's (a lost worker) and never the function's."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, token: int, *args) -> Any:  # token: unique per submission (see the module docstring)
        try:
            return self.fn(*args)
        except Exception as error:
            error.add_note(f"raised in the worker:\n{traceback.format_exc()}")
            try:
                pickle.dumps(error)
            except Exception:  # it must travel back from another process
                error = RuntimeError(f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
            return Raised(error)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class Dispatcher:
    """Calls of ``fn`` in flight on ``executor``, each under a key of the caller's; see the module docstring.

    ``submit(key, *args)`` starts a call; ``next_done()`` waits for one and returns ``(key, outcome)``, the
    outcome being ``fn``'s value, a :class:`Raised` or a :class:`Lost`. A lost call is submitted again (with the
    same arguments) up to ``retries`` times before it is reported. On a process pool the first ``submit`` raises
    ``TypeError`` if its call cannot be pickled; ``next_done`` raises ``RuntimeError`` for a call lost (or refused)
    before any call came back.
    """

    def __init__(self, executor: cf.Executor | None, fn: Callable, retries: int = 1, owner: str = "Dispatcher"):
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ValueError(f"{owner}: `retries` must be an integer >= 0, got {retries!r}")
        self.executor = check_executor(executor, owner)
        self._fn, self._retries, self._owner = _Guarded(fn), retries, owner
        self._tokens = itertools.count()
        self._futures: dict[cf.Future, tuple[Hashable, tuple, int]] = {}  # future -> (key, args, attempt)
        self._ready: deque[tuple[Hashable, Any]] = deque()
        self._checked = False  # whether the first call was checked to travel to the workers
        self._came_back = False  # whether any call has come back (a value or the function's own error)

    def __len__(self) -> int:
        """Calls submitted and not yet returned by :meth:`next_done`."""
        return len(self._futures) + len(self._ready)

    def submit(self, key: Hashable, *args) -> None:
        if not self._checked:
            self._check_picklable(args)
            self._checked = True
        self._submit(key, args, attempt=1)

    def _check_picklable(self, args: tuple) -> None:
        """Pickle a call once where the executor sends calls to its processes by pickle: the stdlib pool fails each
        future of an unpicklable call with the pickling error, which would look like a dead worker's, at every call."""
        if not isinstance(self.executor, cf.ProcessPoolExecutor | RestartingProcessPool):
            return
        try:
            ForkingPickler.dumps((self._fn, args))
        except Exception as error:
            raise TypeError(
                f"{self._owner}: the function and its arguments must be picklable to run on a "
                f"{type(self.executor).__name__} (a module-level function or class, a BoTorch test function; not a "
                f"lambda, a local function or an object holding a lock or an open file): {_describe(error)}"
            ) from error

    def _submit(self, key: Hashable, args: tuple, attempt: int) -> None:
        try:
            future = self.executor.submit(self._fn, next(self._tokens), *args)
        except Exception as error:  # BrokenExecutor, or "cannot schedule new futures after shutdown"
            self._ready.append((key, Lost(_describe(error), attempt, refused=True)))
            return
        self._futures[future] = (key, args, attempt)

    def next_done(self, timeout: float | None = None) -> tuple[Hashable, Any] | None:
        """The next finished call as ``(key, outcome)``; ``None`` if none finished within ``timeout`` seconds."""
        while not self._ready:
            if not self._futures:
                raise RuntimeError(f"{self._owner}: next_done() with no call in flight")
            done, _ = cf.wait(self._futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
            if not done:
                return None
            for future in [future for future in self._futures if future in done]:  # in the order submitted
                key, args, attempt = self._futures.pop(future)
                try:
                    self._ready.append((key, future.result()))
                    self._came_back = True
                except BaseException as error:  # the future's own failure: the worker or the executor
                    if attempt > self._retries:
                        self._ready.append((key, Lost(_describe(error), attempt)))
                        continue
                    logger.warning(
                        "%s: call %r lost (%s), attempt %d of %d; submitting it again",
                        self._owner,
                        key,
                        _describe(error),
                        attempt,
                        self._retries + 1,
                    )
                    self._submit(key, args, attempt + 1)
        key, outcome = self._ready.popleft()
        if isinstance(outcome, Lost) and not self._came_back:
            self.cancel()
            raise self._cannot_run(key, outcome)
        return key, outcome

    def _cannot_run(self, key: Hashable, lost: Lost) -> RuntimeError:
        """The error for a call lost before any came back: the executor cannot run these calls at all."""
        what = "refused" if lost.refused else f"lost {lost.attempts} times"
        return RuntimeError(
            f"{self._owner}: call {key!r} was {what} ({lost.reason}) before any call on this "
            f"{type(self.executor).__name__} came back: it cannot run these calls (shut down or broken, or workers "
            "that cannot import or unpickle the function); stopped, as a run of failed calls is no result"
        )

    def cancel(self) -> None:
        """Cancel the calls that have not started (running ones finish; their results are dropped)."""
        for future in self._futures:
            future.cancel()
        self._futures.clear()
        self._ready.clear()


def run_jobs(
    executor: cf.Executor | None,
    fn: Callable,
    jobs: Iterable[tuple],
    on_result: Callable[[int, Any], None] | None = None,
    poll: Callable[[], None] | None = None,
    retries: int = 1,
) -> list[Any]:
    """``fn(*job)`` for every job on ``executor``; the results in job order.

    ``on_result(index, result)`` is called as each job finishes (in the order they finish), ``poll()`` every
    0.2 s while waiting (to drain a progress queue, say). The first job that raises cancels the jobs not yet
    started and its exception is raised; a job lost ``retries + 1`` times raises ``RuntimeError`` naming it.
    """
    dispatcher = Dispatcher(executor, fn, retries, owner="run_jobs")
    jobs = list(jobs)
    # In this process a submit runs the job: one at a time, so that a failure stops the jobs after it.
    window = 1 if isinstance(dispatcher.executor, InProcessExecutor) else len(jobs)
    queued = iter(enumerate(jobs))
    for index, job in itertools.islice(queued, window):
        dispatcher.submit(index, *job)
    results: list[Any] = [None] * len(jobs)
    while len(dispatcher):
        done = dispatcher.next_done(timeout=0.2 if poll is not None else None)
        if poll is not None:
            poll()
        if done is None:
            continue
        index, outcome = done
        if isinstance(outcome, Raised | Lost):
            dispatcher.cancel()
            if isinstance(outcome, Raised):
                raise outcome.error
            lost = f"({outcome.reason}) {outcome.attempts} times"
            raise RuntimeError(f"run_jobs: job {index} {jobs[index]!r} was lost {lost}")
        results[index] = outcome
        if on_result is not None:
            on_result(index, outcome)
        for index, job in itertools.islice(queued, 1):
            dispatcher.submit(index, *job)
    return results
