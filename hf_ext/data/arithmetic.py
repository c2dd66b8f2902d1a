"""Verifiable arithmetic: chat prompts with integer answers, at a chosen difficulty.

Rows are in TRL's conversational prompt-completion format (``prompt`` and ``completion`` are
lists of chat messages), so SFT, GRPO and evaluation read the same dataset; ``answer`` holds
the integer that :func:`hf_ext.data.arithmetic_reward` checks completions against.
"""

import random

from datasets import Dataset

MAX_DIFFICULTY = 4

_QUESTION_TEMPLATES = (
    "What is {expr}?",
    "Compute {expr}.",
    "Calculate {expr} and give the result.",
    "Solve: {expr} = ?",
)
INSTRUCTION = "End your reply with the final number."


def _operands_and_ops(rng: random.Random, difficulty: int) -> tuple[list[int], list[str]]:
    """Difficulty d: operands of up to d digits; '*' from d >= 2; three operands from d >= 3."""
    high = 10**difficulty - 1
    count = 3 if difficulty >= 3 else 2
    ops = ["+", "-", "*"] if difficulty >= 2 else ["+", "-"]
    operands = [rng.randint(0, high) for _ in range(count)]
    chosen_ops = [rng.choice(ops) for _ in range(count - 1)]
    if "*" in chosen_ops:  # keep products in a range a small model can still learn
        small = 10 ** max(1, difficulty - 1) - 1
        operands = [min(x, small) if i > 0 else x for i, x in enumerate(operands)]
    return operands, chosen_ops


def make_problem(rng: random.Random, difficulty: int) -> tuple[str, int]:
    """One expression (e.g. ``"12 + 7 * 3"``) and its integer value under Python precedence."""
    operands, ops = _operands_and_ops(rng, difficulty)
    expr = str(operands[0])
    for op, x in zip(ops, operands[1:], strict=True):
        expr += f" {op} {x}"
    return expr, eval(expr)  # noqa: S307 - digits and + - * only, built just above


def _check(name: str, value: int, low: int, high: int | None = None) -> None:
    if value < low or (high is not None and value > high):
        allowed = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"`{name}` must be an integer in {allowed}, got {value}")


def arithmetic_dataset(num_examples: int, difficulty: int = 1, seed: int = 0) -> Dataset:
    """``num_examples`` problems with columns prompt, completion, answer, question, expression.

    Deterministic for a given (num_examples, difficulty, seed).
    """
    _check("num_examples", num_examples, 1)
    _check("difficulty", difficulty, 1, MAX_DIFFICULTY)
    rng = random.Random(f"arithmetic-{difficulty}-{seed}")
    rows = {"prompt": [], "completion": [], "answer": [], "question": [], "expression": []}
    for _ in range(num_examples):
        expr, answer = make_problem(rng, difficulty)
        question = f"{rng.choice(_QUESTION_TEMPLATES).format(expr=expr)} {INSTRUCTION}"
        rows["prompt"].append([{"role": "user", "content": question}])
        rows["completion"].append([{"role": "assistant", "content": f"{expr} = {answer}. The answer is {answer}."}])
        rows["answer"].append(answer)
        rows["question"].append(question)
        rows["expression"].append(expr)
    return Dataset.from_dict(rows)
