"""Tolerant JSON parsing of what a language model writes: code fences, chatter, single quotes, trailing commas.

Small models wrap their JSON in prose or Markdown, use Python literals or stop mid-object; the
first object that can be repaired is taken, and a cut-off object still yields the fields it
completed (the prompts ask for the short field first for that reason).
"""

import ast
import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_FIELD = re.compile(r"""["']?(\w+)["']?\s*:\s*("(?:[^"\\]|\\.)*"|'[^']*'|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\w+)""")


def _objects(text: str) -> list[str]:
    """Balanced ``{...}`` spans of ``text``, outermost first, and an unclosed last one (cut off)."""
    spans, depth, start, quote = [], 0, None, None
    for i, char in enumerate(text):
        if quote:
            if char == quote and text[i - 1] != "\\":
                quote = None
        elif char in "\"'" and depth:
            quote = char
        elif char == "{":
            start = i if depth == 0 else start
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    if depth and start is not None:
        spans.append(text[start:])
    return spans


def _load(candidate: str) -> Any:
    candidate = _TRAILING_COMMA.sub(r"\1", candidate.strip())
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        pass
    try:  # Python literals: single quotes, True/False/None
        return ast.literal_eval(candidate)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    fields = {}
    for key, raw in _FIELD.findall(candidate):  # a cut-off or otherwise broken object: its complete fields
        try:
            fields[key] = json.loads(raw)
        except json.JSONDecodeError:
            fields[key] = raw.strip("'\"")
    return fields or None


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` that can be read or repaired; ``ValueError`` quoting ``text`` otherwise."""
    for source in [*_FENCE.findall(text), text]:
        for candidate in _objects(source):
            value = _load(candidate)
            if isinstance(value, dict) and value:
                return value
    raise ValueError(f"no JSON object in the model's answer: {text[:200]!r}")
