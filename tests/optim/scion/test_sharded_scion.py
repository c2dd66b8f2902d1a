from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.parity  # multi-process parity: kept in `make test` although slow

SCRIPT = Path(__file__).with_name("_sharded_scion_run.py")


@pytest.mark.slow
def test_on_row_shards_each_expert_and_each_transposed_matrix_steps_as_its_map_alone(tmp_path, torchrun_two_processes):
    """A stack split along its experts steps on each rank (whole matrices); a Conv1D-like (in, out) matrix or an
    embedding split along the axis its LMO reads steps whole on its owner: each as one process steps its map alone."""
    torchrun_two_processes(SCRIPT)
    results = torch.load(tmp_path / "scion.pt")
    assert sorted(results) == ["conv1d", "embedding", "experts", "experts_sign"]
    for name, (sharded, whole) in results.items():
        torch.testing.assert_close(sharded, whole, rtol=1e-6, atol=1e-7, msg=name)
