import pytest

from hf_ext.companion.bo.lilo import parse_json_object


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"choice": "A", "reason": "safer"}', {"choice": "A", "reason": "safer"}),
        (
            'Sure! Here is my answer:\n```json\n{"choice": "B", "reason": "cheaper"}\n```\nHope it helps.',
            {"choice": "B", "reason": "cheaper"},
        ),
        ("{'choice': 'A', 'reason': 'more speed',}", {"choice": "A", "reason": "more speed"}),
        (
            'The answer is {"choice": "B", "reason": "it has {more} accuracy"} because...',
            {"choice": "B", "reason": "it has {more} accuracy"},
        ),
        ('{"choice": "A", "reason": "option A is safer and the decision maker said', {"choice": "A"}),  # cut off
        ('{"probability": 0.8, "reason": "ideal",\n}', {"probability": 0.8, "reason": "ideal"}),
        ('{"x": [0.1, 0.5, 0.9], "why": "explore"}', {"x": [0.1, 0.5, 0.9], "why": "explore"}),
        ('{"choice": A}', {"choice": "A"}),  # an unquoted value
        ('nothing here {} but then {"choice": "B"}', {"choice": "B"}),  # an empty object is skipped
    ],
)
def test_messy_model_output_is_repaired(text, expected):
    assert parse_json_object(text) == expected


@pytest.mark.parametrize("text", ["", "I prefer option A.", "{}", "[1, 2]", "{ , }"])
def test_text_without_an_object_is_an_error_quoting_it(text):
    with pytest.raises(ValueError, match="no JSON object in the model's answer"):
        parse_json_object(text)
