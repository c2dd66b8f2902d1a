"""A round's LLM calls and decision-maker comparisons on an executor give the run that one call after another gives."""

import concurrent.futures as cf
import hashlib
import json
import threading
import time

import pytest

from hf_ext.companion.bo.lilo import LILO, LILOConfig, make_environment
from hf_ext.executors import RestartingProcessPool

CONFIG = LILOConfig(n_initial=4, batch_size=2, rounds=2, pairs_per_round=3, samples=3, num_restarts=1, raw_samples=16)


class SeededBackend:
    """Answers that depend only on the prompt and the seed (as a sampling LLM's do), invalid JSON a third of the
    time (so samples are retried); records how many calls ran at once."""

    def __init__(self, seconds: float = 0.0):
        self.seconds, self.lock, self.running, self.most = seconds, threading.Lock(), 0, 0

    def __getstate__(self):  # a worker process gets the answers, not the lock or the counts
        return {"seconds": self.seconds}

    def __setstate__(self, state):
        self.__init__(state["seconds"])

    def complete(self, messages, seed):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.seconds)
        with self.lock:
            self.running -= 1
        draw = int(hashlib.sha256(json.dumps([messages, seed]).encode()).hexdigest(), 16)
        prefill = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        if draw % 3 == 0:
            return prefill + "not json"
        if prefill.startswith('{"choice"'):
            return prefill + ("A" if draw % 2 else "B") + '"}'
        if prefill.startswith('{"probability"'):
            return prefill + f"{draw % 100 / 100}" + "}"
        if prefill.startswith('{"x"'):
            return prefill + ", ".join(f"{(draw >> k) % 100 / 100}" for k in range(4)) + "]}"
        return "Which outcome do you like best?"


@pytest.fixture(scope="module")
def dtlz2():
    return make_environment("dtlz2")


def _run(dtlz2, method, config, executor, backend, path):
    loop = LILO(dtlz2, backend, config, method=method, transcript_file=path, executor=executor)
    return loop.run(), path.read_text().splitlines()


@pytest.mark.parametrize(
    ("method", "feedback"),
    [("lilo", "pairwise"), ("lilo", "scalar"), ("llm_only", "pairwise"), ("preferential", "pairwise")],
)
def test_a_run_on_threads_equals_the_sequential_run_answer_for_answer(tmp_path, dtlz2, method, feedback):
    config = LILOConfig(**{**CONFIG.__dict__, "feedback": feedback})
    alone = _run(dtlz2, method, config, None, SeededBackend(), tmp_path / "alone.jsonl")
    backend = SeededBackend(seconds=0.01)
    with cf.ThreadPoolExecutor(4) as threads:
        spread = _run(dtlz2, method, config, threads, backend, tmp_path / "spread.jsonl")
    assert spread == alone  # every round's result, and the transcript line for line
    if method != "preferential":
        assert backend.most > 1  # the calls did overlap
    if method == "lilo":  # rounds x (question + 3 pairs or 4 outcomes x 3 samples), and retries on top
        assert sum(json.loads(line)["kind"] == "llm" for line in alone[1]) > 2 * (1 + 3 * 3)


def test_a_resumed_run_on_an_executor_makes_no_call_the_transcript_holds(tmp_path, dtlz2):
    path = tmp_path / "t.jsonl"
    full = _run(dtlz2, "lilo", CONFIG, None, SeededBackend(), path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    backend = SeededBackend()
    with cf.ThreadPoolExecutor(2) as threads:
        loop = LILO(dtlz2, backend, CONFIG, transcript_file=path, executor=threads)
        resumed = loop.run()
    assert resumed == full[0] and sorted(path.read_text().splitlines()) == sorted(full[1])
    assert 0 < loop.transcript.llm_calls < sum(json.loads(line)["kind"] == "llm" for line in lines)


def test_anything_but_an_executor_is_refused_by_name(dtlz2):
    with pytest.raises(TypeError, match="LILO: `executor` must be a concurrent.futures.Executor"):
        LILO(dtlz2, SeededBackend(), CONFIG, executor=4)


@pytest.mark.slow
def test_a_run_on_local_processes_equals_the_sequential_run(tmp_path, dtlz2):
    alone = _run(dtlz2, "lilo", CONFIG, None, SeededBackend(), tmp_path / "alone.jsonl")
    with RestartingProcessPool(2) as pool:
        spread = _run(dtlz2, "lilo", CONFIG, pool, SeededBackend(), tmp_path / "spread.jsonl")
    assert spread == alone
