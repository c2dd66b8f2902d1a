"""``python -m hf_ext._torchrun``: a failed launch exits with the failed rank's status and its words only."""

import os
import socket
import subprocess
import sys

import pytest


def _launch(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "ranks.py"
    script.write_text("import os, signal, sys, time\nrank = int(os.environ['RANK'])\n" + body)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "hf_ext._torchrun", "--nproc_per_node=2", f"--master_port={port}", str(script)]
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
def test_a_rank_that_exits_with_an_error_gives_the_launch_its_status_and_only_its_words(tmp_path):
    """Issue 37: torchrun added its log lines and a ChildFailedError traceback after a refused resume's one line."""
    failing_rank_0 = "if rank == 0:\n    print('why it failed', file=sys.stderr)\n    sys.exit(3)\ntime.sleep(60)\n"
    result = _launch(tmp_path, failing_rank_0)
    assert result.returncode == 3
    assert result.stderr.strip().splitlines() == ["why it failed"]


@pytest.mark.slow
def test_a_rank_killed_by_a_signal_is_named_in_one_line(tmp_path):
    result = _launch(tmp_path, "if rank == 1:\n    os.kill(os.getpid(), signal.SIGKILL)\ntime.sleep(60)\n")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("torchrun: rank 1 (pid ")
    assert result.stderr.strip().splitlines()[-1].endswith(") was killed by SIGKILL")
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_launch_whose_ranks_succeed_exits_0(tmp_path):
    result = _launch(tmp_path, "print(f'rank {rank}')\n")
    assert result.returncode == 0 and sorted(result.stdout.split("\n")[:2]) == ["rank 0", "rank 1"]
