"""ZOTrainer sharded by accelerate's FSDP2 beyond two processes of the tiny model: four processes, and SmolLM2-135M.

Slow, and not in ``make test``: each launch starts its processes afresh (the two-process tiny-model parity, in
``tests/test_distributed.py``, is). Issue 36.
"""

import pytest

from hf_ext.models import load_causal_lm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def four_processes(launch_distributed_runs, tmp_path_factory):
    """AGZO and MeZO on the tiny model, one global batch of 4 split across 4 sharded processes."""
    return launch_distributed_runs(tmp_path_factory.mktemp("zo_4proc"), ["agzo", "mezo"], nproc_per_node=4)


@pytest.fixture(scope="module")
def smollm2_two_processes(launch_distributed_runs, tmp_path_factory):
    """AGZO and MeZO on pretrained SmolLM2-135M (``SMOLLM2_RUNS``), on 2 sharded processes."""
    return launch_distributed_runs(tmp_path_factory.mktemp("zo_smollm2"), ["agzo_smollm2", "mezo_smollm2"])


@pytest.mark.parametrize("method", ["agzo", "mezo"])
def test_zeroth_order_on_four_fsdp2_processes_follows_one_process(four_processes, tmp_path, method):
    """Each rank holds a quarter of every tensor's rows and draws the whole tensor's noise at its own indices; the
    step differs from one process only by the rounding of the 4 ranks' averaged loss (as at 2 processes)."""
    four, one = four_processes.sharded(method), four_processes.one_process(method, tmp_path)
    assert sorted(four["sharded"]) == sorted(four["params"]), "every parameter must be a DTensor shard"
    assert four_processes.max_relative_difference(four["params"], one["params"]) <= 1e-4
    assert four["losses"] == pytest.approx(one["losses"], rel=1e-6)
    assert four["zo_steps"] == one["zo_steps"] == 3


@pytest.mark.parametrize("method", ["agzo", "mezo"])
def test_zeroth_order_on_smollm2_sharded_follows_one_process(smollm2_two_processes, tmp_path, method):
    """The pretrained model's 30 layers and 49152 x 576 tied embeddings, sharded in two: the same three steps. At
    lr 1e-5 a step moves the weights little against their size, so the updates are compared, not the weights."""
    two = smollm2_two_processes.sharded(f"{method}_smollm2")
    one = smollm2_two_processes.one_process(f"{method}_smollm2", tmp_path)
    initial = {name: p.detach() for name, p in load_causal_lm("smollm2")[0].named_parameters()}
    assert sorted(two["sharded"]) == sorted(two["params"]), "every parameter must be a DTensor shard"
    update_two = {name: p - initial[name] for name, p in two["params"].items()}
    update_one = {name: p - initial[name] for name, p in one["params"].items()}
    assert smollm2_two_processes.max_relative_difference(update_two, update_one) <= 1e-3
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-6)
    assert two["zo_steps"] == one["zo_steps"] == 3
