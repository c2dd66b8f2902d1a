"""A run's transcript: every LLM call, answer, label and evaluation as JSON lines, for audit and for resuming.

Each record has a ``key``. LLM calls are keyed by their prompt and seed, so a run restarted on
its transcript replays deterministically and takes every answer already given from the file
instead of asking the model again; records already present are not written twice. A torn last
line (a killed writer) is dropped with a warning, as in a BO history.

:meth:`Transcript.complete_many` makes a batch of calls at once on an executor
(:mod:`hf_ext.executors`) and records them in the order one call after another would have: the
same transcript, and the same answers from a backend that is reproducible by seed.
"""

import hashlib
import json
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from hf_ext.executors import run_jobs

from ..history import read_json_lines
from .backends import LLMBackend, Messages


def call_key(messages: Messages, seed: int) -> str:
    """What identifies an LLM call: a hash of its prompt and seed."""
    return hashlib.sha256(json.dumps([messages, seed], sort_keys=True).encode()).hexdigest()[:24]


class Transcript:
    """The records of one run, in memory and (with ``path``) appended to a JSONL file as they are made."""

    def __init__(self, path: str | Path | None = None):
        self.path = None if path is None else Path(path)
        self.records: list[dict[str, Any]] = []
        self._by_key: dict[str, dict[str, Any]] = {}
        for number, record in read_json_lines(self.path) if self.path else []:
            if not isinstance(record, dict) or not isinstance(record.get("key"), str):
                raise ValueError(f"{self.path}, line {number}: expected a JSON object with a string `key`")
            self.records.append(record)
            self._by_key[record["key"]] = record
        self.llm_calls = 0  # made by this process (not taken from the file)

    def record(self, key: str, kind: str, **fields) -> dict[str, Any]:
        """Append the record ``key`` (once: a replayed run finds it there already)."""
        if key in self._by_key:
            return self._by_key[key]
        record = {"key": key, "kind": kind} | fields
        self.records.append(record)
        self._by_key[key] = record
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
        return record

    def complete(self, backend: LLMBackend, messages: Messages, seed: int, **context) -> str:
        """``backend``'s answer to ``messages``, from the transcript when this call was made before."""
        key = call_key(messages, seed)
        if key not in self._by_key:
            self._record_call(messages, seed, backend.complete(messages, seed), context)
        return self._by_key[key]["response"]

    def _record_call(self, messages: Messages, seed: int, response: str, context: dict) -> None:
        key = call_key(messages, seed)
        if key not in self._by_key:
            self.llm_calls += 1
            self.record(key, "llm", messages=messages, seed=seed, response=response, **context)

    def complete_many(
        self,
        backend: LLMBackend,
        chains: list[tuple[Messages, list[int]]],
        accept: Callable[[str], bool],
        executor: Executor | None = None,
        **context,
    ) -> list[list[str]]:
        """Per chain ``(messages, seeds)``: the answers under its seeds in turn, up to the first that ``accept``
        takes (a retry with another seed), every chain at once on ``executor`` (default: one after another here).

        Answers already in the transcript are taken from it; the new calls are recorded once every chain is done,
        chain by chain in order, as :meth:`complete` called chain after chain would have recorded them.
        ``backend`` and ``accept`` travel to the workers (picklable for an executor of other processes).
        """
        jobs = []
        for messages, seeds in chains:
            keys = {seed: call_key(messages, seed) for seed in seeds}
            known = {seed: self._by_key[key]["response"] for seed, key in keys.items() if key in self._by_key}
            jobs.append((backend, messages, seeds, known, accept))
        answers = run_jobs(executor, _chain, jobs)
        for (messages, seeds), texts in zip(chains, answers, strict=True):
            for seed, text in zip(seeds, texts, strict=False):  # a chain stops at its first accepted answer
                self._record_call(messages, seed, text, context)
        return answers

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [record for record in self.records if record["kind"] == kind]


def _chain(
    backend: LLMBackend, messages: Messages, seeds: list[int], known: dict[int, str], accept: Callable[[str], bool]
) -> list[str]:
    """The answers to ``messages`` under ``seeds`` in turn until ``accept`` takes one (``known``: already given)."""
    texts = []
    for seed in seeds:
        texts.append(known[seed] if seed in known else backend.complete(messages, seed))
        if accept(texts[-1]):
            break
    return texts
