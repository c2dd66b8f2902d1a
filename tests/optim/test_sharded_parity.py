"""Every optimizer and wrapper on FSDP2 shards and under DDP steps as one process does (2 CPU processes, gloo).

One torchrun launch of ``benchmarks/sharded.py --worker`` trains every method four steps on a small
Llama in each mode, saving the sharded runs after step 2 (torch.distributed.checkpoint), and writes
the parameters; the tests compare them. One process accumulates the ranks' micro-batches in the same
order, so its gradient is the ranks' average bit for bit and any difference is the distributed
optimizer step's. A second launch (slow) resumes the saved runs in new processes.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "benchmarks" / "sharded.py"
spec = importlib.util.spec_from_file_location("sharded_benchmark", WORKER)
sharded = importlib.util.module_from_spec(spec)
sys.path.insert(0, str(WORKER.parent))  # it imports its sibling _harness, as a script run from benchmarks/ does
spec.loader.exec_module(sharded)
sys.path.remove(str(WORKER.parent))

TOLERANCE = 1e-6  # fp32, relative to each tensor's largest entry


@pytest.fixture(scope="module")
def runs(tmp_path_factory, torchrun) -> Path:
    out = tmp_path_factory.mktemp("sharded")
    torchrun(WORKER, "--worker", "--output-dir", str(out), cwd=out)
    return out


@pytest.fixture(scope="module")
def resumed(runs, torchrun) -> Path:
    torchrun(WORKER, "--worker", "--output-dir", str(runs), "--resume-at", "2", "--modes", "fsdp", "ddp", cwd=runs)
    return runs


@pytest.mark.parametrize("mode", ["fsdp", "ddp"])
@pytest.mark.parametrize("method", list(sharded.METHODS))
def test_the_step_on_two_processes_is_one_process_step(runs, method, mode):
    results = torch.load(runs / f"{method}.pt")
    initial = torch.load(runs / "initial.pt")
    assert sharded.relative_difference(results["single"], initial) > 1e-3, "training changed nothing"
    assert sharded.relative_difference(results[mode], results["single"]) <= TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fsdp", "ddp"])
@pytest.mark.parametrize("method", list(sharded.METHODS))
def test_a_run_saved_after_step_2_resumes_in_new_processes(resumed, method, mode):
    uninterrupted = torch.load(resumed / f"{method}.pt")[mode]
    assert sharded.relative_difference(torch.load(resumed / f"{method}-resumed.pt")[mode], uninterrupted) == 0
