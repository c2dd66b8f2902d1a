"""A run's transcript: every LLM call, answer, label and evaluation as JSON lines, for audit and for resuming.

Each record has a ``key``. LLM calls are keyed by their prompt and seed, so a run restarted on
its transcript replays deterministically and takes every answer already given from the file
instead of asking the model again; records already present are not written twice. A torn last
line (a killed writer) is dropped with a warning, as in a BO history.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

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
            response = backend.complete(messages, seed)
            self.llm_calls += 1
            self.record(key, "llm", messages=messages, seed=seed, response=response, **context)
        return self._by_key[key]["response"]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [record for record in self.records if record["kind"] == kind]
