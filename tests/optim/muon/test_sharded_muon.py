from pathlib import Path

import pytest
import torch

from hf_ext.optim import ShardedMuon

pytestmark = pytest.mark.parity  # multi-process parity: kept in `make test` although slow

SCRIPT = Path(__file__).with_name("_sharded_muon_run.py")


def test_on_tensors_that_are_not_sharded_it_is_torch_muon():
    torch.manual_seed(0)
    weight, grad = torch.randn(6, 4), torch.randn(6, 4)
    params = [torch.nn.Parameter(weight.clone()), torch.nn.Parameter(weight.clone())]
    for p in params:
        p.grad = grad.clone()
    ShardedMuon([params[0]], lr=0.1).step()
    torch.optim.Muon([params[1]], lr=0.1).step()
    assert torch.equal(params[0], params[1])


@pytest.mark.slow
def test_on_row_shards_it_is_torch_muon_on_the_whole_matrix_bit_for_bit(tmp_path, torchrun_two_processes):
    """torch.optim.Muon on the shards orthogonalizes each rank's rows; the owner's whole-matrix step does not, and adds
    a tall matrix's update in torch's layout (bfloat16 add_ rounds a transposed operand differently). A stack of
    experts steps as torch.optim.Muon steps each expert alone, a matrix stored transposed as its map."""
    torchrun_two_processes(SCRIPT)
    results = torch.load(tmp_path / "muon.pt")
    assert len(results) == 10
    for key, (sharded, whole) in results.items():
        assert torch.equal(sharded, whole), key
