"""The ``torch.optim.Optimizer`` contract, checked on every optimizer and optimizer wrapper hf_ext exports.

Modelled on what PyTorch's own tests expect of every optimizer in its ``optim_db``
(``torch/testing/_internal/common_optimizers.py``, ``test/test_optim.py``: state_dict round trips,
hooks, closures, ``zero_grad``, param groups, ``deepcopy``), plus the ``Trainer``'s checkpoint/resume and a
bfloat16 step. The optimizers are found, not listed: every ``torch.optim.Optimizer`` subclass in the
``__all__`` of an hf_ext sub-package must have an entry in :data:`REGISTRY` (how to build it on the tiny
model below), or be a base class in :data:`BASES`; a new optimizer without one fails
``test_every_exported_optimizer_has_an_entry``. docs/contracts.md tabulates what these checks cover.
"""

import copy
import functools
import importlib
import io
import os
import pickle
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from torch import nn
from torch._dynamo.utils import counters
from transformers import Trainer, TrainerCallback, TrainingArguments

import hf_ext
from hf_ext.optim import (
    NGN,
    SPS,
    DecentralizedSGD,
    GradientSmoothing,
    LossStepOptimizer,
    LossToOptimizerTrainer,
    MuonWithAdamW,
    OptimizerWrapper,
    Scion,
    ShardedMuon,
    SymmetryCurvature,
)
from hf_ext.zo import MeZOConfig, ZOOptimizer, ZOTrainer
from hf_ext.zo.perturbation import ZOPerturbation

BF16_UNIT_ROUNDOFF = 2.0**-8  # bfloat16 keeps 8 significant bits: rounding to nearest is off by at most 2^-8 of it


class Tiny(nn.Module):
    """An input layer, three identical residual blocks (what GradientSmoothing smooths across) and a head.

    ``extra`` starts frozen, so optimizers built from the model leave it out; the add_param_group check
    unfreezes it and adds it as a group of its own. Returns the mean squared error (>= 0, as SPS and NGN need).
    """

    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Linear(3, 6)
        self.blocks = nn.ModuleList(nn.Linear(6, 6) for _ in range(3))
        self.head = nn.Linear(6, 2)
        self.extra = nn.Parameter(torch.zeros(2, 2), requires_grad=False)

    def forward(self, x, labels):
        h = torch.tanh(self.embed(x))
        for block in self.blocks:
            h = h + torch.tanh(block(h))
        out = self.head(h)
        out = out + out @ self.extra
        return {"loss": (out - labels).square().mean(), "logits": out}


def _data(n: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, generator=generator), torch.randn(n, 2, generator=generator)


def _trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def _two_groups(model: nn.Module, **weight_group) -> list[dict]:
    """Matrices in one group, vectors in another (as transformers' Trainer splits decay from no decay)."""
    return [
        {"params": [p for p in _trainable(model) if p.dim() >= 2], **weight_group},
        {"params": [p for p in _trainable(model) if p.dim() < 2]},
    ]


@dataclass(frozen=True)
class Entry:
    """How the contract builds and drives one optimizer on :class:`Tiny`.

    ``build(model)`` returns the optimizer with two or more param groups. ``new_group`` holds what an added
    group must say besides its parameters. ``trainer(model, args, dataset)`` builds the Trainer it trains with,
    under the ``TrainingArguments`` fields ``trainer_settings`` sets. ``backward``: its closure computes
    gradients (False: it only returns the loss, as zeroth-order closures do). ``per_parameter_state``: a step
    leaves state for every parameter it moved (False: it keeps none parameter-sized). ``bf16_writes`` and
    ``bf16_roundings``: ``m`` and ``k`` of the bfloat16 bound (``test_bfloat16_step_agrees_with_float32``),
    counted from the update; ``bf16_roundings=None`` where no bound from bf16 rounding is tighter than the step
    itself, with ``bf16_reason``. ``compiled``: ``torch.compile(optimizer.step)`` compiles it at the first step and
    never again (``False``: runs it as Python, never traced; ``None``: not claimed, ``compile_reason`` says why).
    """

    build: Callable[[nn.Module], torch.optim.Optimizer]
    new_group: dict = field(default_factory=dict)
    trainer: Callable | None = None
    trainer_settings: dict = field(default_factory=dict)
    backward: bool = True
    per_parameter_state: bool = True
    bf16_writes: int = 1
    bf16_roundings: int | None = 2
    bf16_reason: str = ""
    compiled: bool | None = True
    compile_reason: str = ""


def _default_trainer(build, cls=Trainer):
    def trainer(model, args, dataset):
        return cls(model=model, args=args, train_dataset=dataset, optimizers=(build(model), None))

    return trainer


def _zo_optimizer(model):
    return ZOOptimizer(ZOPerturbation(model, MeZOConfig(eps=1e-3)), lr=0.01, seed=0)


def _sps(model):
    return SPS(_two_groups(model), lr=0.5, momentum=0.5, weight_decay=0.01)


def _ngn(model):
    return NGN(_two_groups(model), lr=0.5, momentum=0.9)


def _scion(model):
    return Scion(model, lr=0.05)


def _symmetry_curvature(model):
    return SymmetryCurvature(model, lr=0.01)


def _muon(model):
    return MuonWithAdamW(model, lr=0.02)


def _sharded_muon(model):
    blocks = [block.weight for block in model.blocks]
    return ShardedMuon([{"params": blocks}, {"params": [model.embed.weight, model.head.weight]}], lr=0.02)


def _gradient_smoothing(model):
    return GradientSmoothing(torch.optim.AdamW(_two_groups(model, weight_decay=0.1), lr=0.01), model, window=3)


def _decentralized(model):
    return DecentralizedSGD(torch.optim.SGD(_two_groups(model), lr=0.1, momentum=0.9))


NEWTON_SCHULZ = (
    "its Newton-Schulz step multiplies a rounding along a small singular value by up to 3.4445 per iteration "
    "(3.4445^5 = 485 over 5): no bound from bf16 rounding is tighter than the step itself"
)
NO_CLIP = {"max_grad_norm": 0.0}  # LossToOptimizerTrainer refuses clipping: SPS and NGN size steps from ||g||^2
REGISTRY: dict[type, Entry] = {
    # m: the decay's and the step's writes; k: the momentum buffer's product and sum (the step size comes from
    # the float32 loss and ||g||^2).
    SPS: Entry(_sps, trainer=_default_trainer(_sps, LossToOptimizerTrainer), trainer_settings=NO_CLIP, bf16_writes=2),
    NGN: Entry(_ngn, trainer=_default_trainer(_ngn, LossToOptimizerTrainer), trainer_settings=NO_CLIP),
    Scion: Entry(_scion, trainer=_default_trainer(_scion), bf16_roundings=None, bf16_reason=NEWTON_SCHULZ),
    # State and roots in float32: k counts the direction's cast to bf16 and the decay factor's product.
    SymmetryCurvature: Entry(
        _symmetry_curvature, new_group={"param_names": ["extra"]}, trainer=_default_trainer(_symmetry_curvature)
    ),
    MuonWithAdamW: Entry(
        _muon,
        new_group={"use_muon": True},
        trainer=_default_trainer(_muon),
        bf16_roundings=None,
        bf16_reason=NEWTON_SCHULZ,
        compiled=None,
        compile_reason="its torch.optim.Muon and AdamW make their state at the first step: the second compiles again",
    ),
    ShardedMuon: Entry(
        _sharded_muon, trainer=_default_trainer(_sharded_muon), bf16_roundings=None, bf16_reason=NEWTON_SCHULZ
    ),
    # m: AdamW's decay and step, the smoothing's write-back; k: AdamW's chain (first moment; second moment, its
    # root, bias correction and eps; the ratio), the smoothing's float32 mix of neighbours rounded once more.
    GradientSmoothing: Entry(
        _gradient_smoothing, trainer=_default_trainer(_gradient_smoothing), bf16_writes=3, bf16_roundings=7
    ),
    # One process: no gossip. k: SGD's momentum buffer, its product and sum.
    DecentralizedSGD: Entry(
        _decentralized,
        trainer=_default_trainer(_decentralized),
        compiled=None,
        compile_reason="torch's SGD with momentum, its base here, compiles again at its second step",
    ),
    ZOOptimizer: Entry(
        _zo_optimizer,
        trainer=lambda model, args, dataset: ZOTrainer(
            model=model, args=args, train_dataset=dataset, zo_config=MeZOConfig(eps=1e-3)
        ),
        trainer_settings={"max_grad_norm": 0.0},  # no gradient to clip
        backward=False,
        per_parameter_state=False,
        bf16_roundings=None,
        bf16_reason="its step is a difference of two losses, eps * g, far below their bf16 rounding (2^-8 of the loss)",
        compiled=False,
    ),
}
# Exported base classes, checked through their subclasses.
BASES = {
    LossStepOptimizer: "the base of SPS and NGN",
    OptimizerWrapper: "the base of GradientSmoothing and DecentralizedSGD",
}
ENTRIES = [pytest.param(cls, id=cls.__name__) for cls in REGISTRY]


@functools.cache
def exported_optimizers() -> dict[str, type]:
    """Every ``torch.optim.Optimizer`` subclass in the ``__all__`` of an hf_ext (sub-)package."""
    found = {}
    for info in pkgutil.walk_packages(hf_ext.__path__, "hf_ext."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, torch.optim.Optimizer):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_exported_optimizer_has_an_entry():
    missing = {name for name, cls in exported_optimizers().items() if cls not in REGISTRY and cls not in BASES}
    assert not missing, f"add an Entry to tests/optim/test_contract.py REGISTRY for {sorted(missing)}"
    assert set(REGISTRY) | set(BASES) <= set(exported_optimizers().values())


# -- helpers ------------------------------------------------------------------------------------------------


def _closure(entry: Entry, model: nn.Module, optimizer: torch.optim.Optimizer, rows=slice(0, 8), calls=None):
    """The loss on a fixed batch; with gradients (zeroed first) when ``entry.backward``."""
    x, y = _data()

    def closure():
        if entry.backward:
            optimizer.zero_grad()
        loss = model(x[rows], y[rows])["loss"]
        if entry.backward:
            loss.backward()
        if calls is not None:
            calls.append(loss)
        return loss

    return closure


def _built(cls, seed=0) -> tuple[Entry, nn.Module, torch.optim.Optimizer]:
    entry = REGISTRY[cls]
    model = Tiny(seed)
    return entry, model, entry.build(model)


def _steps(entry, model, optimizer, n, scheduler=None):
    for step in range(n):
        optimizer.step(_closure(entry, model, optimizer, rows=slice(step % 2 * 8, step % 2 * 8 + 8)))
        if scheduler is not None:
            scheduler.step()


def _given_loss(entry: Entry, model: nn.Module, optimizer: torch.optim.Optimizer, rows: slice):
    """A closure returning the loss on ``rows``, the gradients computed already when ``entry.backward``: so that a
    compiled ``step(closure)`` is the step alone, as a ``Trainer`` calls it (no forward and backward traced in it)."""
    x, y = _data()
    if not entry.backward:
        return lambda: model(x[rows], y[rows])["loss"]
    optimizer.zero_grad()
    loss = model(x[rows], y[rows])["loss"]
    loss.backward()
    return lambda: loss.detach()


def _snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _assert_moved(before: dict[str, torch.Tensor], model: nn.Module) -> None:
    """Some parameter changed: a check that compares two runs is empty if neither moves."""
    assert any(not torch.equal(p, before[name]) for name, p in model.named_parameters()), "nothing moved"


def _assert_same_parameters(a: nn.Module, b: nn.Module) -> None:
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), f"{name} differs by {(x - y).abs().max().item()}"


# -- the checks ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ENTRIES)
def test_state_dict_round_trip_under_a_scheduler_continues_bit_exactly(cls):
    entry, model, optimizer = _built(cls)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    _steps(entry, model, optimizer, 2, scheduler)
    buffer = io.BytesIO()
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, buffer)
    saved = optimizer.state_dict()["state"]
    if entry.per_parameter_state:  # as torch's test_non_empty_state: a moved parameter has state, and it is saved
        assert len(saved) == sum(len(group["params"]) for group in optimizer.param_groups) and all(saved.values())
    resumed_model = Tiny(seed=1)  # other weights: everything must come from the checkpoint
    resumed_model.load_state_dict(model.state_dict())
    resumed = entry.build(resumed_model)
    resumed_scheduler = torch.optim.lr_scheduler.StepLR(resumed, step_size=1, gamma=0.5)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)
    resumed_scheduler.load_state_dict(saved["scheduler"])
    resumed.load_state_dict(saved["optimizer"])
    before = _snapshot(model)
    _steps(entry, model, optimizer, 2, scheduler)
    _steps(entry, resumed_model, resumed, 2, resumed_scheduler)
    _assert_moved(before, model)
    assert [g["lr"] for g in resumed.param_groups] == [g["lr"] for g in optimizer.param_groups]
    _assert_same_parameters(model, resumed_model)


class StopAt(TrainerCallback):
    """Ends training after ``step`` (and its checkpoint), as a job killed then would end; the schedule stays that of
    the whole run."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        control.should_training_stop = state.global_step == self.step


def train_with_trainer(cls: type, folder: Path, resume: bool = False, stop_at: int | None = None) -> None:
    """4 steps of ``cls``'s Trainer on :class:`Tiny` (a checkpoint every 2) into ``folder``; the final weights go to
    ``folder/final.pt``. A resumed run starts from other weights: all it has must come from the checkpoint."""
    entry = REGISTRY[cls]
    settings = {"per_device_train_batch_size": 4, "learning_rate": 0.02, "seed": 0, "report_to": "none"}
    settings |= {"use_cpu": True, "bf16": False, "dataloader_pin_memory": False, "disable_tqdm": True}
    args = TrainingArguments(
        output_dir=str(folder), max_steps=4, save_strategy="steps", save_steps=2, **settings | entry.trainer_settings
    )
    x, y = _data()
    model = Tiny(seed=1 if resume else 0)
    trainer = entry.trainer(model, args, Dataset.from_dict({"x": x.tolist(), "labels": y.tolist()}))
    if stop_at is not None:
        trainer.add_callback(StopAt(stop_at))
    trainer.train(resume_from_checkpoint=resume or None)
    torch.save(model.state_dict(), folder / "final.pt")


def _resume_all(root: Path) -> None:
    """Run as ``python test_contract.py ROOT``: resume every ``ROOT/<optimizer>/stopped`` run, in this new process."""
    for cls in REGISTRY:
        folder = root / cls.__name__ / "stopped"
        try:
            train_with_trainer(cls, folder, resume=True)
        except Exception as error:  # reported by that optimizer's test, not by the others'
            (folder / "error.txt").write_text(f"{type(error).__name__}: {error}")


@pytest.fixture(scope="module")
def trainer_runs(tmp_path_factory) -> dict[type, Path]:
    """Every optimizer's 4 steps straight, and stopped after its step-2 checkpoint, here; the stopped runs resumed in
    one new process, so that nothing this process holds (random generators, caches) can carry them."""
    root = tmp_path_factory.mktemp("trainer_runs")
    for cls in REGISTRY:
        train_with_trainer(cls, root / cls.__name__ / "straight")
        train_with_trainer(cls, root / cls.__name__ / "stopped", stop_at=2)
    env = os.environ | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, __file__, str(root)], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return {cls: root / cls.__name__ for cls in REGISTRY}


@pytest.mark.parametrize("cls", ENTRIES)
def test_trainer_checkpoint_resume_in_a_new_process_continues_bit_exactly(cls, trainer_runs):
    folder = trainer_runs[cls]
    error = folder / "stopped" / "error.txt"
    assert not error.exists(), error.read_text() if error.exists() else ""
    straight, resumed = (torch.load(folder / run / "final.pt") for run in ("straight", "stopped"))
    _assert_moved(straight, Tiny())
    for name, tensor in straight.items():
        assert torch.equal(resumed[name], tensor), f"{name} differs by {(resumed[name] - tensor).abs().max().item()}"


@pytest.mark.parametrize("cls", ENTRIES)
def test_add_param_group_validates_and_the_added_group_is_stepped(cls):
    entry, model, optimizer = _built(cls)
    model.extra.requires_grad_(True)
    groups = len(optimizer.param_groups)
    with pytest.raises(ValueError, match="`lr`"):
        optimizer.add_param_group({"params": [model.extra], "lr": -1.0, **entry.new_group})
    assert len(optimizer.param_groups) == groups, "a refused group is not kept"
    optimizer.add_param_group({"params": [model.extra], **entry.new_group})
    assert len(optimizer.param_groups) == groups + 1
    _steps(entry, model, optimizer, 2)
    assert not torch.equal(model.extra, torch.zeros(2, 2))


@pytest.mark.parametrize("cls", ENTRIES)
def test_step_hooks_run_once_before_and_after_and_can_be_removed(cls):
    """torch wraps a class's ``step`` with the hook runner when the first instance of that class is built; a
    ``step`` that calls its parent class's would run the hooks twice once an instance of the parent exists, so
    every optimizer class in the MRO gets its wrapper first, as a process that built one of each would have."""
    for klass in cls.__mro__:
        if issubclass(klass, torch.optim.Optimizer) and klass is not torch.optim.Optimizer:
            torch.optim.Optimizer._patch_step_function(klass.__new__(klass))
    entry, model, optimizer = _built(cls)
    calls = []
    handles = [
        optimizer.register_step_pre_hook(lambda opt, args, kwargs: calls.append(("pre", opt))),
        optimizer.register_step_post_hook(lambda opt, args, kwargs: calls.append(("post", opt))),
    ]
    _steps(entry, model, optimizer, 1)
    assert calls == [("pre", optimizer), ("post", optimizer)]
    for handle in handles:
        handle.remove()
    _steps(entry, model, optimizer, 1)
    assert len(calls) == 2


@pytest.mark.parametrize("cls", [SPS, NGN, Scion, SymmetryCurvature, ShardedMuon])
def test_an_empty_parameter_list_is_refused_naming_the_optimizer(cls):
    """The walk of issue 72: torch's "optimizer got an empty parameter list" named neither the optimizer nor
    `params`; a generator is read once, so an empty one is refused too."""
    for params in ([], (p for p in [])):
        with pytest.raises(ValueError, match=rf"{cls.__name__}: `params` is empty"):
            cls(params)


@pytest.mark.parametrize("cls", ENTRIES)
def test_a_first_step_that_no_gradient_reaches_is_refused(cls):
    """Issue 72: an optimizer built before ``fully_shard`` holds tensors the model no longer uses (FSDP2 gives it new
    parameters); each of ours trained on without moving a weight. Here the model's copy takes their place."""
    entry, model, optimizer = _built(cls)
    if not entry.backward:
        pytest.skip("a zeroth-order step takes no gradients")
    replaced = copy.deepcopy(model)  # the model that computes the loss now; the optimizer holds `model`'s tensors
    with pytest.raises(RuntimeError, match=rf"{cls.__name__}\.step\(\): none of its \d+ parameters .*`fully_shard`"):
        optimizer.step(_closure(entry, replaced, optimizer))
    assert not optimizer.state, "the refused step kept state"


@pytest.mark.parametrize("cls", ENTRIES)
def test_step_calls_the_closure_and_returns_its_loss(cls):
    entry, model, optimizer = _built(cls)
    calls = []
    loss = optimizer.step(_closure(entry, model, optimizer, calls=calls))
    assert calls, "the closure was not called"
    expected = torch.stack([c.detach().float() for c in calls]).mean()  # its mean when evaluated several times
    torch.testing.assert_close(torch.as_tensor(loss).float(), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("cls", ENTRIES)
def test_zero_grad_sets_to_none_or_to_zero(cls):
    entry, model, optimizer = _built(cls)
    closure = _closure(entry, model, optimizer)
    with torch.enable_grad():
        closure()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    had_grad = [p for p in params if p.grad is not None]
    optimizer.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in had_grad)
    optimizer.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in params)


@pytest.mark.parametrize("cls", ENTRIES)
def test_hyperparameters_are_per_group(cls):
    entry, model, optimizer = _built(cls)
    assert len(optimizer.param_groups) >= 2
    frozen = optimizer.param_groups[0]
    frozen["lr"] = 0.0
    before = {p: p.detach().clone() for p in _trainable(model)}
    _steps(entry, model, optimizer, 2)
    assert all(torch.equal(p, before[p]) for p in frozen["params"]), "a group with lr 0 moved"
    others = [p for group in optimizer.param_groups[1:] for p in group["params"]]
    assert any(not torch.equal(p, before[p]) for p in others), "the other groups did not move"


def _public(optimizer) -> set[str]:
    return {name for name in vars(optimizer) if not name.startswith("_")}


@pytest.mark.parametrize(
    "copier", [copy.deepcopy, lambda obj: pickle.loads(pickle.dumps(obj))], ids=["deepcopy", "pickle"]
)
@pytest.mark.parametrize("cls", ENTRIES)
def test_a_copy_keeps_its_public_attributes_and_steps_identically(cls, copier):
    entry, model, optimizer = _built(cls)
    _steps(entry, model, optimizer, 2)
    model_copy, optimizer_copy = copier((model, optimizer))
    assert _public(optimizer_copy) == _public(optimizer)
    before = _snapshot(model)
    _steps(entry, model, optimizer, 2)
    _steps(entry, model_copy, optimizer_copy, 2)
    _assert_moved(before, model)
    _assert_same_parameters(model, model_copy)


@pytest.mark.parametrize("cls", ENTRIES)
def test_bfloat16_step_agrees_with_float32(cls):
    """One step from the same bf16-representable weights, with the same bf16-representable gradient and loss.

    The two steps then differ only by bf16 rounding, each off by at most ``u = 2^-8`` of the rounded number:
    ``m`` writes of the parameter (each ``<= u max|p|``) and ``k`` roundings of numbers of the update's size
    inside its computation (state buffers, products; each ``<= u max|d|``, ``d`` the float32 step). So, for each
    tensor, ``max|p_bf16 - p_fp32| <= u (m max|p_fp32| + k max|d|)``, ``m`` and ``k`` counted per optimizer in
    :data:`REGISTRY`. SymmetryCurvature's bf16 statistics broke it by a factor of thousands (a step twice the
    float32 one).
    """
    entry = REGISTRY[cls]
    if entry.bf16_roundings is None:
        pytest.skip(entry.bf16_reason)
    low = Tiny().to(torch.bfloat16)
    high = copy.deepcopy(low).float()
    x, y = _data()
    loss = high(x[:8], y[:8])["loss"]
    names = [name for name, p in high.named_parameters() if p.requires_grad]
    grads = dict(zip(names, (g.bfloat16() for g in torch.autograd.grad(loss, _trainable(high))), strict=True))
    start = {name: p.detach().float().clone() for name, p in high.named_parameters()}
    for model in (low, high):
        optimizer = entry.build(model)
        named = dict(model.named_parameters())

        def closure(named=named):
            for name, grad in grads.items():
                named[name].grad = grad.to(named[name].dtype)
            return loss.detach()

        optimizer.step(closure)
    for (name, p16), p32 in zip(low.named_parameters(), high.parameters(), strict=True):
        step = (p32.detach() - start[name]).abs().max()
        bound = BF16_UNIT_ROUNDOFF * (entry.bf16_writes * p32.detach().abs().max() + entry.bf16_roundings * step)
        error = (p16.detach().float() - p32.detach()).abs().max()
        assert error <= bound, f"{name}: bf16 off by {error.item():.3g}, bound {bound.item():.3g}"


if __name__ == "__main__":
    _resume_all(Path(sys.argv[1]))


def test_compiled_side_by_side_each_step_compiles_once_and_steps_as_eager():
    """``torch.compile(optimizer.step)`` of every optimizer, all in one process and stepped in turn (as a script with
    several optimizers, or benchmarks/optimizer_step.py, compiles them): each is traced at its first step with no
    frame given up to eager, is never compiled again, and moves its parameters as its eager twin. SymmetryCurvature's
    step, with two or more param groups, was given up and compiled piece by piece."""
    classes = [cls for cls, entry in REGISTRY.items() if entry.compiled is not None]
    runs = {cls: [(model, REGISTRY[cls].build(model)) for model in (Tiny(), Tiny())] for cls in classes}
    torch._dynamo.reset()
    compiled = {cls: torch.compile(runs[cls][1][1].step, backend="aot_eager") for cls in classes}
    first = {}
    for k in range(3):
        rows = slice(k % 2 * 8, k % 2 * 8 + 8)
        for cls in classes:
            (eager_model, eager), (model, optimizer) = runs[cls]
            eager.step(_given_loss(REGISTRY[cls], eager_model, eager, rows))
            closure = _given_loss(REGISTRY[cls], model, optimizer, rows)
            frames, graphs = counters["frames"].copy(), counters["stats"]["unique_graphs"]
            with torch._dynamo.config.patch(error_on_recompile=k > 0):  # a second compilation raises
                compiled[cls](closure)
            if k == 0:
                traced = counters["frames"] - frames  # "total": frames dynamo started, "ok": those it compiled
                first[cls] = (traced["total"] - traced["ok"], counters["stats"]["unique_graphs"] - graphs)
    torch._dynamo.reset()
    for cls in classes:
        given_up, graphs = first[cls]
        assert given_up == 0, f"{cls.__name__}: {given_up} frames given up to eager"
        assert (graphs > 0) == REGISTRY[cls].compiled, f"{cls.__name__}: {graphs} graphs"
        pairs = zip(runs[cls][0][0].named_parameters(), runs[cls][1][0].parameters(), strict=True)
        for (name, eager), compiled_param in pairs:
            torch.testing.assert_close(compiled_param, eager, rtol=1e-5, atol=1e-6, msg=f"{cls.__name__}: {name}")
