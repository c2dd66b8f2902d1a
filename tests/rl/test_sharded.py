"""The SGD GRPO preset, its sparsity counts and its delta checkpoints on two FSDP2-sharded CPU processes.

Compared with the same two processes unsharded (DDP): GRPO samples its completions per process, so
one process would draw other completions; DDP draws the same ones.
"""

import pytest
import torch

from hf_ext.models import tiny_causal_lm
from hf_ext.rl import apply_sparse_delta
from hf_ext.rl.delta import DELTA_FILE

pytestmark = pytest.mark.parity  # multi-process parity: kept in `make test` although slow


@pytest.mark.slow
def test_sgd_grpo_sharded_equals_the_unsharded_run(distributed_runs):
    sharded, replicated = distributed_runs.sharded("grpo_sgd"), distributed_runs.sharded("grpo_sgd_replicated")
    assert sorted(sharded["sharded"]) == sorted(sharded["params"]) and not replicated["sharded"]
    assert distributed_runs.max_relative_difference(sharded["params"], replicated["params"]) <= 1e-6
    assert sharded["losses"] == replicated["losses"]


@pytest.mark.slow
def test_update_sparsity_counts_whole_tensors_across_the_shards(distributed_runs):
    sharded, replicated = distributed_runs.sharded("grpo_sgd"), distributed_runs.sharded("grpo_sgd_replicated")
    assert len(sharded["sparsity"]) == 4  # three logged steps and the end of training
    assert sharded["sparsity"] == replicated["sparsity"]
    assert sharded["block_sparsity"] == replicated["block_sparsity"]
    assert sharded["checksums"].keys() == replicated["checksums"].keys()
    for name, sums in sharded["checksums"].items():  # the unsharded tensor's blocks, not each shard's
        assert torch.equal(sums, replicated["checksums"][name]), name
    assert 0 < sharded["sparsity"][-1]["sparsity/changed_entry_fraction_bf16"] < 1


@pytest.mark.slow
def test_a_delta_saved_by_the_sharded_run_restores_its_bf16_model_unsharded(distributed_runs):
    trained = distributed_runs.sharded("grpo_sgd")["params"]
    restored = apply_sparse_delta(
        tiny_causal_lm(seed=0)[0], distributed_runs.folder / "grpo_sgd/checkpoint-3" / DELTA_FILE
    )
    for name, param in restored.named_parameters():
        assert torch.equal(param, trained[name].to(torch.bfloat16)), name


@pytest.mark.slow
def test_a_delta_saved_unsharded_restores_onto_a_sharded_model(distributed_runs):
    trained, restored = distributed_runs.sharded("grpo_sgd_replicated"), distributed_runs.sharded("delta_onto_sharded")
    for name, param in restored["params"].items():
        assert torch.equal(param, trained["params"][name].to(torch.bfloat16)), name
