"""An optimizer built before ``fully_shard`` refuses its first step on 2 processes, where it trained on without moving
a weight (issue 72); tests/optim/test_contract.py checks the same refusal on one process for every optimizer."""

import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("_built_before_sharding.py")


@pytest.mark.slow
def test_every_method_built_before_fully_shard_refuses_its_first_step(tmp_path, torchrun_two_processes):
    torchrun_two_processes(SCRIPT)
    raised = json.loads((tmp_path / "raised.json").read_text())
    assert raised.pop("torch_sgd") is None  # torch's own steps on without moving a weight: the mistake caught here
    for method, message in raised.items():
        assert message is not None, f"{method} stepped"
        assert "none of its" in message and "shard the model first, then build the optimizer" in message, message
