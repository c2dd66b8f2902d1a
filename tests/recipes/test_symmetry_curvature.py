import csv
import json

import pytest
import torch

from hf_ext.recipes import shipped_config
from hf_ext.recipes.symmetry_curvature import (
    SymmetryCurvatureArguments,
    agreement,
    estimates,
    main,
    parser,
)


def _flags(tmp_path, *extra, config="symmetry_curvature"):
    return ["--config", str(shipped_config(config)), "--output_dir", str(tmp_path), *extra]


def test_the_shipped_config_parses_and_the_quick_one_shrinks_it(tmp_path):
    script_args, training_args = parser().parse_args_and_config(_flags(tmp_path))
    assert len(script_args.seeds) == 3 and "permutation:identity" in script_args.accuracy_groups
    assert training_args.lr_scheduler_type == "constant"
    quick, _ = parser().parse_args_and_config(_flags(tmp_path, "--lm_steps", "2", config="symmetry_curvature_quick"))
    assert quick.seeds == [0] and quick.lm_steps == 2  # a setting given with the quick config wins


def test_agreement_is_one_for_a_multiple_and_scale_free():
    exact = torch.diag(torch.tensor([3.0, 1.0, -1.0], dtype=torch.float64))
    directions = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)).double()
    same = agreement(2.0 * exact, exact, directions, directions[:, :2])
    assert same["cosine"] == pytest.approx(1.0) and same["action_cosine"] == pytest.approx(1.0)
    assert same["secant_cosine"] == pytest.approx(1.0)
    assert same["relative_error"] == pytest.approx(0.0, abs=1e-12)
    secant = torch.tensor([[1.0], [0.0], [1.0]], dtype=torch.float64)  # H s = (3, 0, -1): cos with s is 2 / (2 10)^0.5
    identity = agreement(torch.eye(3, dtype=torch.float64), exact, directions, secant)
    assert identity["secant_cosine"] == pytest.approx(2 / 20**0.5)
    assert identity["cosine"] == pytest.approx(3 / (3**0.5 * 11**0.5))  # <I, H> / (|I| |H|)
    assert identity["relative_error"] == pytest.approx((1 - identity["cosine"] ** 2) ** 0.5)


def test_estimates_have_the_stated_storage_and_kronecker_baselines():
    gradients = [torch.randn(3, 4, generator=torch.Generator().manual_seed(s)).double() for s in range(5)]
    kfac = (torch.eye(3, dtype=torch.float64), 2 * torch.eye(4, dtype=torch.float64))
    out = estimates(gradients, kfac, ["permutation:identity", "scaling:scaling"])
    full = sum(torch.outer(g.flatten(), g.flatten()) for g in gradients) / 5
    torch.testing.assert_close(out["full"][0], full)
    torch.testing.assert_close(out["kfac_style"][0], 2 * torch.eye(12, dtype=torch.float64))
    torch.testing.assert_close(out["scaling:scaling"][0], torch.diag(full.diagonal()))
    assert {k: v[1] for k, v in out.items()} == {
        "full": 78,
        "kfac_style": 16,
        "shampoo_style": 16,
        "permutation:identity": 20,
        "scaling:scaling": 12,
    }


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("accuracy_groups", ["identity:identity"], "`accuracy_groups` entries must be 'rows:cols'"),
        ("accuracy_groups", ["rotation"], "`accuracy_groups` entries must be 'rows:cols'"),
        ("mlp_lrs", [0.0], "`mlp_lrs` must be a non-empty list of numbers > 0"),
        ("lm_lrs", [], "`lm_lrs` must be a non-empty list of numbers > 0"),
        ("gradient_batches", 1, "`gradient_batches` must be >= 2"),
    ],
)
def test_bad_arguments_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        SymmetryCurvatureArguments(**{field: value})


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path):
    results = main(_flags(tmp_path, config="symmetry_curvature_quick"))
    estimates_seen = {entry["estimate"] for entry in results["accuracy"]}
    assert estimates_seen == {
        "full",
        "kfac_style",
        "shampoo_style",
        "permutation:identity",
        "orthogonal:identity",
        "scaling:scaling",
    }
    assert {entry["model"] for entry in results["accuracy"]} == {"mlp_digits", "tiny_llama"}
    for entry in results["accuracy"]:
        assert -1 <= entry["cosine"] <= 1 and -1 <= entry["secant_cosine"] <= 1 and entry["relative_error"] >= 0
    for table in results["training"].values():
        assert set(table) == {"adamw", "symmetry", "shampoo_style", "muon"}
        assert table["adamw"]["step_time_vs_adamw"] == 1.0
        assert all(row["final_loss"] > 0 for row in table.values())
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["training"]["mlp_digits"]["symmetry"]["lr"] == results["training"]["mlp_digits"]["symmetry"]["lr"]
    with (tmp_path / "training.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 8  # 2 tasks x 4 optimizers x 1 seed
    assert (tmp_path / "tradeoff.png").stat().st_size > 0 and (tmp_path / "training.png").stat().st_size > 0
