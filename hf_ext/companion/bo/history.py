"""A BO run's history on disk: JSON lines, one evaluation each, appended the moment it is made.

Lines are in the order evaluations finished, which in batch and asynchronous runs is not the order their
points were proposed: each line's ``round`` is its position in the file, ``query`` the proposal's number.

An append-only file written by a process that can be killed may end in a torn line (part of a
line, no newline): that line is dropped with a warning and cut from the file, so the run resumes
from every complete evaluation. Any other bad line means the file is not what the loop wrote,
and is an error naming the file, the line and what is wrong with it.
"""

import json
import os
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any


@dataclass
class Evaluation:
    """One evaluation: the query (in the objective's units), what was observed, and the true value.

    ``round`` is the evaluation's position in the history (the order evaluations finished), ``query`` the
    number of the proposal that chose ``x`` (proposals are numbered as they are made; the same as ``round`` in
    a sequential run). ``model_factory_state`` is the model factory's ``state_dict()`` after the fit that
    proposed it (``None`` for a factory without one): what a resumed run loads to fit as the uninterrupted one
    would. ``failed`` says why an evaluation never returned (its worker died on every retry); such an
    evaluation has no values (``observed`` and ``true`` are ``None``) and no model sees it. Histories
    written before these keys have none of them (``query`` is then the round).
    """

    round: int
    x: list[float]
    observed: float | None
    true: float | None
    corrupted: bool
    model_factory_state: dict[str, Any] | None = None
    query: int | None = None
    failed: str | None = None

    def __post_init__(self):
        if self.query is None:
            self.query = self.round


_KEYS = [f.name for f in fields(Evaluation)]
_OPTIONAL_KEYS = {"model_factory_state", "query", "failed"}


def _decode(line: bytes) -> Any:
    return json.loads(line.decode())


def _evaluation(record: Any, expected_round: int, dim: int) -> Evaluation:
    """The evaluation ``record`` holds, or ``ValueError`` saying what is wrong with it."""
    if not isinstance(record, dict) or not set(_KEYS) - _OPTIONAL_KEYS <= set(record) <= set(_KEYS):
        keys = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise ValueError(f"expected a JSON object with keys {_KEYS} ({sorted(_OPTIONAL_KEYS)} optional), got {keys}")
    if record["round"] != expected_round:
        raise ValueError(f"holds round {record['round']!r} where round {expected_round} belongs")
    if not isinstance(record["x"], list) or len(record["x"]) != dim:
        raise ValueError(f"`x` must be a list of {dim} coordinates (the dimension of `bounds`), got {record['x']!r}")
    return Evaluation(**record)


def read_json_lines(path: Path) -> list[tuple[int, Any]]:
    """``(line number, record)`` of every record in the append-only JSON-lines file ``path`` (none if absent).

    A torn last line is dropped with a warning and cut from the file (see the module docstring);
    any other line that is not JSON is an error naming the file and the line.
    """
    if not path.is_file():
        return []
    data = path.read_bytes()
    head, newline, tail = data.rpartition(b"\n")
    lines = head.split(b"\n") if newline else []
    if tail.strip():
        try:
            _decode(tail)
        except ValueError as error:
            warnings.warn(
                f"{path}, line {len(lines) + 1}: dropped a torn last line (no newline, not valid JSON: {error}); "
                "its writer was killed mid-write, the run resumes from the lines before it",
                stacklevel=4,
            )
            os.truncate(path, len(head) + len(newline))
        else:  # complete but unterminated: end it, so that the next record starts a line of its own
            with path.open("ab") as handle:
                handle.write(b"\n")
            lines.append(tail)
    records = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                records.append((number, _decode(line)))
            except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                raise ValueError(f"{path}, line {number}: {error}") from error
    return records


def read_history(path: Path, dim: int) -> list[Evaluation]:
    """The evaluations in ``path`` (none if it does not exist), in the order they finished; see the module docstring."""
    history: list[Evaluation] = []
    queries: set[int] = set()
    for number, record in read_json_lines(path):
        try:
            evaluation = _evaluation(record, len(history), dim)
            if evaluation.query in queries:
                raise ValueError(f"holds query {evaluation.query} a second time")
        except ValueError as error:
            raise ValueError(f"{path}, line {number}: {error}") from error
        queries.add(evaluation.query)
        history.append(evaluation)
    return history


def append_evaluation(path: Path, evaluation: Evaluation) -> None:
    """Append ``evaluation`` to the history at ``path`` as one line (creating the file and its folders)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(asdict(evaluation)) + "\n")
