"""DecentralizedSGD refuses FSDP2 shards: it keeps a whole model on each process and gossips it."""

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

from hf_ext.optim import DecentralizedSGD


@pytest.fixture
def one_process_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_fsdp2_shards_are_refused_naming_what_to_do(one_process_group):
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    fully_shard(model)
    with pytest.raises(ValueError, match=r"DTensor shards \(FSDP2\).*shard nothing and use no DDP"):
        DecentralizedSGD(torch.optim.SGD(model.parameters(), lr=0.1))
