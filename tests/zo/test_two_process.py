import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hf_ext.models import tiny_causal_lm

SCRIPT = Path(__file__).with_name("_two_process_run.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_cpu_processes_keep_bit_identical_replicas(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--nproc_per_node=2", f"--master_port={_free_port()}", str(SCRIPT), str(tmp_path)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert rank0["num_processes"] == rank1["num_processes"] == 2
    assert rank0["wrapped"] != "DistributedDataParallel"
    assert not torch.equal(rank0["first_batch"], rank1["first_batch"]), "each process must get its own shard"
    initial = dict(tiny_causal_lm(seed=0)[0].named_parameters())
    assert any(not torch.equal(p, initial[n]) for n, p in rank0["params"].items()), "training changed nothing"
    assert all(torch.equal(p, rank1["params"][n]) for n, p in rank0["params"].items())
