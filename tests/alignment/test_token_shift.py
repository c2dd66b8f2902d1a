import json

import pytest
import torch

from hf_ext.alignment import TokenShift, token_shift, write_report
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
    reference = [torch.zeros(60), torch.zeros(40)]
    policy = [torch.tensor([10.0] + [0.1] * 59), torch.full((40,), 0.1)]
    shift = TokenShift(
        reference_logps={"chosen": reference}, policy_logps={"chosen": policy}, tokens={"chosen": ["big"] + ["x"] * 99}
    )
    assert shift.top_share("chosen", 0.01) == pytest.approx(10 / 19.9)
    assert shift.outliers("chosen", 1) == [{"token": "big", "delta": 10.0}]
    summary = shift.summary()["chosen"]
    assert summary["num_tokens"] == 100
    assert summary["mean_logps_policy"] == pytest.approx(((10 + 5.9) / 60 + 0.1) / 2)


def test_log_p_is_the_pairs_total_length_normalized_probability():
    chosen, rejected = [torch.log(torch.tensor([0.5, 0.5]))], [torch.log(torch.tensor([0.2, 0.05]))]
    shift = TokenShift(
        reference_logps={"chosen": chosen, "rejected": rejected},
        policy_logps={"chosen": rejected, "rejected": rejected},
        tokens={"chosen": ["a", "b"], "rejected": ["c", "d"]},
    )
    # P = exp(mean log-prob chosen) + exp(mean log-prob rejected) = 0.5 + sqrt(0.2 * 0.05)
    assert shift.log_total_probability("reference").item() == pytest.approx(torch.log(torch.tensor(0.6)).item())
    assert shift.summary()["log_p"]["policy"] == pytest.approx(torch.log(torch.tensor(0.2)).item())


def test_report_writes_each_named_shift_as_json_and_one_histogram(tmp_path):
    shift = TokenShift(
        reference_logps={"chosen": [torch.zeros(3)]},
        policy_logps={"chosen": [torch.ones(3)]},
        tokens={"chosen": list("abc")},
    )
    summaries = write_report({"dpo": shift, "regularized": shift}, tmp_path / "report", "title")
    assert json.loads((tmp_path / "report" / "token_shift.json").read_text()) == summaries
    assert summaries["dpo"]["chosen"]["mean_token_delta"] == 1.0 and set(summaries) == {"dpo", "regularized"}
    assert (tmp_path / "report" / "token_shift.png").stat().st_size > 1000


def test_dataset_without_pairs_is_rejected():
    model, tokenizer = tiny_causal_lm()
    with pytest.raises(ValueError, match=r"lacks columns \['chosen', 'rejected'\]"):
        token_shift(model, model, preference_dataset(2).remove_columns(["chosen", "rejected"]), tokenizer)
