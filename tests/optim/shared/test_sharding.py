from pathlib import Path

import pytest
import torch

from hf_ext._sharded import sharding
from hf_ext.optim.shared.sharding import OwnerExchange, assign_owners

pytestmark = pytest.mark.parity  # multi-process parity: kept in `make test` although slow

SCRIPT = Path(__file__).with_name("_sharding_run.py")


def test_owners_go_to_the_least_loaded_rank_and_appending_keeps_them():
    assert assign_owners([100, 10, 10, 50], 2) == [0, 1, 1, 1]
    assert assign_owners([100, 10, 10, 50, 30, 30], 2)[:4] == [0, 1, 1, 1]
    assert assign_owners([4, 4, 4], 1) == [0, 0, 0]


def test_plain_tensors_are_computed_where_they_are():
    params = [torch.randn(3, 2), torch.randn(4)]
    exchange = OwnerExchange(params, "test")
    assert sharding(params[0]) is None and exchange.owns(0) and exchange.owns(1)
    out = exchange.run([1, 0], [[params[1]], [params[0]]], lambda index, whole: whole[0] * (index + 1))
    torch.testing.assert_close(out[0], params[1] * 2)
    torch.testing.assert_close(out[1], params[0])


@pytest.mark.slow
def test_each_matrix_is_computed_once_whole_and_sent_back_in_blocks(tmp_path, torchrun_two_processes):
    torchrun_two_processes(SCRIPT)
    seen = torch.load(tmp_path / "exchange.pt")
    assert sorted(index for calls in seen["calls"] for index in calls) == [0, 1, 2]  # once each, on one rank
    assert all(seen["calls"]), "one rank computed everything"
    for result, expected in zip(seen["results"], seen["expected"], strict=True):
        torch.testing.assert_close(result, expected, rtol=0, atol=0)
