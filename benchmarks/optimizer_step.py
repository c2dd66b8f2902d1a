"""What one optimizer step costs on a real model shape: every hf-ext optimizer against torch's own, side by side.

    OMP_NUM_THREADS=1 python benchmarks/optimizer_step.py [--shapes smollm2 moe] [--dtypes fp32 bf16] [--seeds 0 1]
        [--layers 4 --hidden 256] [--compiled]

On a SmolLM2-135M-shaped Llama and a Mixtral-shaped MoE (random init, gradients given, the step alone): the
median step time of each optimizer, measured interleaved with the others in one process (round-robin, so a
machine that slows down slows all alike), as a ratio to torch's AdamW (foreach) and to the method's own
outside anchor (Scion: ``torch.optim.Muon`` with AdamW, at the same Newton-Schulz steps; SymmetryCurvature:
a one-sided Shampoo-style step with the same inverse roots at equal storage; SPS, NGN and GradientSmoothing:
AdamW), the optimizer state in bytes per parameter, and the step's peak memory above the model and its
gradients (CUDA: the allocator's peak; CPU: not measured, the process's RSS cannot isolate one step).
Over seeds (new weights and gradients), mean and spread of the per-seed medians. ``--layers`` and ``--hidden`` scale
both shapes down (heads of 64, the MLP as wide relative to ``hidden``) to a model a CPU compiles and steps in minutes.
With ``--compiled``, each chosen optimizer's step is also timed under ``torch.compile`` (``<name>+compiled``,
compilation in the warm-up round), as a ratio to its own eager step, with the graphs and frames dynamo compiled for
it in the warm-up round and the frames it compiled again in the timed rounds (``recompiled_frames``: 0 when it
compiles once). The last line is JSON.
"""

import math
import statistics
import time
from collections.abc import Callable

import torch
from _harness import benchmark_parser, emit, save_json
from torch import nn
from torch._dynamo.utils import counters
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

from hf_ext.models import SMOLLM2_135M_SHAPE
from hf_ext.optim import NGN, SPS, GradientSmoothing, MuonWithAdamW, Scion, SymmetryCurvature, inverse_root

COMPILED = "+compiled"  # the suffix of an optimizer timed under torch.compile
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# A Mixtral with SmolLM2's width: 8 experts of SmolLM2's MLP over 8 layers (about as many parameters).
MOE_SHAPE = {
    **{k: SMOLLM2_135M_SHAPE[k] for k in ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads")},
    "intermediate_size": SMOLLM2_135M_SHAPE["intermediate_size"] // 2,
    "num_hidden_layers": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "tie_word_embeddings": True,
}


# torch.compile keeps this many compiled versions of one function; every optimizer's step runs through torch.optim's
# one step wrapper, which needs a version per optimizer compiled (and another for one stepped inside a wrapper).
RECOMPILE_LIMIT = 64


def scaled(shape: dict, layers: int | None, hidden: int | None) -> dict:
    """``shape`` with ``layers`` blocks and width ``hidden`` (a multiple of 64), where given: heads of 64, about three
    query heads per key-value head, and the MLP as wide relative to ``hidden`` as in ``shape``."""
    shape = dict(shape)
    if layers is not None:
        shape["num_hidden_layers"] = layers
    if hidden is not None:
        heads = hidden // 64
        ratio = shape["intermediate_size"] / shape["hidden_size"]
        shape.update(hidden_size=hidden, intermediate_size=round(ratio * hidden), num_attention_heads=heads)
        shape.update(num_key_value_heads=math.gcd(heads, max(1, heads // 3)), head_dim=64)
    return shape


def build_model(
    shape: str,
    dtype: torch.dtype,
    seed: int,
    device: torch.device,
    layers: int | None = None,
    hidden: int | None = None,
) -> nn.Module:
    """The model of ``shape`` (scaled by ``layers`` and ``hidden``, see :func:`scaled`) with random weights and random
    gradients (both drawn from ``seed``)."""
    torch.manual_seed(seed)
    if shape == "smollm2":
        model = LlamaForCausalLM(LlamaConfig(**scaled(SMOLLM2_135M_SHAPE, layers, hidden)))
    else:
        model = MixtralForCausalLM(MixtralConfig(**scaled(MOE_SHAPE, layers, hidden)))
    model = model.to(device=device, dtype=dtype)
    for param in model.parameters():
        param.grad = torch.randn_like(param) * 1e-3
    return model


class OneSidedShampoo(torch.optim.Optimizer):
    """The Shampoo-style anchor: ``R <- b R + (1 - b) G^T G``, step ``G (R + eps I)^(-1/2)`` on hidden matrices
    (the one-sided estimate of Shampoo and of SymmetryCurvature's orthogonal group, ``d_in^2`` numbers per
    matrix), inverse roots by eigendecomposition every step; AdamW on the rest, as in the usual setup."""

    def __init__(self, model: nn.Module, lr: float = 1e-3, beta: float = 0.95, eps: float = 1e-8):
        special = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        matrices = [p for p in model.parameters() if p.dim() == 2 and id(p) not in special]
        rest = [p for p in model.parameters() if all(p is not m for m in matrices)]
        super().__init__([{"params": matrices}], {"lr": lr, "beta": beta, "eps": eps})
        self.adamw = torch.optim.AdamW(rest, lr=lr, foreach=True)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad.float()
                state = self.state[p]
                if "right" not in state:
                    state["right"] = torch.zeros(g.shape[1], g.shape[1], dtype=torch.float32, device=p.device)
                state["right"].lerp_(g.T @ g, 1 - group["beta"])
                p.add_((g @ inverse_root(state["right"], 2, group["eps"])).to(p.dtype), alpha=-group["lr"])
        self.adamw.step()


def _loss_closure() -> Callable[[], torch.Tensor]:
    """The loss SPS and NGN read at ``step``: a fixed value (the step alone is timed, no forward)."""
    loss = torch.tensor(2.5)
    return lambda: loss


OPTIMIZERS: dict[str, tuple[Callable[[nn.Module], torch.optim.Optimizer], str]] = {
    # name: (builder, anchor)
    "adamw_foreach": (lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=True), "adamw_foreach"),
    "adamw_fused": (lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True), "adamw_foreach"),
    "muon_adamw": (lambda m: MuonWithAdamW(m, lr=1e-3), "adamw_foreach"),
    "shampoo_one_sided": (lambda m: OneSidedShampoo(m), "adamw_foreach"),
    "sps": (lambda m: SPS(m.parameters(), lr=0.1), "adamw_foreach"),
    "ngn": (lambda m: NGN(m.parameters(), lr=0.1), "adamw_foreach"),
    "gradient_smoothing": (
        lambda m: GradientSmoothing(torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=True), m, window=3),
        "adamw_foreach",
    ),
    "scion": (lambda m: Scion(m, lr=0.01), "muon_adamw"),
    "symmetry_curvature": (lambda m: SymmetryCurvature(m, lr=1e-3), "shampoo_one_sided"),
    # The anchor's structure (one d_in x d_in root per matrix; the default group has two): the cost at equal work.
    "symmetry_curvature_orthogonal": (
        lambda m: SymmetryCurvature(m, lr=1e-3, group="orthogonal"),
        "shampoo_one_sided",
    ),
}


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in the optimizer's state (inner optimizers of a wrapper included, each once)."""
    seen, total = set(), 0
    stack = [optimizer]
    while stack:
        opt = stack.pop()
        for state in opt.state.values():
            for value in state.values():
                if torch.is_tensor(value) and id(value) not in seen:
                    seen.add(id(value))
                    total += value.numel() * value.element_size()
        stack.extend(getattr(opt, "optimizers", []))
        stack.extend(o for o in (getattr(opt, "adamw", None), getattr(opt, "base_optimizer", None)) if o is not None)
    return total


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    shape: str, dtype: torch.dtype, seed: int, names: list[str], repeats: int, device, layers=None, hidden=None
) -> dict[str, dict]:
    """Per optimizer: the median step seconds over ``repeats`` interleaved rounds, state bytes, peak bytes; for a
    compiled step, what dynamo compiled in the warm-up round and again in the timed ones."""
    model = build_model(shape, dtype, seed, device, layers, hidden)
    snapshot = {name: p.detach().clone() for name, p in model.named_parameters()}
    n_params = sum(p.numel() for p in model.parameters())
    optimizers, steps, results = {}, {}, {}
    for name in names:
        base, compiled = _parse(name)
        optimizers[name] = OPTIMIZERS[base][0](model)
        steps[name] = torch.compile(optimizers[name].step) if compiled else optimizers[name].step
        results[name] = {"seconds": [], "peak_bytes": None}
        if compiled:
            results[name].update(graphs=0, compiled_frames=0, recompiled_frames=0)
    closure = _loss_closure()
    for round_index in range(repeats + 1):  # round 0 warms up (state allocation, first-step work, compilation)
        for name, step in steps.items():
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
                base = torch.cuda.memory_allocated(device)
            graphs, frames = counters["stats"]["unique_graphs"], counters["frames"]["total"]
            _synchronize(device)
            start = time.perf_counter()
            with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
                step(closure)
            _synchronize(device)
            elapsed = time.perf_counter() - start
            if "graphs" in results[name]:
                compiled_now = counters["frames"]["total"] - frames
                if round_index:
                    results[name]["recompiled_frames"] += compiled_now
                else:
                    results[name]["graphs"] = counters["stats"]["unique_graphs"] - graphs
                    results[name]["compiled_frames"] = compiled_now
            if round_index:
                results[name]["seconds"].append(elapsed)
            if device.type == "cuda":
                results[name]["peak_bytes"] = torch.cuda.max_memory_allocated(device) - base
            with torch.no_grad():  # every optimizer steps from the same weights
                for param_name, param in model.named_parameters():
                    param.copy_(snapshot[param_name])
    for name, optimizer in optimizers.items():
        results[name]["median_s"] = statistics.median(results[name]["seconds"])
        results[name]["state_bytes_per_param"] = state_bytes(optimizer) / n_params
    results["_parameters"] = n_params
    return results


def summarize(per_seed: list[dict[str, dict]], names: list[str]) -> dict[str, dict]:
    """Mean and spread over seeds of each optimizer's median, ratio to AdamW and to its anchor."""
    summary = {}
    for name in names:
        anchor = _anchor(name)
        medians = [run[name]["median_s"] for run in per_seed]
        to_adamw = [run[name]["median_s"] / run["adamw_foreach"]["median_s"] for run in per_seed]
        entry = {
            "step_s": _mean_spread(medians),
            "ratio_to_adamw": _mean_spread(to_adamw),
            "anchor": anchor,
            "state_bytes_per_param": per_seed[0][name]["state_bytes_per_param"],
            "peak_bytes": per_seed[0][name]["peak_bytes"],
        }
        if anchor in names:
            entry["ratio_to_anchor"] = _mean_spread(
                [run[name]["median_s"] / run[anchor]["median_s"] for run in per_seed]
            )
        for key in ("graphs", "compiled_frames", "recompiled_frames"):
            if key in per_seed[0][name]:
                entry[key] = [run[name][key] for run in per_seed]
        summary[name] = entry
    return summary


def _parse(name: str) -> tuple[str, bool]:
    """``"scion+compiled"`` -> ``("scion", True)``: the optimizer and whether its step runs under torch.compile."""
    base, found, _ = name.partition(COMPILED)
    return base, bool(found)


def _anchor(name: str) -> str:
    """What a result is compared with: a compiled step with its own eager step, the others with their outside tool."""
    base, compiled = _parse(name)
    return base if compiled else OPTIMIZERS[base][1]


def _line(name: str, result: dict) -> str:
    """``name``'s median step, and for a compiled one its graphs and recompiled frames."""
    if "graphs" not in result:
        return f"{name} {result['median_s']:.3f}s"
    return f"{name} {result['median_s']:.3f}s ({result['graphs']} graphs, {result['recompiled_frames']} recompiled)"


def _mean_spread(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1])
    parser.add_argument("--shapes", nargs="+", default=["smollm2", "moe"], choices=["smollm2", "moe"])
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=list(DTYPES))
    parser.add_argument("--optimizers", nargs="+", default=list(OPTIMIZERS), choices=list(OPTIMIZERS))
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per seed (default: %(default)s)")
    parser.add_argument("--layers", type=int, help="blocks of both shapes (default: the shape's own)")
    parser.add_argument("--hidden", type=int, help="width of both shapes, a multiple of 64 (default: the shape's own)")
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also time each chosen optimizer's step under torch.compile, as a ratio to its eager step",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.hidden is not None and (args.hidden < 64 or args.hidden % 64):
        parser.error(f"--hidden must be a positive multiple of 64 (heads of 64), got {args.hidden}")
    names = list(dict.fromkeys(["adamw_foreach", *args.optimizers]))
    names += [OPTIMIZERS[n][1] for n in names if OPTIMIZERS[n][1] not in names]
    if args.compiled:
        names += [f"{name}{COMPILED}" for name in args.optimizers]
    device = torch.device(args.device)
    results = {}
    for shape in args.shapes:
        for dtype_name in args.dtypes:
            per_seed = []
            for seed in args.seeds:
                run = measure(shape, DTYPES[dtype_name], seed, names, args.repeats, device, args.layers, args.hidden)
                per_seed.append(run)
                print(f"{shape} {dtype_name} seed {seed}: " + ", ".join(_line(n, run[n]) for n in names), flush=True)
            results[f"{shape}/{dtype_name}"] = {
                "parameters": per_seed[0]["_parameters"],
                "optimizers": summarize(per_seed, names),
            }
    payload = {
        "device": str(device),
        "threads": torch.get_num_threads(),
        "seeds": args.seeds,
        "layers": args.layers,
        "hidden": args.hidden,
        "results": results,
    }
    save_json(args.output_dir, "optimizer_step", payload)
    emit(payload)


if __name__ == "__main__":
    main()
