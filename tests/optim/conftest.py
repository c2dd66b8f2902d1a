
import pytest
import torch
from datasets import Dataset
from transformers import Trainer


def _blocks():
    ids = torch.randint(0, 40, (16, 12), generator=torch.Generator().manual_seed(0)).tolist()
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def _losses(trainer):
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


@pytest.fixture
def trained_both_ways(training_args, tmp_path):
    """``(model_factory, optimizer_class, param_groups, lr) -> (losses, losses)``: six logged steps of the Trainer,
    given the optimizer built on the model (``optimizers=``) and given its class (``optimizer_cls_and_kwargs=``)."""

    def train(model_factory, optimizer_class, param_groups, lr):
        run = {"max_steps": 6, "learning_rate": lr, "logging_steps": 1, "seed": 0}
        model = model_factory()
        direct = Trainer(
            model=model,
            args=training_args(**run, output_dir=tmp_path / "a"),
            train_dataset=_blocks(),
            optimizers=(optimizer_class(model, lr=lr), None),
        )
        direct.train()
        model = model_factory()
        by_class = Trainer(
            model=model,
            args=training_args(**run, output_dir=tmp_path / "b"),
            train_dataset=_blocks(),
            optimizer_cls_and_kwargs=(optimizer_class, {"params": param_groups(model), "lr": lr}),
        )
        by_class.train()
        assert isinstance(by_class.optimizer.optimizer, optimizer_class)
        return _losses(direct), _losses(by_class)

    return train


@pytest.fixture
def compiled_and_eager():
    """``(build, steps=3) -> (eager, compiled)``: the parameters after ``steps`` steps of two copies from
    ``build() -> (model, optimizer, closure)``, one stepped as is and one through ``torch.compile(optimizer.step)``
    with ``error_on_recompile`` from its second step on (a recompile raises). Where every group's ``lr`` is a tensor
    (as torch's optimizers take it under ``torch.compile``), a ``LambdaLR`` scales it by ``1 / (1 + step)`` after
    each step. The ``aot_eager`` backend: dynamo's guards, graph breaks and recompiles are inductor's too, and it
    compiles in seconds on a CPU."""

    def run(build, steps=3):
        results = []
        for compiled in (False, True):
            torch._dynamo.reset()
            model, optimizer, closure = build()
            step = torch.compile(optimizer.step, backend="aot_eager") if compiled else optimizer.step
            tensor_lr = all(torch.is_tensor(group["lr"]) for group in optimizer.param_groups)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1 / (1 + k)) if tensor_lr else None
            for k in range(steps):
                with torch._dynamo.config.patch(error_on_recompile=k > 0):
                    step(closure)
                if scheduler is not None:
                    scheduler.step()
            results.append([p.detach().clone() for p in model.parameters()])
        torch._dynamo.reset()
        return results

    return run
