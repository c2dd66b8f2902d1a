import pytest
import torch
from transformers import TrainerControl, TrainerState, TrainingArguments

from hf_ext.models import tiny_causal_lm
from hf_ext.rl import UpdateSparsityCallback, module_type, optimizer_state_bytes, visible_in_bf16

CHANGES = [
    ("model.layers.0.self_attn.q_proj.weight", 5, 0.5),
    ("model.layers.1.self_attn.q_proj.weight", 7, -0.5),
    ("model.norm.weight", 3, 1.0 + 2**-20),  # rounds back to 1.0 in bf16
]


def _started(snapshot="cpu", **kwargs):
    model, _ = tiny_causal_lm(seed=0)
    callback = UpdateSparsityCallback(snapshot=snapshot, **kwargs)
    callback.on_train_begin(TrainingArguments("/tmp/unused"), TrainerState(), TrainerControl(), model=model)
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, index, value in CHANGES:
            params[name].view(-1)[index] = value
    return model, callback


def test_counts_the_changed_entries_overall_per_module_type_and_in_bf16():
    model, callback = _started()
    total = sum(p.numel() for p in model.parameters())
    metrics = callback.measure(model)
    assert metrics["sparsity/changed_entry_fraction"] == 3 / total
    assert metrics["sparsity/changed_entry_fraction_bf16"] == 2 / total
    q_proj = sum(p.numel() for n, p in model.named_parameters() if "q_proj" in n)
    assert metrics["sparsity/changed_entry_fraction/model.layers.self_attn.q_proj.weight"] == 2 / q_proj
    assert metrics["sparsity/changed_entry_fraction/model.layers.mlp.up_proj.weight"] == 0
    assert metrics["sparsity/optimizer_state_bytes"] == 0


def test_block_hash_mode_counts_changed_blocks():
    model, callback = _started(snapshot="block_hash", block_size=16)
    blocks = sum(-(-p.numel() // 16) for p in model.parameters())
    metrics = callback.measure(model)
    assert metrics["sparsity/changed_block_fraction"] == 3 / blocks
    assert "sparsity/changed_entry_fraction" not in metrics


def test_on_log_adds_the_metrics_to_the_logged_entry_at_the_interval():
    model, callback = _started(every_n_steps=10)
    state = TrainerState(global_step=4, log_history=[{"loss": 1.0, "step": 4}])
    logs = {"loss": 1.0}
    callback.on_log(None, state, TrainerControl(), logs=logs, model=model)
    assert state.log_history[-1]["sparsity/changed_entry_fraction"] == logs["sparsity/changed_entry_fraction"] > 0
    state.global_step = 8
    callback.on_log(None, state, TrainerControl(), logs={}, model=model)
    assert [entry["step"] for entry in callback.history] == [4]


def test_optimizer_state_bytes_sgd_has_none_and_adam_two_moments():
    model, _ = tiny_causal_lm(seed=0)
    model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    sgd, adam = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.Adam(model.parameters())
    sgd.step()
    adam.step()
    params = list(model.parameters())
    assert optimizer_state_bytes(sgd) == 0
    # exp_avg and exp_avg_sq per parameter, plus a scalar step tensor each
    assert optimizer_state_bytes(adam) == 2 * sum(p.numel() * 4 for p in params) + 4 * len(params)


def test_groups_strip_layer_indices():
    assert module_type("model.layers.11.mlp.down_proj.weight") == "model.layers.mlp.down_proj.weight"


def test_bad_snapshot_names_the_choices():
    with pytest.raises(ValueError, match=r"`snapshot` must be one of \('cpu', 'device', 'block_hash'\)"):
        UpdateSparsityCallback(snapshot="disk")


def test_bf16_visibility_is_half_an_ulp_of_the_initial_value():
    initial = torch.tensor([1.0, 1.0, 0.0, 3.0, -3.0])
    current = initial + torch.tensor([2**-9, 2**-8, 1e-30, 2**-8, -(2**-6)])
    # bf16 ulp: 2^-7 at 1.0 and 2^-6 at 3.0; a change from 0 is always representable
    assert visible_in_bf16(current, initial).tolist() == [False, True, True, False, True]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every_n_steps": 1.5}, "`every_n_steps` must be an integer >= 0, got 1.5"),
        ({"block_size": "4096"}, "`block_size` must be an integer >= 1, got '4096'"),
    ],
)
def test_counts_of_another_type_are_refused_by_name(kwargs, message):
    """1.5 steps was taken; a string failed comparing str and int."""
    with pytest.raises(TypeError, match="UpdateSparsityCallback: " + message):
        UpdateSparsityCallback(**kwargs)
