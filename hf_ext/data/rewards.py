"""Verifiable rewards for the arithmetic task: does the final number match, and does the reply end on it?"""

import re
from collections.abc import Sequence
from typing import Any

# A number not glued to a preceding word character or dot: "-12", "1,234", "3.0".
# A minus counts as a sign only when it does not follow a digit ("5-3" is a subtraction).
_NUMBER = re.compile(r"(?<![\w.])(?:(?<!\d)[-\u2212])?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def extract_final_number(text: str) -> float | None:
    """The last number written in ``text``, or None if there is none.

    "the answer is -12." gives -12, "12, no wait, 13" gives 13, "1,234" gives 1234.
    """
    matches = _NUMBER.findall(text)
    if not matches:
        return None
    return float(matches[-1].replace("\u2212", "-").replace(",", ""))


def _completion_text(completion: str | Sequence[dict[str, Any]]) -> str:
    """Text of a plain or conversational (list of messages) completion."""
    if isinstance(completion, str):
        return completion
    return "".join(message["content"] for message in completion)


def arithmetic_reward(
    completions: Sequence[str | Sequence[dict[str, Any]]], answer: Sequence[int], **kwargs: Any
) -> list[float]:
    """1.0 where a completion's final number equals ``answer``, else 0.0 (TRL reward signature).

    TRL passes the dataset's ``answer`` column as a keyword argument; other columns are ignored.
    """
    if len(completions) != len(answer):
        raise ValueError(f"got {len(completions)} completions but {len(answer)} answers")
    rewards = []
    for completion, expected in zip(completions, answer, strict=True):
        value = extract_final_number(_completion_text(completion))
        rewards.append(float(value is not None and value == expected))
    return rewards


# The instruction asks to end on the final number: allow closing punctuation and whitespace after it.
_ENDS_ON_NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?[.!)*\s]*$")


def final_number_format_reward(completions: Sequence[str | Sequence[dict[str, Any]]], **kwargs: Any) -> list[float]:
    """1.0 where a completion ends on a number as the prompt instructs ("... = 7." or "**7**"), else 0.0.

    A format signal to add to :func:`arithmetic_reward` with a small weight (TRL's ``reward_weights``).
    """
    return [float(bool(_ENDS_ON_NUMBER.search(_completion_text(completion)))) for completion in completions]
