import copy
import pickle

import pytest
import torch
from torch import nn

from hf_ext.optim import OptimizerWrapper


class Doubling(OptimizerWrapper):
    """Steps the base twice; saves how often it stepped."""

    def __init__(self, base_optimizer):
        super().__init__(base_optimizer)
        self.steps = 0

    def step(self, closure=None):
        self.base_optimizer.step()
        self.base_optimizer.step()
        self.steps += 1

    def wrapper_state_dict(self) -> dict:
        return {"doubling_steps": self.steps}

    def load_wrapper_state_dict(self, state_dict: dict) -> None:
        self.steps = state_dict["doubling_steps"]


def _wrapped():
    param = nn.Parameter(torch.ones(2))
    param.grad = torch.ones(2)
    return param, Doubling(torch.optim.SGD([param], lr=0.5))


def test_step_hooks_run_around_the_wrapped_step():
    param, optimizer = _wrapped()
    calls = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: calls.append(("pre", opt, param.detach().clone())))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: calls.append(("post", opt, param.detach().clone())))
    optimizer.step()
    assert [(name, opt) for name, opt, _ in calls] == [("pre", optimizer), ("post", optimizer)]
    assert torch.equal(calls[0][2], torch.ones(2)) and torch.equal(calls[1][2], torch.zeros(2))


def test_state_dict_hooks_see_the_wrappers_entries():
    param, optimizer = _wrapped()
    optimizer.step()
    optimizer.register_state_dict_post_hook(lambda opt, state: {**state, "seen": state["doubling_steps"]})
    loaded = []
    optimizer.register_load_state_dict_post_hook(lambda opt: loaded.append(opt.steps))
    state = optimizer.state_dict()
    assert state["seen"] == 1 and "param_groups" in state
    optimizer.load_state_dict({**state, "doubling_steps": 7})
    assert loaded == [7]


def test_copies_leave_hooks_out_as_torch_does_and_still_run_new_ones():
    param, optimizer = _wrapped()
    optimizer.register_step_pre_hook(lambda *args: None)
    for copied in (copy.deepcopy(optimizer), pickle.loads(pickle.dumps(optimizer))):
        assert not copied._optimizer_step_pre_hooks
        seen = []
        copied.register_step_post_hook(lambda opt, args, kwargs, seen=seen: seen.append(opt))
        copied.step()
        assert seen == [copied] and copied.steps == 1


def test_an_added_group_with_a_bad_lr_is_refused():
    _, optimizer = _wrapped()
    with pytest.raises(ValueError, match="Doubling: `lr` of a param group must be >= 0, got -0.1"):
        optimizer.add_param_group({"params": [nn.Parameter(torch.ones(1))], "lr": -0.1})
    with pytest.raises(ValueError, match="Doubling: `lr` must be a finite number, got nan"):
        optimizer.add_param_group({"params": [nn.Parameter(torch.ones(1))], "lr": float("nan")})
