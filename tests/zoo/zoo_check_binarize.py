"""Progressive binarization on the zoo: binarize, train through the schedule, pack and load, on every architecture.

Every cell binarizes the model, trains it two steps with ``ProgressiveBinarizationCallback`` (the mix goes 0 -> 1),
writes it with ``save_packed`` and reads it back with ``load_packed``: the packed model's logits must equal the
unpacked binary model's (to 1e-5: ``PackedBinaryLinear``'s matmul sums ``(x b) S^T a`` in another order; the
``Conv1D``, expert and router weights unpack to the same binary values bit for bit). On top of it:
GPT-2's ``Conv1D`` model and its ``nn.Linear`` twin give the same scales, updates and packed file; each expert of a
mixture-of-experts stack is binarized as that expert alone as an ``nn.Linear``; on a LoRA model the adapters learn
over a frozen binarized base. Distillation's labels are aligned as the model's own loss aligns them.
"""

import copy
import tempfile
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file
from torch import nn
from transformers import Trainer, TrainingArguments
from zoo_architectures import BATCH, build
from zoo_equivalents import conv1d_as_linear
from zoo_matrix import MethodCheck

from hf_ext.kernels import pack_signs
from hf_ext.models.layout import model_layout
from hf_ext.quant import (
    LogitDistillationConfig,
    LogitDistillationTrainer,
    ProgressiveBinarizationCallback,
    ProgressiveBinaryLinear,
    binarize_model,
    binary_layers,
    load_packed,
    save_packed,
)
from hf_ext.quant.convert import layer_name, parametrized_weights

MOE = ("mixtral", "qwen2_moe", "qwen3_moe")
CPU_SETTINGS = {"report_to": "none", "save_strategy": "no", "use_cpu": True, "disable_tqdm": True}


def _train(model: nn.Module, batch: dict, output_dir: Path, steps: int = 2) -> None:
    """``steps`` Trainer steps on ``batch`` with the schedule ramping the mix from 0 (step 0) to 1 (step 1 on)."""
    args = TrainingArguments(
        str(output_dir), max_steps=steps, per_device_train_batch_size=BATCH, learning_rate=1e-2, **CPU_SETTINGS
    )
    data = Dataset.from_dict({key: value.tolist() for key, value in batch.items()})
    callback = ProgressiveBinarizationCallback(end=1)
    Trainer(model=model, args=args, train_dataset=data, callbacks=[callback]).train()
    assert callback.mix == 1.0 and all(layer.mix.item() == 1.0 for layer in binary_layers(model).values())


def _logits(model: nn.Module, batch: dict) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(**batch).logits


def _assert_packed_computes_the_binary_model(model, batch, directory: Path, fresh=None) -> dict[str, torch.Tensor]:
    """Pack ``model`` into ``directory``, load it (into ``fresh``, else from the saved config); the file's tensors."""
    save_packed(model, directory)
    packed = load_packed(directory, fresh)
    torch.testing.assert_close(_logits(packed, batch), _logits(model, batch), rtol=1e-5, atol=1e-5)
    return load_file(directory / "packed_binary.safetensors")


def _assert_conv1d_binarizes_as_its_linear_twin(directory: Path) -> None:
    """GPT-2 and its twin with ``nn.Linear`` layers: same init scales, same two training steps, same packed file."""
    model, batch = build("gpt2")
    twin = conv1d_as_linear(model)
    errors, twin_errors = binarize_model(model), binarize_model(twin)
    assert errors == pytest.approx(twin_errors, rel=1e-6)
    for name, layer in binary_layers(model).items():
        twin_layer = binary_layers(twin)[name]
        assert isinstance(twin_layer, ProgressiveBinaryLinear) and layer.transposed
        assert torch.equal(layer.row_scale, twin_layer.row_scale) and torch.equal(layer.col_scale, twin_layer.col_scale)
    _train(model, batch, directory / "train")
    _train(twin, batch, directory / "twin-train")
    for name in binary_layers(model):  # the Conv1D's mixed weight, stored (in, out), is the twin's transposed
        weight, twin_weight = model.get_submodule(name).weight, twin.get_submodule(name).effective_weight()
        torch.testing.assert_close(weight, twin_weight.T, rtol=1e-5, atol=1e-6)
    tensors = _assert_packed_computes_the_binary_model(model, batch, directory / "packed")
    save_packed(twin, directory / "twin")
    twin_tensors = load_file(directory / "twin" / "packed_binary.safetensors")
    assert tensors.keys() == twin_tensors.keys()
    for key, tensor in tensors.items():
        torch.testing.assert_close(tensor, twin_tensors[key], rtol=1e-5, atol=1e-6, msg=lambda m, k=key: f"{k}: {m}")


def _expert_stacks(model: nn.Module) -> dict[str, tuple[nn.Module, str, nn.Module]]:
    """``{name: (module, tensor name, ProgressiveBinaryWeight)}`` of every expert stack and router."""
    stacks = {
        layer_name(module_name, tensor_name): (model.get_submodule(module_name), tensor_name, binarizer)
        for module_name, tensor_name, _, binarizer in parametrized_weights(model)
    }
    assert {name.rpartition(".")[2] for name in stacks} == {"gate_up_proj", "down_proj", "gate"}
    return stacks


def _experts_alone(module: nn.Module, tensor_name: str, binarizer: nn.Module) -> list[ProgressiveBinaryLinear]:
    """Each matrix of the stack (or the router) binarized alone as an ``nn.Linear``."""
    maps = binarizer.matrices(module.parametrizations[tensor_name].original.detach())
    return [ProgressiveBinaryLinear.from_linear(_linear(matrix)) for matrix in maps.reshape(-1, *maps.shape[-2:])]


def _assert_each_expert_binarizes_as_alone(model: nn.Module) -> None:
    """Every expert of every stack (and the router, a stack of one) against that matrix alone as an ``nn.Linear``:
    the same init scales, and the same mixed weight and gradients at mix 0.5."""
    for module, tensor_name, binarizer in _expert_stacks(model).values():
        alone = _experts_alone(module, tensor_name, binarizer)
        rows, cols = binarizer.row_scale.reshape(len(alone), -1), binarizer.col_scale.reshape(len(alone), -1)
        torch.testing.assert_close(rows, torch.stack([layer.row_scale for layer in alone]), rtol=1e-6, atol=0)
        torch.testing.assert_close(cols, torch.stack([layer.col_scale for layer in alone]), rtol=1e-6, atol=0)
        _assert_same_mixed_weight_and_gradients(module, tensor_name, binarizer, alone)


def _assert_each_expert_is_packed_as_alone(model: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """The packed file holds each expert's sign bits, as ``pack_signs`` packs that expert alone."""
    for name, (module, tensor_name, binarizer) in _expert_stacks(model).items():
        alone = _experts_alone(module, tensor_name, binarizer)
        bits = tensors[f"{name}.packed"].reshape(len(alone), alone[0].out_features, -1)
        assert torch.equal(bits, torch.stack([pack_signs(layer.weight.detach()) for layer in alone]))


def _linear(matrix: torch.Tensor) -> nn.Linear:
    linear = nn.Linear(matrix.shape[1], matrix.shape[0], bias=False)
    with torch.no_grad():
        linear.weight.copy_(matrix)
    return linear


def _assert_same_mixed_weight_and_gradients(module, tensor_name, binarizer, alone) -> None:
    """With the scales moved off their init (as training moves them), at mix 0.5, under one random upstream grad."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for scale in (binarizer.row_scale, binarizer.col_scale):
            scale.mul_(1 + 0.1 * torch.randn(scale.shape, generator=generator))
        for index, layer in enumerate(alone):
            layer.row_scale.copy_(binarizer.row_scale.reshape(len(alone), -1)[index])
            layer.col_scale.copy_(binarizer.col_scale.reshape(len(alone), -1)[index])
    binarizer.mix.fill_(0.5)
    for layer in alone:
        layer.mix.fill_(0.5)
    latent = module.parametrizations[tensor_name].original
    for tensor in (latent, binarizer.row_scale, binarizer.col_scale):
        tensor.grad = None
    maps = binarizer.matrices(getattr(module, tensor_name))
    upstream = torch.randn(maps.shape, generator=generator)
    (maps * upstream).sum().backward()
    stacked = maps.reshape(len(alone), *maps.shape[-2:])
    expected = torch.stack([layer.effective_weight() for layer in alone])
    torch.testing.assert_close(stacked.detach(), expected.detach(), rtol=1e-6, atol=1e-7)
    (expected * upstream.reshape(expected.shape)).sum().backward()
    grads = binarizer.matrices(latent.grad).reshape(expected.shape)
    torch.testing.assert_close(grads, torch.stack([layer.weight.grad for layer in alone]), rtol=1e-5, atol=1e-7)
    for scale in ("row_scale", "col_scale"):
        got = getattr(binarizer, scale).grad.reshape(len(alone), -1)
        torch.testing.assert_close(
            got, torch.stack([getattr(layer, scale).grad for layer in alone]), rtol=1e-5, atol=1e-6
        )
    binarizer.mix.fill_(1.0)


def _check_binarize(architecture: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        if architecture == "gpt2":
            _assert_conv1d_binarizes_as_its_linear_twin(directory)
            return
        model, batch = build(architecture)
        trainable = {name for name, param in model.named_parameters() if param.requires_grad}
        errors = binarize_model(model)
        assert errors and set(binary_layers(model)) == set(errors)
        if architecture in MOE:
            _assert_each_expert_binarizes_as_alone(model)
        if architecture == "lora_qwen2":
            _assert_adapters_learn_over_the_frozen_binary_base(model, batch, trainable, directory)
            return
        _train(model, batch, directory / "train")
        tensors = _assert_packed_computes_the_binary_model(model, batch, directory / "packed")
        if architecture in MOE:
            _assert_each_expert_is_packed_as_alone(model, tensors)


def _assert_adapters_learn_over_the_frozen_binary_base(model, batch, trainable, directory: Path) -> None:
    """Only base layers are binarized, their scales stay frozen, the adapters move and the base does not."""
    adapters = {name for name, layout in model_layout(model, trainable_only=False).items() if layout.adapter}
    assert adapters and not any(
        name.startswith(tuple(f"{layer}." for layer in binary_layers(model))) for name in adapters
    )
    assert {name for name, param in model.named_parameters() if param.requires_grad} == trainable
    before = {name: param.detach().clone() for name, param in model.named_parameters()}
    _train(model, batch, directory / "train")
    moved = {name for name, param in model.named_parameters() if not torch.equal(param, before[name])}
    assert moved == trainable, sorted(moved ^ trainable)[:4]
    fresh, _ = build("lora_qwen2", seed=3)
    _assert_packed_computes_the_binary_model(model, batch, directory / "packed", fresh)


def _check_distill(architecture: str) -> None:
    """A student equal to its teacher: KL 0 and, with the label term's weight 1, exactly the model's own loss."""
    model, batch = build(architecture)
    teacher = copy.deepcopy(model)
    with tempfile.TemporaryDirectory() as tmp:
        args = LogitDistillationConfig(output_dir=tmp, lm_loss_weight=1.0, **CPU_SETTINGS)
        trainer = LogitDistillationTrainer(model, teacher, args)
        loss = trainer.compute_loss(model, dict(batch))
    (kl,), (label_term,) = trainer._distill_metrics["kl"], trainer._distill_metrics["lm"]
    assert abs(kl) < 1e-6  # a deep copy of T5 computes its logits 1e-6 apart (another memory layout)
    assert label_term == model(**batch).loss.item()
    torch.testing.assert_close(loss.item(), label_term, rtol=0, atol=1e-6)


CHECKS = [
    MethodCheck(
        "progressive binarization",
        "binarize_model(model) + ProgressiveBinarizationCallback + save_packed/load_packed",
        "the packed model computes the trained binary model (to 1e-5); GPT-2's Conv1D gets the nn.Linear twin's "
        "scales, updates and packed bits; each expert (and router) is binarized as that matrix alone as an "
        "nn.Linear; LoRA adapters learn over a frozen binary base (adapters never binarized)",
        _check_binarize,
    ),
    MethodCheck(
        "logit distillation",
        "LogitDistillationTrainer(student, teacher, args)",
        "a student equal to the teacher has KL 0 and its label term equals the model's own loss (causal shift, "
        "T5's decoder, BERT's classes)",
        _check_distill,
    ),
]
