import pytest
import torch
from safetensors import safe_open

from hf_ext.models import tiny_causal_lm
from hf_ext.rl import apply_sparse_delta, save_sparse_delta


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
