import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402  (torch does not import Triton)

if not torch.cuda.is_available():
    # Triton reads this once, at its first import: run kernels on CPU tensors in the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def torchrun_two_processes(tmp_path):
    """Run ``script tmp_path`` under ``torchrun --nproc_per_node=2`` on CPU; fails the test on a non-zero exit."""

    def run(script: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        torchrun = Path(sys.executable).with_name("torchrun")
        command = [str(torchrun), "--nproc_per_node=2", f"--master_port={port}", str(script), str(tmp_path)]
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    return run
