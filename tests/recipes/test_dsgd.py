import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hf_ext.recipes import recipes_dir, shipped_config
from hf_ext.recipes.dsgd import DSGDArguments, logistic_problem, main, parser


def _flags(tmp_path, *extra):
    return ["--config", str(shipped_config("dsgd_quick")), "--output_dir", str(tmp_path), *extra]


def test_the_logistic_optimum_is_exact():
    problem = logistic_problem(0, 1, DSGDArguments())
    model = problem.make_model(0)
    assert problem.evaluate(model)["error"] > 0.1  # from zero
    # one process holds all the data: the loss gradient at the recorded optimum vanishes
    optimum = torch.zeros(31, dtype=torch.float64, requires_grad=True)
    features, targets = problem.features, problem.targets
    for _ in range(30):
        loss = torch.nn.functional.softplus(-targets * (features @ optimum)).mean() + 0.05 * optimum.square().sum()
        (gradient,) = torch.autograd.grad(loss, optimum)
        hessian = torch.autograd.functional.hessian(
            lambda w: torch.nn.functional.softplus(-targets * (features @ w)).mean() + 0.05 * w.square().sum(),
            optimum.detach(),
        )
        optimum = (optimum - torch.linalg.solve(hessian, gradient)).detach().requires_grad_()
    with torch.no_grad():
        model.weight.copy_(optimum[None])
    assert problem.evaluate(model)["error"] < 1e-20


def test_heterogeneous_shards_hold_different_labels():
    first, last = (logistic_problem(rank, 4, DSGDArguments()) for rank in (0, 3))
    assert set(first.targets.tolist()) == {-1.0} and set(last.targets.tolist()) == {1.0}
    assert len(first.targets) == len(last.targets) == 569 // 4


@pytest.mark.parametrize("problem", ["logreg", "mlp"])
def test_quick_run_end_to_end(tmp_path, problem):
    results = main(_flags(tmp_path, "--problem", problem, "--topologies", "ring", "complete"))
    assert list(results["topologies"]) == ["ring", "complete", "ddp"]
    for summary in results["topologies"].values():
        assert len(summary["final_errors"]) == 2 and summary["error_q50"] <= summary["error_q95"]
    # one process: gossip is the identity and every variant is the same SGD run, bit for bit
    assert results["topologies"]["ring"]["final_errors"] == results["topologies"]["ddp"]["final_errors"]
    assert json.loads((tmp_path / "results.json").read_text())["processes"] == 1
    rows = list(csv.DictReader((tmp_path / "curves.csv").open()))
    assert {row["topology"] for row in rows} == {"ring", "complete", "ddp"} and rows[0]["step"] == "0"
    assert (tmp_path / "error.png").stat().st_size > 1000


def test_what_each_run_sets_is_not_a_training_setting(tmp_path):
    """Issue 38: TrainingArguments' seed and logging_steps were parsed, then replaced in every run."""
    _, training_args = parser().parse_args_and_config(_flags(tmp_path))
    settings = {field.name for field in dataclasses.fields(training_args) if field.init}
    assert not {"seed", "logging_steps"} & settings
    assert {"learning_rate", "max_steps", "per_device_train_batch_size"} <= settings


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--problem", "svm"], r"`problem` must be one of \['logreg', 'mlp', 'lm'\]"),
        (["--topologies", "star"], "`topologies` must be a non-empty subset of"),
        (["--order", "both"], r"`order` must be one of \['atc', 'cta'\]"),
        (["--l2", "0"], "`l2` must be > 0"),
    ],
)
def test_bad_arguments_name_the_field(tmp_path, flags, message):
    with pytest.raises(ValueError, match=message):
        parser().parse_args_and_config(_flags(tmp_path, *flags))


@pytest.mark.slow
def test_quick_run_on_two_processes_skips_the_torus(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    recipe = recipes_dir() / "dsgd.py"
    command = [str(torchrun), "--standalone", "--nproc_per_node=2", str(recipe), *_flags(tmp_path)]
    result = subprocess.run(
        [*command, "--topologies", "ring", "torus"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("ring: final error") == 1
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["processes"] == 2 and [s["topology"] for s in results["skipped"]] == ["torus"]
    ring = results["topologies"]["ring"]
    assert ring["consensus_distance_mean"] > 0 and ring["spectral_gap"] == pytest.approx(2 / 3)
    assert ring["bytes_per_step"] == 31 * 8  # the 31 float64 weights to the one neighbour
