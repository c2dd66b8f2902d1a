"""Two CPU processes sharded by accelerate's FSDP2 (hf_ext.distributed) train as one process does."""

import pytest
import torch

from hf_ext.distributed import fsdp_launch_env
from hf_ext.recipes import recipes_dir


def test_the_shipped_cpu_config_launches_fsdp2_processes_on_cpu():
    environment = fsdp_launch_env(recipes_dir() / "accelerate" / "fsdp2_cpu_2proc.yaml")
    assert environment["ACCELERATE_USE_FSDP"] == "true" and environment["FSDP_VERSION"] == "2"
    assert environment["ACCELERATE_USE_CPU"] == "true"
    assert environment["FSDP_AUTO_WRAP_POLICY"] == "TRANSFORMER_BASED_WRAP"


@pytest.mark.slow
def test_the_trainer_shards_every_parameter_through_accelerate(distributed_runs):
    outcome = distributed_runs.sharded("adamw")
    assert outcome["wrapped"] == "FSDPLlamaForCausalLM"
    assert sorted(outcome["sharded"]) == sorted(outcome["params"]), "every parameter must be a DTensor shard"


@pytest.mark.slow
def test_adamw_on_two_fsdp2_processes_equals_one_process(distributed_runs, tmp_path):
    two, one = distributed_runs.sharded("adamw"), distributed_runs.one_process("adamw", tmp_path)
    assert distributed_runs.max_relative_difference(two["params"], one["params"]) <= 1e-6
    torch.testing.assert_close(two["losses"], one["losses"], rtol=1e-6, atol=0)
