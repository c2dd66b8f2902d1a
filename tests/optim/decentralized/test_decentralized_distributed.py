"""Decentralized SGD on real gloo process groups (torchrun, 2 and 4 CPU processes), each run under a timeout."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.parity  # multi-process parity: kept in `make test` although slow

WORKERS = Path(__file__).with_name("_dsgd_workers.py")
TIMEOUT = 120


def torchrun(nproc: int, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``_dsgd_workers.py args`` on ``nproc`` CPU processes; kills the whole job if it outlives TIMEOUT."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        str(Path(sys.executable).with_name("torchrun")),
        f"--nproc_per_node={nproc}",
        f"--master_port={port}",
        str(WORKERS),
        *args,
    ]
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        command, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"torchrun {' '.join(args)} hung for more than {TIMEOUT} s")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _run(nproc: int, job: str, tmp_path: Path) -> list[dict]:
    result = torchrun(nproc, job, str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [torch.load(tmp_path / f"{job}{rank}.pt") for rank in range(nproc)]


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory) -> list[dict]:
    """One 4-process run (starting torchrun costs more than the work): every rank's rounds and steps."""
    return _run(4, "gossip", tmp_path_factory.mktemp("gossip"))


def test_one_gossip_round_is_the_dense_matrix_product_on_4_processes(four_ranks):
    ranks = four_ranks
    for case in (
        "ring/0",
        "torus/0",
        "exponential/0",
        "one_peer_exponential/0",
        "one_peer_exponential/1",
        "complete/0",
        "custom/0",
    ):
        before = torch.stack([rank[case][0] for rank in ranks]).double()
        after = torch.stack([rank[case][1] for rank in ranks]).double()
        matrix = ranks[0][case][2]
        torch.testing.assert_close(after, matrix @ before, rtol=1e-6, atol=1e-6, msg=case)
    assert torch.equal(ranks[0]["custom/0"][2], ranks[0]["custom_matrix"].double())
    # Bytes: rank 0 sends 2 buffers of 3 float32 to each worker that listens to it, per case:
    # ring 2, torus (2 x 2: the same 2 neighbours twice) 2, exponential 2 (1 and 2 listen), one-peer 1 + 1,
    # complete 3, custom 2 (rows 1 and 2 of the matrix hold rank 0).
    assert ranks[0]["bytes_sent"] == 24 * (2 + 2 + 2 + 1 + 1 + 3 + 2)


def test_update_rules_and_consensus_on_4_processes(four_ranks):
    ranks = four_ranks
    ring = torch.tensor([[1, 1, 0, 1], [1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 1, 1]], dtype=torch.float32) / 3
    lr = 0.1
    for order in ("atc", "cta"):
        x = torch.stack([rank[order][0] for rank in ranks])
        gradient = x - torch.stack([rank[order][1] for rank in ranks])
        expected = ring @ (x - lr * gradient) if order == "atc" else ring @ x - lr * gradient  # by hand
        torch.testing.assert_close(torch.stack([rank[order][2] for rank in ranks]), expected, msg=order)
        assert ranks[0][order][3] == 3  # three buckets: the messages were split as asked
    joined = torch.stack([rank["added"][0] for rank in ranks])
    assert torch.equal(joined, torch.zeros(4, 2))  # an added parameter starts from rank 0's value on every worker
    before, after = torch.stack([rank["added"][1] for rank in ranks]), torch.stack([rank["added"][2] for rank in ranks])
    torch.testing.assert_close(after, ring @ before)  # and is gossiped (it never was: not in the buckets)
    distances, mean, _ = ranks[0]["consensus"]
    assert distances[0] > 0.5
    gap = ranks[0]["spectral_gap"]
    assert gap == pytest.approx(2 / 3)  # ring of 4: eigenvalues 1, 1/3, 1/3, -1/3
    for before, after in zip(distances, distances[1:], strict=False):
        if before > 1e-8 * distances[0]:  # above float32 round-off: at least the spectral rate per round
            assert after <= (1 - gap) ** 2 * before * (1 + 1e-4)
    assert distances[-1] < 1e-9 * distances[0]
    for rank in ranks:  # every worker ends at the mean of the starting points, which gossip preserves
        torch.testing.assert_close(rank["consensus"][2], mean, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("topology", "refusing", "message"),
    [
        ("torus", [0, 1], "`topology='torus'` needs a world size r x c with r, c >= 2"),
        pytest.param(  # rank 0 is fine and waits in the first broadcast: the job must still end
            "rank1_not_doubly_stochastic", [1], "must be doubly stochastic; row 0 sums to 1.2", marks=pytest.mark.slow
        ),
    ],
)
def test_bad_topology_is_refused_at_start_never_hangs(tmp_path, topology, refusing, message):
    result = torchrun(2, "refuse", str(tmp_path), topology, cwd=tmp_path)
    assert result.returncode != 0
    for rank in refusing:
        assert message in (tmp_path / f"refused{rank}.txt").read_text()
    assert message in result.stderr
