from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import Trainer

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import GradientSmoothing, GradientSmoothingFactory

SCRIPT = Path(__file__).with_name("_two_process_run.py")


def _blocks(num=16, length=12):
    ids = torch.randint(0, 500, (num, length), generator=torch.Generator().manual_seed(0)).tolist()
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


# Four steps with a linear decay, so the wrapped optimizer's scheduler is exercised too.
RUN = {"max_steps": 4, "learning_rate": 1e-2, "lr_scheduler_type": "linear", "seed": 0}


def _train(args, model=None, **trainer_kwargs):
    model = model or tiny_causal_lm(num_layers=3)[0]
    trainer = Trainer(model=model, args=args, train_dataset=_blocks(), **trainer_kwargs)
    trainer.train()
    return model, trainer


def test_trainer_runs_the_wrapped_optimizer_with_its_scheduler(training_args):
    model, _ = tiny_causal_lm(num_layers=3)
    optimizer = GradientSmoothing(torch.optim.AdamW(model.parameters(), lr=1e-2), model, window=3)
    _, trainer = _train(training_args(**RUN), model, optimizers=(optimizer, None))
    assert isinstance(trainer.optimizer.optimizer, GradientSmoothing)  # accelerate's wrapper around ours
    assert trainer.optimizer.optimizer.base_optimizer.param_groups[0]["lr"] == pytest.approx(0.0)  # linear decay done
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert all(torch.isfinite(torch.tensor(losses)))


def test_the_factory_through_optimizer_cls_and_kwargs(training_args, tmp_path):
    plain, _ = _train(training_args(**RUN, output_dir=tmp_path / "plain"))  # Trainer's AdamW, no weight decay
    kwargs = {"base_kwargs": {"lr": 1e-2}, "window": 1}
    identity, trainer = _train(
        training_args(**RUN, output_dir=tmp_path / "identity"),
        optimizer_cls_and_kwargs=(GradientSmoothingFactory, kwargs),
    )
    assert isinstance(trainer.optimizer.optimizer, GradientSmoothing)
    for (name, expected), actual in zip(plain.state_dict().items(), identity.state_dict().values(), strict=True):
        torch.testing.assert_close(actual, expected, msg=name)
    kwargs["window"] = 3
    smoothed, _ = _train(
        training_args(**RUN, output_dir=tmp_path / "smoothed"),
        optimizer_cls_and_kwargs=(GradientSmoothingFactory, kwargs),
    )
    assert not torch.allclose(smoothed.model.layers[0].mlp.up_proj.weight, plain.model.layers[0].mlp.up_proj.weight)


@pytest.mark.slow
def test_two_cpu_processes_keep_identical_replicas(tmp_path, torchrun_two_processes):
    torchrun_two_processes(SCRIPT)
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert rank0["num_processes"] == 2 and rank0["optimizer"] == "GradientSmoothing"
    initial = dict(tiny_causal_lm(num_layers=3)[0].named_parameters())
    assert any(not torch.equal(p, initial[n]) for n, p in rank0["params"].items()), "training changed nothing"
    assert all(torch.equal(p, rank1["params"][n]) for n, p in rank0["params"].items())
