"""hf_ext/_sharded.py, and the callbacks and exports that use it on an FSDP2-sharded model (2 CPU processes)."""

import json
from pathlib import Path

import pytest
import torch

from hf_ext._sharded import chunk_sizes, gathered, sharding

pytestmark = pytest.mark.parity  # multi-process parity: kept in `make test` although slow

SCRIPT = Path(__file__).with_name("_sharded_run.py")


@pytest.mark.parametrize(("length", "parts"), [(8, 2), (5, 2), (6, 4), (1, 2), (0, 3), (49152, 8)])
def test_chunk_sizes_are_torch_chunk_blocks(length, parts):
    blocks = [len(block) for block in torch.arange(length).chunk(parts)]
    assert chunk_sizes(length, parts) == tuple(blocks + [0] * (parts - len(blocks)))


def test_plain_tensors_are_whole_already():
    tensor = torch.randn(3)
    assert sharding(tensor) is None
    assert gathered(tensor, keep=True) is tensor and gathered(tensor, keep=False) is None


@pytest.fixture(scope="module")
def sharded_run(tmp_path_factory, torchrun) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("sharded_callbacks")
    torchrun(SCRIPT, str(out), cwd=out)
    return torch.load(out / "results.pt"), out


def _max_relative(a: dict, b: dict) -> float:
    return max(((a[n] - b[n]).abs().max() / b[n].abs().max()).item() for n in b)


@pytest.mark.slow
def test_progressive_binarization_trains_on_shards_as_one_process(sharded_run):
    results, _ = sharded_run
    assert results["fsdp"]["mixes"] == results["single"]["mixes"] == [0.0, 1 / 3, 2 / 3]
    assert _max_relative(results["fsdp"]["params"], results["single"]["params"]) <= 1e-6


def _safetensors_parts(path: Path) -> tuple[dict, bytes]:
    """The header (parsed: safetensors writes its metadata map in a per-process order) and the data bytes."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8 : 8 + length]), raw[8 + length :]


@pytest.mark.slow
def test_save_packed_from_shards_writes_one_process_files(sharded_run):
    results, out = sharded_run
    assert results["fsdp"]["sizes"] == results["single"]["sizes"]
    sharded, single = out / "packed-fsdp", out / "packed-single"
    assert (sharded / "config.json").read_bytes() == (single / "config.json").read_bytes()
    file = "packed_binary.safetensors"
    assert _safetensors_parts(sharded / file) == _safetensors_parts(single / file)


@pytest.mark.slow
def test_plasticity_metrics_of_a_sharded_model_are_one_process_metrics(sharded_run):
    results, _ = sharded_run
    fsdp, single = results["fsdp"]["metrics"], results["single"]["metrics"]
    assert fsdp.keys() == single.keys()
    assert all(fsdp[k] == pytest.approx(single[k], rel=1e-6, abs=1e-9) for k in single)
