"""One whole run of each method on the real checkpoints that ship offline: SmolLM2-135M-Instruct (Llama) and
all-MiniLM-L6-v2 (BERT, with a fresh 4-class ``classifier`` head as ``recipes/agzo_finetune.py`` builds it).

The zoo proves each method's equivalences on tiny random configs of every architecture; this file checks what only
a real model shows, on real data (arithmetic chat rows for SmolLM2, standard-library docstrings for MiniLM):

- every optimizer groups the trainable parameters by the roles it defines on ``model_layout``, lowers the loss of a
  held-out batch in three steps at a usable learning rate, and leaves frozen parameters exactly where they were;
- AGZO and MeZO through ``ZOTrainer`` move the targeted matrices (AGZO within its rank) and nothing else;
- a binarized model's packed export computes what the binarized model computes;
- ``PlasticityCallback.measure`` reports QK norms of every layer, as read from the checkpoint's own projections.

Each model is loaded once per module and deep-copied per test. Frozen throughout: the lower blocks, and the MLPs of
the three top blocks (SymmetryCurvature's inverse roots of their 1536-wide inputs cost minutes per step on 2 cores).
"""

import copy
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import pytest
import torch
from datasets import Dataset
from torch import nn
from transformers import DataCollatorForSeq2Seq, DataCollatorWithPadding, PreTrainedModel

from hf_ext.data import arithmetic_dataset, docstring_classification
from hf_ext.data.sft import tokenize_prompt_completion
from hf_ext.models import load_minilm, load_smollm2
from hf_ext.models.layout import ParamLayout, model_layout
from hf_ext.optim import NGN, SPS, GradientSmoothing, MuonWithAdamW, Scion, SymmetryCurvature, find_blocks
from hf_ext.plasticity import PlasticityCallback
from hf_ext.quant import (
    PackedBinaryLinear,
    binarize_model,
    binary_layers,
    load_packed,
    save_packed,
    set_binarization_mix,
)
from hf_ext.zo import AGZOConfig, MeZOConfig, ZOTrainer

pytestmark = pytest.mark.slow

TRAINED_BLOCKS = 3  # the top blocks that train (their attention and norms): GradientSmoothing's window of 3 fits


@dataclass
class Checkpoint:
    """A real model as loaded (never trained here), its data, and where its architecture names things."""

    model: PreTrainedModel
    train: list[dict]  # rows, collated per step
    steps: int
    batch_size: int
    heldout: dict[str, torch.Tensor]
    collate: Callable
    probe: list[dict]  # docstrings of two families with input_ids of one length, for PlasticityCallback
    mlp: tuple[str, ...]  # the children of a block that hold its MLP
    query_key_value: tuple[str, str, str]  # the attention's query, key and value projections, within a block
    learning_rates: dict[str, float] = field(default_factory=dict)

    def fresh(self, frozen: bool = True) -> tuple[PreTrainedModel, list[nn.Module]]:
        """A deep copy in eval mode (no dropout) and its trained blocks; ``frozen``: all but the top blocks'
        attention and norms and what lies outside the blocks (embeddings, final norm, pooler, heads) frozen."""
        model = copy.deepcopy(self.model).eval()
        _, blocks = find_blocks(model)
        trained = list(blocks[-TRAINED_BLOCKS:])
        if frozen:
            for block in blocks[:-TRAINED_BLOCKS]:
                block.requires_grad_(False)
            for block in trained:
                for name in self.mlp:
                    block.get_submodule(name).requires_grad_(False)
        return model, trained

    def batches(self) -> list[dict[str, torch.Tensor]]:
        size = self.batch_size
        return [self.collate(self.train[step * size : (step + 1) * size]) for step in range(self.steps)]


def _probe(tokenizer, rows: int = 16) -> list[dict]:
    data = docstring_classification(num_classes=2, seed=0)["validation"].select(range(rows))
    encoded = tokenizer(list(data["text"]), padding="max_length", truncation=True, max_length=32)
    return [
        {"input_ids": ids, "attention_mask": mask, "label": label}
        for ids, mask, label in zip(encoded["input_ids"], encoded["attention_mask"], data["label"], strict=True)
    ]


@pytest.fixture(scope="module")
def smollm2() -> Checkpoint:
    model, tokenizer = load_smollm2()  # the cached float32 copy, not the GGUF file

    def rows(count: int, seed: int) -> list[dict]:
        data = arithmetic_dataset(count, seed=seed)
        columns = data.column_names
        return list(data.map(tokenize_prompt_completion, fn_kwargs={"tokenizer": tokenizer}, remove_columns=columns))

    collate = DataCollatorForSeq2Seq(tokenizer, return_tensors="pt")
    return Checkpoint(
        model,
        train=rows(3 * 4, seed=0),
        steps=3,
        batch_size=4,
        heldout=collate(rows(8, seed=1)),
        collate=collate,
        probe=_probe(tokenizer),
        mlp=("mlp",),
        query_key_value=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
        learning_rates={
            "Scion": 3e-3,
            "SymmetryCurvature": 1e-4,
            "MuonWithAdamW": 1e-4,
            "SPS": 0.05,
            "NGN": 0.05,
            "GradientSmoothing": 1e-4,
        },
    )


@pytest.fixture(scope="module")
def minilm() -> Checkpoint:
    torch.manual_seed(0)  # the fresh classifier head
    model, tokenizer = load_minilm(num_labels=4)
    data = docstring_classification(num_classes=4, seed=0)
    data = data.map(lambda r: tokenizer(r["text"], truncation=True, max_length=32), batched=True)
    data = data.remove_columns("text").rename_column("label", "labels")
    collate = DataCollatorWithPadding(tokenizer, return_tensors="pt")
    return Checkpoint(
        model,
        train=list(data["train"].select(range(5 * 16))),
        steps=5,
        batch_size=16,
        heldout=collate(list(data["validation"].select(range(64)))),
        collate=collate,
        probe=_probe(tokenizer),
        mlp=("intermediate", "output"),
        query_key_value=("attention.self.query", "attention.self.key", "attention.self.value"),
        learning_rates={
            "Scion": 3e-3,
            "SymmetryCurvature": 1e-3,
            "MuonWithAdamW": 1e-3,
            "SPS": 0.1,
            "NGN": 0.3,
            "GradientSmoothing": 1e-3,
        },
    )


@pytest.fixture(params=["smollm2", "minilm"])
def checkpoint(request) -> Checkpoint:
    return request.getfixturevalue(request.param)


# --- optimizers -------------------------------------------------------------------------------------------------


def _trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


@dataclass(frozen=True)
class OptimizerCase:
    """How a method is built on a model whose top ``trained`` blocks train, what it says about each parameter it
    steps (``setting``), and what it must say by the parameter's name and layout (``expected``)."""

    build: Callable[[nn.Module, list[nn.Module], float], torch.optim.Optimizer]
    setting: Callable[[torch.optim.Optimizer, dict, nn.Parameter], Hashable]
    expected: Callable[[str, ParamLayout, tuple[str, ...]], Hashable]


SCION_NORMS = {"hidden": "spectral", "head": "sign", "embedding": "colnorm", "vector": "rms"}


def _symmetry_group(layout: ParamLayout) -> tuple[str, str]:
    """Hidden matrices get the hidden units' permutations; embeddings, heads and vectors the diagonal estimate."""
    return ("permutation", "identity") if layout.role == "hidden" else ("scaling", "scaling")


def _smoothed(optimizer: GradientSmoothing, param: nn.Parameter) -> bool:
    return any(param is p for params in optimizer.roles.values() for p in params)


OPTIMIZERS = {
    "Scion": OptimizerCase(
        build=lambda model, trained, lr: Scion(model, lr=lr),
        setting=lambda optimizer, group, param: (group["norm"], group["transposed"], group["stacked"]),
        expected=lambda name, layout, trained: (SCION_NORMS[layout.role], layout.transposed, layout.stacked),
    ),
    "SymmetryCurvature": OptimizerCase(
        build=lambda model, trained, lr: SymmetryCurvature(model, lr=lr),
        setting=lambda optimizer, group, param: (tuple(group["group"]), group["transposed"], group["stacked"]),
        expected=lambda name, layout, trained: (_symmetry_group(layout), layout.transposed, layout.stacked),
    ),
    "MuonWithAdamW": OptimizerCase(
        build=lambda model, trained, lr: MuonWithAdamW(model, lr=lr),
        setting=lambda optimizer, group, param: group["use_muon"],
        expected=lambda name, layout, trained: layout.role == "hidden",
    ),
    # SPS and NGN define no roles: one step size for every trainable parameter.
    "SPS": OptimizerCase(
        build=lambda model, trained, lr: SPS(_trainable(model), lr=lr),
        setting=lambda optimizer, group, param: "one group",
        expected=lambda name, layout, trained: "one group",
    ),
    "NGN": OptimizerCase(
        build=lambda model, trained, lr: NGN(_trainable(model), lr=lr),
        setting=lambda optimizer, group, param: "one group",
        expected=lambda name, layout, trained: "one group",
    ),
    # Smoothed across depth: what every trained block holds; the rest is AdamW's alone.
    "GradientSmoothing": OptimizerCase(
        build=lambda model, trained, lr: GradientSmoothing(
            torch.optim.AdamW(_trainable(model), lr=lr), model, blocks=trained, window=3
        ),
        setting=lambda optimizer, group, param: _smoothed(optimizer, param),
        expected=lambda name, layout, trained: name.startswith(trained),
    ),
}


def _assert_groups_follow_layout(model, trained, optimizer, case: OptimizerCase) -> None:
    """Every trainable parameter (each tied tensor once) is in exactly one group, with the setting its role calls
    for; no frozen parameter is in any group."""
    names = {id(p): name for name, p in model.named_parameters()}
    prefixes = tuple(f"{name}." for name, module in model.named_modules() if any(module is b for b in trained))
    settings = {}
    for group in optimizer.param_groups:
        for param in group["params"]:
            name = names[id(param)]
            assert name not in settings, f"{name} is in two groups"
            settings[name] = case.setting(optimizer, group, param)
    layouts = model_layout(model)
    assert settings.keys() == layouts.keys()
    for name, layout in layouts.items():
        assert settings[name] == case.expected(name, layout, prefixes), f"{name} ({layout.role})"


@torch.no_grad()
def _loss(model, batch) -> float:
    return model(**batch).loss.item()


def _train(model, optimizer, batches) -> None:
    """One step per batch through ``step(closure)``, which every optimizer here takes (SPS and NGN need the loss)."""
    for batch in batches:

        def closure(batch=batch):
            optimizer.zero_grad()
            loss = model(**batch).loss
            loss.backward()
            return loss

        optimizer.step(closure)


@pytest.mark.parametrize("method", list(OPTIMIZERS))
def test_optimizer_groups_by_role_lowers_the_heldout_loss_and_leaves_frozen_parameters(checkpoint, method):
    case = OPTIMIZERS[method]
    model, trained = checkpoint.fresh()
    frozen = {name: p.detach().clone() for name, p in model.named_parameters() if not p.requires_grad}
    optimizer = case.build(model, trained, checkpoint.learning_rates[method])
    _assert_groups_follow_layout(model, trained, optimizer, case)
    before = _loss(model, checkpoint.heldout)
    _train(model, optimizer, checkpoint.batches())
    after = _loss(model, checkpoint.heldout)
    print(f"{method}: held-out loss {before:.4f} -> {after:.4f}")
    assert after < 0.99 * before, f"{method}: held-out loss {before:.4f} -> {after:.4f}"
    moved = [name for name, value in frozen.items() if not torch.equal(model.get_parameter(name), value)]
    assert not moved, f"{method} moved frozen parameters {moved[:3]}"


# --- zeroth-order fine-tuning -------------------------------------------------------------------------------------

ZO_STEPS = 2
AGZO_RANK = 4
LOW_RANK = ZO_STEPS * AGZO_RANK  # AGZO moves a matrix by rank-`rank` steps N U^T; MeZO by dense Gaussian ones


def _agzo_moves_within_its_rank(name: str, singular_values: torch.Tensor) -> None:
    assert singular_values[LOW_RANK] <= 1e-3 * singular_values[0], f"{name} moved beyond rank {LOW_RANK}"


def _mezo_moves_in_every_direction(name: str, singular_values: torch.Tensor) -> None:
    assert singular_values[LOW_RANK] >= 0.1 * singular_values[0], f"{name} moved in few directions only"


ZO_METHODS = {
    "AGZO": (AGZOConfig, {"rank": AGZO_RANK}, 1e-2, _agzo_moves_within_its_rank),
    "MeZO": (MeZOConfig, {"other_params": "frozen"}, 1e-3, _mezo_moves_in_every_direction),
}


@pytest.mark.parametrize("method", list(ZO_METHODS))
def test_zo_trainer_moves_the_targeted_matrices_and_nothing_else(checkpoint, method, training_args):
    config_class, settings, lr, expect_move = ZO_METHODS[method]
    model, trained = checkpoint.fresh()
    query, _, value = checkpoint.query_key_value
    targets = [query.rpartition(".")[2], value.rpartition(".")[2]]  # MeZO's classic query/value setting
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer = ZOTrainer(
        model,
        training_args(max_steps=ZO_STEPS, learning_rate=lr, max_grad_norm=0.0, lr_scheduler_type="constant", seed=0),
        train_dataset=Dataset.from_list(checkpoint.train),
        data_collator=checkpoint.collate,
        zo_config=config_class(target_modules=targets, **settings),
    )
    trainer.train()
    moved = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    block_names = [name for name, module in model.named_modules() if any(module is block for block in trained)]
    assert moved == {f"{block}.{projection}.weight" for block in block_names for projection in (query, value)}
    for name in moved:
        expect_move(name, torch.linalg.svdvals((model.get_parameter(name) - before[name]).double()))


# --- binarization ------------------------------------------------------------------------------------------------


def test_packed_export_computes_what_the_binarized_model_computes(checkpoint, tmp_path):
    model, _ = checkpoint.fresh(frozen=False)
    binarize_model(model)  # every linear layer but SmolLM2's tied head (MiniLM's classifier included)
    set_binarization_mix(model, 1.0)
    inputs = {key: value for key, value in checkpoint.heldout.items() if key != "labels"}
    with torch.no_grad():
        expected = model(**inputs).logits
    save_packed(model, tmp_path)
    packed = load_packed(tmp_path)
    assert type(packed) is type(checkpoint.model)
    packed_layers = {name for name, module in packed.named_modules() if isinstance(module, PackedBinaryLinear)}
    assert packed_layers == set(binary_layers(model))
    with torch.no_grad():
        actual = packed(**inputs).logits
    # The packed kernel scales after its sign product, the binarized model before: float32 rounding through up to 30
    # layers, up to 2e-4 on SmolLM2's logits (of magnitude ~10); the tiny zoo models hold to 1e-5.
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-3)


# --- plasticity --------------------------------------------------------------------------------------------------


def _qk_norms_by_hand(attention_block: nn.Module, checkpoint: Checkpoint, config) -> tuple[float, float]:
    """Mean over query heads of the spectral and Frobenius norms of ``W_Q^h (W_K^k)^T``, query head ``h`` reading key
    head ``k = h // (heads / key heads)`` as transformers' ``repeat_kv`` lays them out (SmolLM2: 9 and 3)."""
    query, key, _ = (attention_block.get_submodule(name).weight.double() for name in checkpoint.query_key_value)
    heads = config.num_attention_heads
    key_heads = getattr(config, "num_key_value_heads", heads)
    dim = query.shape[0] // heads
    spectral, frobenius = [], []
    for head in range(heads):
        k = head // (heads // key_heads)
        product = query[head * dim : (head + 1) * dim].T @ key[k * dim : (k + 1) * dim]
        spectral.append(torch.linalg.svdvals(product)[0].item())
        frobenius.append(product.pow(2).sum().sqrt().item())
    return sum(spectral) / heads, sum(frobenius) / heads


def test_plasticity_measures_qk_norms_of_every_layer(checkpoint):
    model, blocks = checkpoint.fresh(frozen=False)
    metrics = PlasticityCallback(Dataset.from_list(checkpoint.probe), batch_size=16).measure(model)
    layers = model.config.num_hidden_layers
    for metric in ("qk_spectral_norm", "qk_frobenius_norm", "attention_entropy"):
        reported = {key for key in metrics if key.startswith(f"plasticity/{metric}/")}
        assert reported == {f"plasticity/{metric}/layer_{i}" for i in range(layers)}, metric
        assert all(metrics[key] > 0 and torch.isfinite(torch.tensor(metrics[key])) for key in reported), metric
    spectral, frobenius = _qk_norms_by_hand(blocks[-1], checkpoint, model.config)
    last = layers - 1
    assert metrics[f"plasticity/qk_spectral_norm/layer_{last}"] == pytest.approx(spectral, rel=1e-4)
    assert metrics[f"plasticity/qk_frobenius_norm/layer_{last}"] == pytest.approx(frobenius, rel=1e-4)
