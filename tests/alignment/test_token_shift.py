import pytest
import torch

from hf_ext.alignment import TokenShift, token_shift
from hf_ext.data import preference_dataset
from hf_ext.models import tiny_causal_lm


def test_identical_models_shift_nothing_and_tokens_align_with_deltas():
    model, tokenizer = tiny_causal_lm(seed=0)
    shift = token_shift(model, model, preference_dataset(5), tokenizer, batch_size=2)
    for kind in ("chosen", "rejected"):
        assert shift.deltas[kind].numel() == len(shift.tokens[kind]) > 0
        assert torch.all(shift.deltas[kind] == 0)


def test_response_tokens_are_the_response_text():
    model, tokenizer = tiny_causal_lm(seed=0)
    other, _ = tiny_causal_lm(seed=1)
    data = preference_dataset(3)
    shift = token_shift(other, model, data, tokenizer)
    text = tokenizer.convert_tokens_to_string(shift.tokens["chosen"])
    assert all(row["chosen"][0]["content"] in text for row in data)
    assert not torch.all(shift.deltas["chosen"] == 0)


def test_shares_and_outliers_on_a_hand_made_shift():
    shift = TokenShift(deltas={"chosen": torch.tensor([10.0] + [0.1] * 99)}, tokens={"chosen": ["big"] + ["x"] * 99})
    assert shift.top_share("chosen", 0.01) == pytest.approx(10 / 19.9)
    assert shift.outliers("chosen", 1) == [{"token": "big", "delta": 10.0}]
    assert shift.summary()["chosen"]["num_tokens"] == 100


def test_dataset_without_pairs_is_rejected():
    model, tokenizer = tiny_causal_lm()
    with pytest.raises(ValueError, match=r"lacks columns \['chosen', 'rejected'\]"):
        token_shift(model, model, preference_dataset(2).remove_columns(["chosen", "rejected"]), tokenizer)
