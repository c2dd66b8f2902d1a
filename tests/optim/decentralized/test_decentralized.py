"""DecentralizedSGD on one process (no process group): the base step, buckets, state and bad input."""

import pytest
import torch
from torch import nn

from hf_ext.optim import DecentralizedSGD, DecentralizedSGDFactory, Topology, find_decentralized


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))


def _step(model, optimizer):
    optimizer.zero_grad()
    model(torch.ones(2, 4)).square().sum().backward()
    optimizer.step()


@pytest.mark.parametrize("order", ["atc", "cta"])
def test_one_worker_is_the_base_optimizer_bit_for_bit(order):
    plain, wrapped = _model(), _model()
    base = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.9)
    decentralized = DecentralizedSGD(torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9), "ring", order)
    for _ in range(3):
        _step(plain, base)
        _step(wrapped, decentralized)
    for p, q in zip(plain.parameters(), wrapped.parameters(), strict=True):
        assert torch.equal(p, q)
    assert decentralized.rounds == 3 and decentralized.communicator.bytes_sent == 0
    assert decentralized.consensus_distance() == 0.0


def test_buckets_split_by_size_and_round_trip():
    model = _model()
    optimizer = DecentralizedSGD(torch.optim.SGD(model.parameters(), lr=0.1), bucket_cap_mb=40 / 2**20)
    # 4x3 weight (48 bytes) alone; 3 bias (12) + 3x2 weight (24) = 36; 2 bias (8)
    assert [[tuple(p.shape) for p in bucket] for bucket in optimizer.buckets] == [[(3, 4)], [(3,), (2, 3)], [(2,)]]
    before = [p.detach().clone() for p in model.parameters()]
    optimizer.gossip()  # one worker: the round trip through the flat buffers changes nothing
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True))


def test_state_dict_round_trip_keeps_the_round_counter():
    model = _model()
    optimizer = DecentralizedSGD(torch.optim.Adam(model.parameters(), lr=0.1), "one_peer_exponential")
    for _ in range(5):
        _step(model, optimizer)
    state = optimizer.state_dict()
    assert state["gossip_rounds"] == 5
    fresh = DecentralizedSGD(torch.optim.Adam(model.parameters(), lr=0.1), "one_peer_exponential")
    fresh.load_state_dict(state)
    assert fresh.rounds == 5
    for p in model.parameters():
        torch.testing.assert_close(fresh.state[p]["exp_avg"], optimizer.state[p]["exp_avg"])
    assert fresh.state_dict() == state


def test_an_added_group_joins_the_gossip_buckets():
    model = _model()
    optimizer = DecentralizedSGD(torch.optim.SGD(model.parameters(), lr=0.1))
    extra = nn.Parameter(torch.ones(5))
    optimizer.add_param_group({"params": [extra], "lr": 0.2})
    assert any(p is extra for bucket in optimizer.buckets for p in bucket)
    assert sum(p.numel() for bucket in optimizer.buckets for p in bucket) == 15 + 8 + 5
    with pytest.raises(ValueError, match="DecentralizedSGD: `lr` of a param group must be >= 0, got -1.0"):
        optimizer.add_param_group({"params": [nn.Parameter(torch.ones(1))], "lr": -1.0})


def test_param_groups_are_the_base_optimizers():
    model = _model()
    base = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer = DecentralizedSGD(base)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5)
    _step(model, optimizer)
    scheduler.step()
    assert base.param_groups[0]["lr"] == pytest.approx(0.05)


def test_averaged_parameters_on_one_worker_restores_own_weights():
    model = _model()
    optimizer = DecentralizedSGD(torch.optim.SGD(model.parameters(), lr=0.1))
    with optimizer.averaged_parameters():
        with torch.no_grad():
            model[0].weight.add_(1.0)  # changes inside the block are not kept
    assert torch.equal(model[0].weight, _model()[0].weight)


def test_factory_and_find():
    optimizer = DecentralizedSGDFactory()(_model(), base_kwargs={"lr": 0.2}, topology="exponential", order="cta")
    assert isinstance(optimizer, DecentralizedSGD) and optimizer.param_groups[0]["lr"] == 0.2
    assert optimizer.topology.name == "exponential" and optimizer.order == "cta"

    class Wrapper:  # accelerate's AcceleratedOptimizer keeps ours as `.optimizer`
        def __init__(self, optimizer):
            self.optimizer = optimizer

    assert find_decentralized(Wrapper(optimizer)) is optimizer
    assert find_decentralized(torch.optim.SGD(_model().parameters(), lr=0.1)) is None


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"order": "both"}, ValueError, r"`order` must be one of \['atc', 'cta'\], got 'both'"),
        ({"bucket_cap_mb": 0}, ValueError, "`bucket_cap_mb` must be > 0"),
        ({"bucket_cap_mb": float("nan")}, ValueError, "`bucket_cap_mb` must be a finite number"),
        ({"topology": [[0.5, 0.5], [0.5, 0.5]]}, ValueError, "the 2 x 2 mixing matrix needs 2 processes, but 1 exist"),
        ({"topology": Topology("ring", 4)}, ValueError, "the topology is for 4 workers, but 1 processes exist"),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        DecentralizedSGD(torch.optim.SGD(_model().parameters(), lr=0.1), **kwargs)


def test_base_must_be_an_optimizer():
    with pytest.raises(TypeError, match="`base_optimizer` must be a torch.optim.Optimizer, got list"):
        DecentralizedSGD([])
