import pytest

from hf_ext.data import arithmetic_dataset, arithmetic_reward, extract_final_number, final_number_format_reward


def test_same_seed_gives_the_same_dataset_and_other_seeds_differ():
    assert arithmetic_dataset(20, seed=1).to_dict() == arithmetic_dataset(20, seed=1).to_dict()
    assert arithmetic_dataset(20, seed=1)["question"] != arithmetic_dataset(20, seed=2)["question"]


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4])
def test_answers_are_the_value_of_the_expression(difficulty):
    ds = arithmetic_dataset(50, difficulty=difficulty)
    for row in ds:
        assert row["answer"] == eval(row["expression"])
        assert row["expression"] in row["prompt"][0]["content"]
        assert row["prompt"][0]["role"] == "user" and row["completion"][0]["role"] == "assistant"
        assert extract_final_number(row["completion"][0]["content"]) == row["answer"]
    max_operand = max(int(tok) for expr in ds["expression"] for tok in expr.split() if tok.isdigit())
    assert max_operand < 10**difficulty


@pytest.mark.parametrize(("kwargs", "field"), [({"difficulty": 0}, "difficulty"), ({"difficulty": 5}, "difficulty")])
def test_bad_arguments_name_the_field_and_range(kwargs, field):
    with pytest.raises(ValueError, match=rf"`{field}` must be an integer in 1\.\.4"):
        arithmetic_dataset(4, **kwargs)
    with pytest.raises(ValueError, match="`num_examples`"):
        arithmetic_dataset(0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the answer is -12.", -12),
        ("12, no wait, 13", 13),
        ("7 + 5 = 12", 12),
        ("5-3=2", 2),
        ("It totals 1,234 apples", 1234),
        ("x = \u22125", -5),
        ("3.0", 3),
        ("about 2.5", 2.5),
        ("answer: 42<|im_end|>", 42),
        ("no digits here", None),
        ("", None),
    ],
)
def test_final_number_parser(text, expected):
    assert extract_final_number(text) == expected


def test_reward_accepts_plain_and_conversational_completions():
    completions = ["The answer is 7.", [{"role": "assistant", "content": "so it is -3"}], "8, no, 9", "none"]
    assert arithmetic_reward(completions, answer=[7, -3, 8, 1], prompts=["unused"] * 4) == [1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="2 completions but 1 answers"):
        arithmetic_reward(["1", "2"], answer=[1])


@pytest.mark.parametrize(
    ("text", "reward"),
    [
        ("3 + 4 = 7.", 1.0),
        ("The answer is **-12**", 1.0),
        ("1,234\n", 1.0),
        ("7 is the answer.", 0.0),
        ("", 0.0),
        ("I think 5, or maybe not", 0.0),
    ],
)
def test_format_reward_wants_the_reply_to_end_on_the_number(text, reward):
    assert final_number_format_reward([[{"role": "assistant", "content": text}]], answer=[0]) == [reward]
