import math
from pathlib import Path

import pytest
import torch
from transformers import Trainer

from hf_ext.data import volume_segmentation
from hf_ext.data.volumes import class_names
from hf_ext.models.rep3d import DiceMetrics, Rep3DConfig, Rep3DConv, Rep3DForSegmentation, argmax_logits

SCRIPT = Path(__file__).with_name("_two_process_run.py")
TINY = {"hidden_sizes": [4, 8], "depths": [1, 1], "kernel_sizes": [7, 3], "decoder_hidden_size": 8, "num_labels": 4}


def _trainer(training_args, **overrides) -> Trainer:
    torch.manual_seed(0)
    data = volume_segmentation(num_train=8, num_validation=4, size=16)
    args = training_args(**{"max_steps": 3, "learning_rate": 1e-2, "per_device_eval_batch_size": 2} | overrides)
    return Trainer(
        model=Rep3DForSegmentation(Rep3DConfig(**TINY)),
        args=args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        compute_metrics=DiceMetrics(class_names(4)),
        preprocess_logits_for_metrics=argmax_logits,
    )


def test_the_stock_trainer_trains_the_kernels_and_the_modulation_net(training_args):
    trainer = _trainer(training_args)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    result = trainer.train()
    assert math.isfinite(result.training_loss)
    changed = {name for name, p in trainer.model.named_parameters() if not torch.equal(p, before[name])}
    assert "rep3d.stages.0.blocks.0.mixer.conv.weight" in changed
    assert "rep3d.stages.0.blocks.0.mixer.modulation.out.weight" in changed
    metrics = trainer.evaluate()
    assert {"eval_dice_background", "eval_dice_liver", "eval_dice_kidney", "eval_dice_lesion"} <= metrics.keys()
    assert 0 <= metrics["eval_mean_dice"] <= 1 and 0 < metrics["eval_dice_background"] <= 1
    assert math.isfinite(metrics["eval_loss"])


def test_gradient_accumulation_matches_one_larger_batch(training_args):
    """The loss is a batch mean: the Trainer must divide it by the accumulation steps, not expect it normalised by
    ``num_items_in_batch`` (which it did while ``forward`` took ``**kwargs``: gradients 2x too large here)."""
    trained = {}
    for batch, steps in ((2, 1), (1, 2)):
        trainer = _trainer(
            training_args,
            max_steps=1,
            optim="sgd",
            learning_rate=0.1,
            max_grad_norm=0.0,  # clipping would hide a scaled gradient
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=steps,
        )
        trainer.model.config.dice_weight = 0.0  # cross-entropy: a mean over equally sized volumes
        trainer.train()
        trained[steps] = trainer.model.state_dict()
    for name, tensor in trained[1].items():
        torch.testing.assert_close(trained[2][name], tensor, rtol=1e-4, atol=1e-6, msg=name)


def test_the_trainer_trains_with_activation_checkpointing(training_args):
    trainer = _trainer(training_args, max_steps=2, activation_checkpointing=True)
    result = trainer.train()
    assert trainer.model.is_activation_checkpointing and math.isfinite(result.training_loss)


def test_dice_metrics_average_the_foreground_and_skip_absent_classes():
    from transformers import EvalPrediction

    predictions = torch.tensor([[0, 1, 1, 0]])
    labels = torch.tensor([[0, 1, 0, 0]])
    metrics = DiceMetrics(["background", "a", "b"])(EvalPrediction(predictions.numpy(), labels.numpy()))
    assert metrics["dice_background"] == pytest.approx(2 * 2 / 5)
    assert metrics["dice_a"] == pytest.approx(2 / 3) and math.isnan(metrics["dice_b"])
    assert metrics["mean_dice"] == pytest.approx(2 / 3)


def test_a_trainer_checkpoint_holds_the_modulation_net(training_args, tmp_path):
    trainer = _trainer(training_args, max_steps=1, save_strategy="steps", save_steps=1, output_dir=tmp_path / "run")
    trainer.train()
    reloaded = Rep3DForSegmentation.from_pretrained(tmp_path / "run" / "checkpoint-1")
    for name, p in trainer.model.state_dict().items():
        assert torch.equal(p, reloaded.state_dict()[name]), name
    assert any(isinstance(m, Rep3DConv) and m.mask_mode == "learned" for m in reloaded.modules())


@pytest.mark.slow
def test_two_cpu_processes_keep_identical_replicas(tmp_path, torchrun_two_processes):
    torchrun_two_processes(SCRIPT)
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert rank0["num_processes"] == 2
    assert 0 <= rank0["metrics"]["eval_mean_dice"] <= 1 and rank0["metrics"] == rank1["metrics"]
    modulation = rank0["params"]["rep3d.stages.0.blocks.0.mixer.modulation.out.weight"]
    assert not torch.equal(modulation, torch.zeros(4, 8, 3, 3, 3))
    assert all(torch.equal(p, rank1["params"][n]) for n, p in rank0["params"].items())
