"""Reward functions checked against TRL's contract: at construction for the signature, at each call for the values.

GRPO turns rewards into advantages; one NaN or inf reward silently poisons a whole group's
update. ``checked_reward`` fails loudly instead, naming the function and the bad value.
"""

import functools
import inspect
import math
from collections.abc import Callable
from numbers import Real


def checked_reward(fn: Callable) -> Callable:
    """Wrap a reward function for ``trl.GRPOTrainer(reward_funcs=...)`` so that contract breaches raise.

    TRL calls ``fn(prompts=..., completions=..., completion_ids=..., **dataset_columns)`` and expects
    one float (or None, "not applicable") per completion.
    """
    name = getattr(fn, "__name__", repr(fn))
    parameters = inspect.signature(fn).parameters.values()
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    takes_completions = any(
        p.name == "completions" and p.kind is not inspect.Parameter.POSITIONAL_ONLY for p in parameters
    )
    if not (takes_kwargs and takes_completions):
        raise TypeError(
            f"reward function {name!r} must accept `completions` by keyword and `**kwargs` (TRL passes prompts, "
            f"completion_ids and the dataset's columns too), got {name}{inspect.signature(fn)}"
        )

    @functools.wraps(fn)
    def wrapper(*args, completions, **kwargs):
        rewards = fn(*args, completions=completions, **kwargs)
        if len(rewards) != len(completions):
            raise ValueError(
                f"reward function {name!r} returned {len(rewards)} rewards for {len(completions)} completions"
            )
        for index, reward in enumerate(rewards):
            if reward is not None and not (isinstance(reward, Real) and math.isfinite(reward)):
                raise ValueError(
                    f"reward function {name!r} returned {reward!r} for completion {index}; rewards must be finite "
                    "numbers or None"
                )
        return rewards

    return wrapper
