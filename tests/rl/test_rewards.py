import math

import pytest

from hf_ext.data import arithmetic_reward
from hf_ext.rl import checked_reward


def test_a_well_formed_reward_passes_through_unchanged():
    reward = checked_reward(arithmetic_reward)
    completions = [[{"role": "assistant", "content": "2 + 2 = 4."}], [{"role": "assistant", "content": "5"}]]
    assert reward(prompts=["a", "b"], completions=completions, completion_ids=[[1], [2]], answer=[4, 4]) == [1.0, 0.0]
    assert reward.__name__ == "arithmetic_reward"  # TRL logs rewards under the function's name


@pytest.mark.parametrize(
    "fn",
    [lambda completions: [1.0] * len(completions), lambda prompts, **kwargs: [1.0], lambda completions, /, **kw: [1.0]],
)
def test_a_signature_trl_cannot_call_is_rejected_at_wrap_time(fn):
    with pytest.raises(TypeError, match=r"must accept `completions` by keyword and `\*\*kwargs`"):
        checked_reward(fn)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "1.0"])
def test_non_finite_or_non_numeric_rewards_raise_naming_the_completion(bad):
    def flaky(completions, **kwargs):
        return [1.0, bad]

    with pytest.raises(ValueError, match=r"reward function 'flaky' returned .* for completion 1"):
        checked_reward(flaky)(completions=["a", "b"])


def test_none_means_not_applicable_and_is_allowed_but_the_count_must_match():
    def partial(completions, **kwargs):
        return [None, 0.5][: len(completions) - 1] if len(completions) == 3 else [None, 0.5]

    assert checked_reward(partial)(completions=["a", "b"]) == [None, 0.5]
    with pytest.raises(ValueError, match="returned 2 rewards for 3 completions"):
        checked_reward(partial)(completions=["a", "b", "c"])
