import json

import pytest

from hf_ext.models import tiny_causal_lm
from hf_ext.recipes.token_shift import main


def test_recipe_scores_a_saved_policy_against_its_reference(tmp_path):
    policy, tokenizer = tiny_causal_lm(seed=1)
    policy.save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    out = tmp_path / "report"
    summary = main(
        ["--policy", str(tmp_path / "policy"), "--reference", "tiny", "--num_pairs", "6", "--output_dir", str(out)]
    )
    assert summary["chosen"]["mean_logps_policy"] != summary["chosen"]["mean_logps_reference"]
    assert json.loads((out / "token_shift.json").read_text())["policy"]["log_p"] == summary["log_p"]
    assert (out / "token_shift.png").stat().st_size > 1000


def test_missing_checkpoint_names_the_field(tmp_path):
    with pytest.raises(ValueError, match="`policy` must be one of"):
        main(["--policy", str(tmp_path / "nowhere")])
