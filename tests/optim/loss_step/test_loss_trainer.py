"""The loss hand-off in the stock Trainer: same update as one process with the whole batch, under gradient
accumulation and on 2 processes, through ``optimizers=`` and ``optimizer_cls_and_kwargs=``."""

from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import Trainer

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import NGN, SPS, LossToOptimizerTrainer

SCRIPT = Path(__file__).with_name("_loss_handoff_run.py")
# 8 blocks: every step sees all of them, whatever the order, split or accumulation. sigma = 100 makes
# NGN's step size ~ 2 f / ||g||^2, so a loss handed off wrong (one micro-batch's, one process's) changes it.
RUN = {
    "max_steps": 2,
    "logging_steps": 1,
    "max_grad_norm": 0.0,
    "report_to": "none",
    "save_strategy": "no",
    "dataloader_pin_memory": False,
    "seed": 0,
}


def blocks() -> Dataset:
    lengths = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 500, (8, 12), generator=lengths).tolist()
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def _train(args, model=None, **trainer_kwargs):
    model = model or tiny_causal_lm()[0]
    trainer = LossToOptimizerTrainer(model=model, args=args, train_dataset=blocks(), **trainer_kwargs)
    trainer.train()
    step_sizes = [entry["step_size"] for entry in trainer.state.log_history if "step_size" in entry]
    return dict(model.named_parameters()), step_sizes


def _assert_same_update(a, b):
    (params_a, sizes_a), (params_b, sizes_b) = a, b
    assert len(sizes_a) == 2 and sizes_a == pytest.approx(sizes_b, rel=1e-5)
    for name, p in params_a.items():
        torch.testing.assert_close(p, params_b[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.fixture(scope="module")
def whole_batch(tmp_path_factory):
    from transformers import TrainingArguments

    args = TrainingArguments(
        output_dir=str(tmp_path_factory.mktemp("whole")), per_device_train_batch_size=8, use_cpu=True, **RUN
    )
    model, _ = tiny_causal_lm()
    optimizer = NGN(model.parameters(), lr=100.0)
    trainer = LossToOptimizerTrainer(model=model, args=args, train_dataset=blocks(), optimizers=(optimizer, None))
    trainer.train()
    return dict(model.named_parameters()), [e["step_size"] for e in trainer.state.log_history if "step_size" in e]


def test_gradient_accumulation_gives_the_whole_batch_update(whole_batch, training_args):
    model, _ = tiny_causal_lm()
    args = training_args(per_device_train_batch_size=2, gradient_accumulation_steps=4, **RUN)
    optimizer = NGN(model.parameters(), lr=100.0)
    _assert_same_update(_train(args, model, optimizers=(optimizer, None)), whole_batch)


def test_optimizer_cls_and_kwargs_gives_the_same_update(whole_batch, training_args):
    args = training_args(per_device_train_batch_size=8, **RUN)
    _assert_same_update(_train(args, optimizer_cls_and_kwargs=(NGN, {"lr": 100.0})), whole_batch)


def test_step_size_is_logged_and_a_loss_free_optimizer_is_refused(training_args):
    _, sizes = _train(training_args(**RUN), optimizer_cls_and_kwargs=(SPS, {"lr": 0.05}))
    assert sizes == [0.05, 0.025]  # the cap binds at a tiny lr, and follows the linear schedule
    with pytest.raises(TypeError, match="the optimizer must take the loss .* got AdamW; use the plain Trainer"):
        _train(training_args(**RUN))


def test_gradient_clipping_is_refused_at_construction(training_args):
    """Issue 72: the default ``max_grad_norm=1.0`` was accepted, so SPS sized its steps from clipped gradients."""
    model, _ = tiny_causal_lm()
    args = training_args(**RUN | {"max_grad_norm": 1.0})
    with pytest.raises(
        ValueError, match=r"^LossToOptimizerTrainer: `max_grad_norm` must be 0.0 \(no clipping\), got 1.0"
    ):
        LossToOptimizerTrainer(
            model=model, args=args, train_dataset=blocks(), optimizers=(SPS(model.parameters()), None)
        )


def test_the_plain_trainer_cannot_step_sps(training_args):
    model, _ = tiny_causal_lm()
    trainer = Trainer(
        model=model, args=training_args(**RUN), train_dataset=blocks(), optimizers=(SPS(model.parameters()), None)
    )
    with pytest.raises(RuntimeError, match=r"LossToOptimizerTrainer does it for the Trainer"):
        trainer.train()


@pytest.mark.slow
def test_two_processes_give_the_single_process_whole_batch_update(whole_batch, tmp_path, torchrun_two_processes):
    torchrun_two_processes(SCRIPT)
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert rank0["num_processes"] == 2
    _assert_same_update((rank0["params"], rank0["step_sizes"]), whole_batch)
    assert all(torch.equal(p, rank1["params"][n]) for n, p in rank0["params"].items())
