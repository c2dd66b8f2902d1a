from pathlib import Path

import pytest
import torch

from hf_ext.models import tiny_causal_lm

pytestmark = pytest.mark.parity  # multi-process parity: kept in `make test` although slow

SCRIPT = Path(__file__).with_name("_two_process_run.py")


@pytest.mark.slow
def test_two_cpu_processes_keep_bit_identical_replicas(tmp_path, torchrun_two_processes):
    torchrun_two_processes(SCRIPT)
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert rank0["num_processes"] == rank1["num_processes"] == 2
    assert rank0["wrapped"] != "DistributedDataParallel"
    assert not torch.equal(rank0["first_batch"], rank1["first_batch"]), "each process must get its own shard"
    initial = dict(tiny_causal_lm(seed=0)[0].named_parameters())
    assert any(not torch.equal(p, initial[n]) for n, p in rank0["params"].items()), "training changed nothing"
    assert all(torch.equal(p, rank1["params"][n]) for n, p in rank0["params"].items())
