import json
import warnings
from types import SimpleNamespace

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from hf_ext._tied import split_tied
from hf_ext.models import tiny_causal_lm
from hf_ext.rl import SparseDeltaCallback, apply_sparse_delta, save_sparse_delta, state_fingerprint


def _trained_copy(changes):
    """A tiny model and a copy of it with the given (name, flat index, new value) changes."""
    base, _ = tiny_causal_lm(seed=0)
    model, _ = tiny_causal_lm(seed=0)
    with torch.no_grad():
        for name, index, value in changes:
            model.state_dict()[name].view(-1)[index] = value
    return base, model


def test_delta_stores_only_changed_entries_and_round_trips_bit_exactly(tmp_path):
    base, model = _trained_copy(
        [
            ("model.layers.0.self_attn.q_proj.weight", 5, 0.125),
            ("model.norm.weight", 3, 1.0 + 2**-20),  # a change far below bf16 resolution
        ]
    )
    with torch.no_grad():  # 0.0 -> -0.0: equal as numbers, a change in bits
        base.state_dict()["model.layers.1.mlp.down_proj.weight"].view(-1)[0] = 0.0
        model.state_dict()["model.layers.1.mlp.down_proj.weight"].view(-1)[0] = -0.0
    counts = save_sparse_delta(model, base, tmp_path / "delta.safetensors")
    assert counts["changed"] == 3 and counts["total"] == sum(p.numel() for p in base.parameters())  # tied: once
    restored = apply_sparse_delta(base, tmp_path / "delta.safetensors").state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(restored[name].view(torch.int32), tensor.view(torch.int32)), name


def test_a_different_base_is_refused_before_anything_is_written(tmp_path):
    base, model = _trained_copy([("model.norm.weight", 0, 2.0)])
    save_sparse_delta(model, base, tmp_path / "delta.safetensors")
    other, _ = tiny_causal_lm(seed=1)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(ValueError, match="does not match the model the delta was saved against"):
        apply_sparse_delta(other, tmp_path / "delta.safetensors")
    assert all(torch.equal(before[k], v) for k, v in other.state_dict().items())


def test_non_finite_changes_are_not_saved(tmp_path):
    base, model = _trained_copy([("model.norm.weight", 1, float("nan"))])
    with pytest.raises(ValueError, match="'model.norm.weight' has non-finite changed values"):
        save_sparse_delta(model, base, tmp_path / "delta.safetensors")
    assert not (tmp_path / "delta.safetensors").exists()


def test_a_mostly_changed_tensor_is_stored_whole_and_still_round_trips(tmp_path):
    base, model = _trained_copy([])
    with torch.no_grad():
        model.state_dict()["model.norm.weight"].mul_(1.5)
    counts = save_sparse_delta(model, base, tmp_path / "delta.safetensors")
    assert counts["changed"] == model.state_dict()["model.norm.weight"].numel()
    with safe_open(str(tmp_path / "delta.safetensors"), "pt") as stored:
        assert list(stored.keys()) == ["model.norm.weight::dense"]
    restored = apply_sparse_delta(base, tmp_path / "delta.safetensors")
    assert torch.equal(restored.model.norm.weight, model.model.norm.weight)


def _truncate(path, keep_bytes: int) -> None:
    """Cut the file written by our save function, as an interrupted copy or a full disk would."""
    path.write_bytes(path.read_bytes()[:keep_bytes])


@pytest.mark.parametrize("keep", [0, 20, -4], ids=["empty", "inside_the_header", "inside_the_tensors"])
def test_a_truncated_delta_is_named_and_refused_before_the_base_changes(tmp_path, keep):
    base, model = _trained_copy([("model.norm.weight", 0, 2.0)])
    path = tmp_path / "delta.safetensors"
    save_sparse_delta(model, base, path)
    _truncate(path, keep if keep >= 0 else path.stat().st_size + keep)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    with pytest.raises(ValueError, match=r"delta\.safetensors' is truncated or not a safetensors file"):
        apply_sparse_delta(base, path)
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())


def test_a_missing_delta_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"apply_sparse_delta: '.*missing\.safetensors' is missing"):
        apply_sparse_delta(tiny_causal_lm(seed=0)[0], tmp_path / "missing.safetensors")


def test_a_visible_delta_stores_only_bf16_visible_changes_and_restores_the_bf16_model_bit_exactly(tmp_path):
    base, model = _trained_copy(
        [
            ("model.layers.0.self_attn.q_proj.weight", 5, 0.125),  # visible in bf16
            ("model.norm.weight", 3, 1.0 + 2**-20),  # 1.0 in bf16: rounds away
        ]
    )
    counts = save_sparse_delta(model, base, tmp_path / "delta.safetensors", mode="visible", dtype=torch.bfloat16)
    assert counts["changed"] == 1
    with safe_open(str(tmp_path / "delta.safetensors"), "pt") as stored:
        assert stored.metadata()["mode"] == "visible" and stored.metadata()["dtype"] == "bfloat16"
        assert stored.get_tensor("model.layers.0.self_attn.q_proj.weight::values").dtype == torch.bfloat16
    restored = apply_sparse_delta(base, tmp_path / "delta.safetensors").state_dict()
    for name, tensor in model.state_dict().items():
        assert restored[name].dtype == torch.bfloat16, name
        assert torch.equal(restored[name].view(torch.int16), tensor.to(torch.bfloat16).view(torch.int16)), name


def test_a_visible_delta_applies_to_a_state_dict_and_in_float16(tmp_path):
    base, model = _trained_copy([("model.norm.weight", 0, 2.0)])
    save_sparse_delta(model, base, tmp_path / "delta.safetensors", mode="visible", dtype="float16")
    state = {name: tensor.clone() for name, tensor in base.state_dict().items()}
    restored = apply_sparse_delta(state, tmp_path / "delta.safetensors", mode="visible", dtype=torch.float16)
    assert restored is state
    assert all(torch.equal(state[k], v.to(torch.float16)) for k, v in model.state_dict().items())


def test_a_visible_delta_refuses_an_fp32_base_that_rounds_differently_and_names_the_tensor(tmp_path):
    base, model = _trained_copy([("model.norm.weight", 0, 2.0)])
    save_sparse_delta(model, base, tmp_path / "delta.safetensors", mode="visible")
    _, other = _trained_copy([("model.layers.1.mlp.up_proj.weight", 7, 3.0)])
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(ValueError, match=r"\['model.layers.1.mlp.up_proj.weight'\] differ rounded to torch.bfloat16"):
        apply_sparse_delta(other, tmp_path / "delta.safetensors")
    assert all(torch.equal(before[k], v) for k, v in other.state_dict().items())  # not even cast to bf16
    # A base that differs only below bf16 resolution is the same bf16 base: accepted.
    _, close = _trained_copy([("model.norm.weight", 1, 1.0 + 2**-20)])
    restored = apply_sparse_delta(close, tmp_path / "delta.safetensors")
    assert torch.equal(restored.model.norm.weight, model.model.norm.weight.to(torch.bfloat16))


def test_a_mode_or_dtype_other_than_the_saved_one_is_refused(tmp_path):
    base, model = _trained_copy([("model.norm.weight", 0, 2.0)])
    save_sparse_delta(model, base, tmp_path / "delta.safetensors", mode="visible")
    with pytest.raises(ValueError, match=r"saved with mode='visible', dtype=torch.bfloat16; asked for mode='exact'"):
        apply_sparse_delta(base, tmp_path / "delta.safetensors", mode="exact")
    with pytest.raises(ValueError, match=r"asked for mode='visible', dtype=torch.float16"):
        apply_sparse_delta(base, tmp_path / "delta.safetensors", dtype=torch.float16)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "lossy"}, r"`mode` must be one of \['exact', 'visible'\], got 'lossy'"),
        ({"mode": "visible", "dtype": torch.float32}, r"`dtype` must be one of \['bfloat16', 'float16'\]"),
        ({"mode": "exact", "dtype": torch.bfloat16}, r"`dtype` applies to mode='visible' only"),
    ],
)
def test_an_unknown_mode_or_dtype_is_refused_naming_the_allowed_values(tmp_path, kwargs, message):
    base, model = _trained_copy([])
    with pytest.raises(ValueError, match="save_sparse_delta: " + message):
        save_sparse_delta(model, base, tmp_path / "delta.safetensors", **kwargs)
    with pytest.raises(ValueError, match="SparseDeltaCallback: " + message):
        SparseDeltaCallback(**kwargs)
    assert not (tmp_path / "delta.safetensors").exists()


def test_an_exact_delta_of_a_mostly_changed_model_warns_with_the_fraction_and_the_fix(tmp_path):
    base, model = _trained_copy([])
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1.5)
    with pytest.warns(UserWarning, match=r"exact delta is 10\d% of a full checkpoint \(100\.0% of the entries.*"
                      r"mode='visible'"):
        save_sparse_delta(model, base, tmp_path / "exact.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        save_sparse_delta(model, base, tmp_path / "visible.safetensors", mode="visible")  # the fix: no warning
        small, changed_model = _trained_copy([("model.norm.weight", 0, 2.0)])
        save_sparse_delta(changed_model, small, tmp_path / "small.safetensors")  # a sparse exact delta: none


def test_the_callback_warns_once_per_run(tmp_path):
    base, model = _trained_copy([])
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(1.5)  # tied embeddings: most of the tiny model's entries
    callback = SparseDeltaCallback(base)
    args = SimpleNamespace(output_dir=str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in (1, 2):
            callback.on_save(args, SimpleNamespace(global_step=step, is_world_process_zero=True), None, model=model)
    assert len(caught) == 1 and "this exact delta is" in str(caught[0].message)
    assert (tmp_path / "checkpoint-2" / "sparse_delta.safetensors").is_file()


def test_a_delta_written_before_modes_existed_still_loads_as_exact(tmp_path):
    base, model = _trained_copy([("model.norm.weight", 3, 1.0 + 2**-20)])
    index = torch.tensor([3], dtype=torch.int32)
    metadata = {  # what hf_ext.sparse_delta/1 wrote: no mode, one fingerprint of the whole base
        "format": "hf_ext.sparse_delta/1",
        "base_fingerprint": state_fingerprint(base.state_dict()),
        "changed": "1",
        "aliases": json.dumps(split_tied(base.state_dict())[1]),
    }
    tensors = {"model.norm.weight::indices": index, "model.norm.weight::values": model.model.norm.weight[3:4].detach()}
    save_file(tensors, str(tmp_path / "old.safetensors"), metadata=metadata)
    restored = apply_sparse_delta(base, tmp_path / "old.safetensors", mode="exact")
    assert all(torch.equal(restored.state_dict()[k], v) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match="saved with mode='exact', dtype=None; asked for mode='visible'"):
        apply_sparse_delta(base, tmp_path / "old.safetensors", mode="visible")


def test_a_base_that_is_neither_a_model_nor_a_state_dict_is_refused_by_name():
    """It failed as "'int' object has no attribute 'state_dict'"."""
    with pytest.raises(TypeError, match="SparseDeltaCallback: `base` must be the base model, its state_dict or None"):
        SparseDeltaCallback(base=3)
