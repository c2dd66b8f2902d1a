"""Preference pairs from the arithmetic task: a correct answer over a plausible wrong one.

Chosen and rejected responses draw their wording independently from the same templates, so
length and phrasing carry no signal; only the number does.
"""

import random

from datasets import Dataset

from .arithmetic import INSTRUCTION, MAX_DIFFICULTY, _check, make_problem

_RESPONSE_TEMPLATES = (
    "{value}",
    "The answer is {value}.",
    "{expr} = {value}",
    "Let me work it out: {expr} equals {value}. So the final answer is {value}.",
    "Working step by step, evaluating {expr} from left to right with the usual precedence "
    "of multiplication over addition and subtraction gives {value}. Final answer: {value}",
)


def plausible_wrong_answer(rng: random.Random, answer: int) -> int:
    """A near miss of the kind a model makes: off by one or ten, digits swapped, sign flipped."""
    digits = str(abs(answer))
    candidates = [answer + 1, answer - 1, answer + 10, answer - 10, -answer]
    if len(digits) >= 2:
        swapped = digits[:-2] + digits[-1] + digits[-2]
        candidates.append(int(swapped) * (1 if answer >= 0 else -1))
    candidates = [c for c in candidates if c != answer]
    return rng.choice(candidates)


def preference_dataset(num_examples: int, difficulty: int = 1, seed: int = 0) -> Dataset:
    """Conversational preference pairs: columns prompt, chosen, rejected, answer, rejected_answer."""
    _check("num_examples", num_examples, 1)
    _check("difficulty", difficulty, 1, MAX_DIFFICULTY)
    rng = random.Random(f"preferences-{difficulty}-{seed}")
    rows = {"prompt": [], "chosen": [], "rejected": [], "answer": [], "rejected_answer": []}
    for _ in range(num_examples):
        expr, answer = make_problem(rng, difficulty)
        wrong = plausible_wrong_answer(rng, answer)
        chosen = rng.choice(_RESPONSE_TEMPLATES).format(expr=expr, value=answer)
        rejected = rng.choice(_RESPONSE_TEMPLATES).format(expr=expr, value=wrong)
        rows["prompt"].append([{"role": "user", "content": f"What is {expr}? {INSTRUCTION}"}])
        rows["chosen"].append([{"role": "assistant", "content": chosen}])
        rows["rejected"].append([{"role": "assistant", "content": rejected}])
        rows["answer"].append(answer)
        rows["rejected_answer"].append(wrong)
    return Dataset.from_dict(rows)
