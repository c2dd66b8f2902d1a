"""RegularizedDPO on the zoo: its loss is TRL's DPO loss plus the penalty on log P computed from a plain forward."""

import tempfile

import pytest
import torch
from trl import DPOConfig, DPOTrainer
from zoo_architectures import build
from zoo_matrix import MethodCheck

from hf_ext.alignment import RegularizedDPOConfig, RegularizedDPOTrainer, log_total_probability, mean_token_logprobs
from hf_ext.data import preference_dataset
from hf_ext.models import load_smollm2_tokenizer

SETTINGS = {
    "per_device_train_batch_size": 2,
    "max_steps": 1,
    "report_to": "none",
    "save_strategy": "no",
    "use_cpu": True,
    "bf16": False,
    "activation_checkpointing": False,
    "dataloader_pin_memory": False,
    "disable_tqdm": True,
}


def _trainer(cls, config_cls, architecture, output_dir, **extra):
    """A trainer on the zoo model; its reference differs from the policy, so log P and its anchor differ.

    A PEFT model gets no ``ref_model``: TRL keeps a copy of its adapter as the reference, and the policy's
    ``lora_B`` (zero at construction) is then moved, the same way in every trainer.
    """
    tokenizer = load_smollm2_tokenizer()
    model, _ = build(architecture, seed=0)
    reference = None if architecture == "lora_qwen2" else build(architecture, seed=1)[0]
    for seed, m in enumerate((model, reference)):
        if m is not None:
            with torch.random.fork_rng(devices=[]):  # the new rows are drawn: the same in every trainer
                torch.manual_seed(seed)
                m.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    args = config_cls(output_dir=str(output_dir), **SETTINGS, **extra)
    trainer = cls(
        model=model, ref_model=reference, args=args, train_dataset=preference_dataset(4), processing_class=tokenizer
    )
    if reference is None:
        generator = torch.Generator().manual_seed(2)
        with torch.no_grad():
            for name, param in trainer.model.named_parameters():
                if "lora_B.default" in name:
                    param.copy_(torch.randn(param.shape, generator=generator))
    return trainer


def _reference_log_p(trainer, batch):
    if trainer.ref_model is not None:
        return _log_p(trainer.ref_model, batch)
    with trainer.model.disable_adapter():  # the reference adapter is the policy's at construction: zero update
        return _log_p(trainer.model, batch)


def _log_p(model, batch):
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    means = mean_token_logprobs(logits, batch["input_ids"][:, 1:], batch["completion_mask"][:, 1:])
    return log_total_probability(*means.chunk(2))


def check(architecture: str) -> None:
    with tempfile.TemporaryDirectory() as output_dir:
        trainer = _trainer(RegularizedDPOTrainer, RegularizedDPOConfig, architecture, output_dir, regularizer_coef=2.0)
        plain = _trainer(DPOTrainer, DPOConfig, architecture, output_dir)
        batch = next(iter(plain.get_train_dataloader()))
        plain_loss = plain.compute_loss(plain.model, batch)
        loss = trainer.compute_loss(trainer.model, batch)
    log_p, log_p_ref = _log_p(trainer.model, batch), _reference_log_p(trainer, batch)
    logged = trainer._metrics["train"]
    assert logged["regularizer/log_p"][0] == pytest.approx(log_p.mean().item(), rel=1e-5)
    assert logged["regularizer/log_p_ref"][0] == pytest.approx(log_p_ref.mean().item(), rel=1e-5)
    # log P is about -10 here, so float32 leaves it ~1e-5 apart between the two forwards: the penalty, a
    # difference of two such numbers, is compared to that absolute precision.
    expected = plain_loss.item() + 2.0 * torch.relu(log_p_ref - log_p).mean().item()
    assert loss.item() == pytest.approx(expected, abs=1e-4)


CHECKS = [
    MethodCheck(
        "RegularizedDPO",
        "RegularizedDPOTrainer(model, ref_model, args=RegularizedDPOConfig(...))",
        "the loss equals TRL's DPO loss plus the penalty on log P computed from a plain forward of each model",
        check,
        refused={
            "bert": "has no language-model head",
            "t5": "is an encoder-decoder model",
        },
    )
]
