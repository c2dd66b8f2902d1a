"""AGZO and MeZO (the update ``ZOTrainer`` applies, stepped through ``ZOOptimizer``) on the zoo.

GPT-2: every parameter moves as it moves in the same model with ``nn.Linear`` layers (float64, so that the two
models' losses agree to far below the estimate's size). Elsewhere, AGZO: every trainable hidden matrix (linear
layers, MoE routers, each expert a token reached) moves, and each one's update lies in the span of the rows
that matrix read in the step's capture forward (recorded from the model's own ``F.linear`` calls, so the
recording does not share code with AGZO's hooks); MeZO: every trainable parameter moves and nothing frozen does.
"""

import torch
from torch.overrides import TorchFunctionMode
from zoo_architectures import build
from zoo_equivalents import as_stored, conv1d_as_linear, conv1d_weight_names
from zoo_matrix import MethodCheck

from hf_ext.models.layout import model_layout
from hf_ext.zo import AGZOConfig, MeZOConfig, ZOOptimizer, ZOPerturbation

MOE = ("mixtral", "qwen2_moe", "qwen3_moe")
# Rank 2: BERT's pooler and classifier read BATCH = 2 rows. With more columns than rows, QR fills a linear layer's
# basis with rounding noise outside the rows' span (kept so: the measured MiniLM runs depend on it; experts zero it).
AGZO_CONFIG = AGZOConfig(rank=2)


def _zo_updates(model, batch, config, steps: int = 1, recorder=None) -> dict[str, torch.Tensor]:
    """How far ``steps`` ZO steps move each parameter; ``recorder`` is active during the step's first forward."""
    optimizer = ZOOptimizer(ZOPerturbation(model, config), lr=1e-2, seed=0)
    before = {name: param.detach().clone() for name, param in model.named_parameters()}
    calls = []

    def closure():
        calls.append(1)
        if recorder is not None and len(calls) == 1:
            with recorder:
                return model(**batch).loss
        return model(**batch).loss

    for _ in range(steps):
        optimizer.step(closure)
    return {name: param.detach() - before[name] for name, param in model.named_parameters()}


def _assert_conv1d_moves_as_linear(config) -> None:
    model, batch = build("gpt2")
    twin = conv1d_as_linear(model).double()
    model.double()
    moved, expected = _zo_updates(model, batch, config, steps=2), _zo_updates(twin, batch, config, steps=2)
    for name, delta in moved.items():
        torch.testing.assert_close(delta, as_stored(model, name, expected[name]), rtol=1e-6, atol=1e-12)
    assert all(moved[name].abs().max() > 0 for name in conv1d_weight_names(model))


class _LinearInputs(TorchFunctionMode):
    """Records the rows each weight matrix reads through ``F.linear``; an expert tensor's slice by its expert."""

    def __init__(self, model):
        super().__init__()
        self.parameters = {id(param): name for name, param in model.named_parameters()}
        self.rows: dict[tuple[str, int], list[torch.Tensor]] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.linear:
            weight = args[1] if len(args) > 1 else kwargs["weight"]
            base = weight if weight._base is None else weight._base
            if id(base) in self.parameters:
                expert = weight.storage_offset() // base.stride(0) if base.dim() == 3 else 0
                rows = args[0].detach().reshape(-1, args[0].shape[-1]).double()
                self.rows.setdefault((self.parameters[id(base)], expert), []).append(rows)
        return func(*args, **kwargs)


def _assert_agzo_moves_in_input_spans(architecture: str, config: AGZOConfig) -> None:
    model, batch = build(architecture)
    if architecture in MOE:
        model.set_experts_implementation("eager")  # its per-expert F.linear calls are what the recorder reads
    targeted = set(ZOPerturbation(model, config).matrix_names.values())
    recorder = _LinearInputs(model)
    moved = _zo_updates(model, batch, config, recorder=recorder)
    for name, layout in model_layout(model).items():
        assert name in targeted or layout.role != "hidden", f"{name}: a trainable hidden matrix left out"
        if name not in targeted:
            assert not moved[name].any(), f"{name} ({layout.role}) moved under other_params='frozen'"
            continue
        for expert, delta in enumerate(layout.matrices(moved[name]).double()):
            rows = recorder.rows.get((name, expert))
            if rows is None:  # an expert no token reached: its gradient is zero
                assert not delta.any(), f"{name}: expert {expert} read nothing but moved"
                continue
            assert delta.abs().max() > 0, f"{name} (matrix {expert}) did not move"
            span = torch.linalg.svd(torch.cat(rows), full_matrices=False)
            basis = span.Vh[span.S > 1e-6 * span.S[0]]
            outside = delta - delta @ basis.T @ basis
            assert outside.norm() <= 1e-4 * delta.norm(), f"{name} (matrix {expert}) moved outside its inputs' span"
    assert all(not d.any() for n, d in moved.items() if not model.get_parameter(n).requires_grad)


def _assert_mezo_moves_every_trainable_parameter(architecture: str, config: MeZOConfig) -> None:
    model, batch = build(architecture)
    moved = _zo_updates(model, batch, config)
    for name, param in model.named_parameters():
        assert bool(moved[name].any()) == param.requires_grad, f"{name} (trainable: {param.requires_grad})"


def _check(config, structural):
    def check(architecture: str) -> None:
        if architecture == "gpt2":
            _assert_conv1d_moves_as_linear(config)
        else:
            structural(architecture, config)

    return check


CHECKS = [
    MethodCheck(
        "AGZO",
        "ZOTrainer(model, args, zo_config=AGZOConfig())",
        "GPT-2's Conv1D weights move as the equivalent nn.Linear's (transposed); elsewhere every trainable hidden "
        "matrix moves (MoE routers, and each expert a token reached) and only within the span of the rows it read",
        _check(AGZO_CONFIG, _assert_agzo_moves_in_input_spans),
    ),
    MethodCheck(
        "MeZO",
        "ZOTrainer(model, args, zo_config=MeZOConfig())",
        "GPT-2's Conv1D weights move as the equivalent nn.Linear's (transposed); elsewhere every trainable "
        "parameter moves (MoE routers and experts included) and no frozen one does",
        _check(MeZOConfig(), _assert_mezo_moves_every_trainable_parameter),
    ),
]
