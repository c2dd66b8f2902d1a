"""Sharded training: every optimizer and wrapper of hf_ext on FSDP2 shards and under DDP, against one process.

    python benchmarks/sharded.py [--world-sizes 1 2 4] [--seeds 0 1] [--methods ...] [--model tiny|odd]

For each world size N it starts ``torchrun --nproc_per_node N`` on CPU (gloo) twice. The first
launch runs every method (and torch's SGD, the reference for what FSDP2 alone changes) on a small Llama
from ``hf_ext.models.tiny_causal_lm`` (``--model odd``: one whose every size splits unevenly,
:func:`odd_sized_llama`) for ``--steps`` steps, the same global batch each step (each rank its 1/N of
it): on one process (rank 0, accumulating the N micro-batches, so that its gradient is the ranks'
average), on FSDP2 shards
(``fully_shard`` on each block, then the root) and under DDP (``--modes accelerate``: the optimizer built on
the whole model, then sharded with it by accelerate's FSDP2 ``prepare``, as in the Trainer), and saves the sharded
runs after step 2 with torch.distributed.checkpoint; the second resumes those in new processes and finishes them.
A last launch repeats N = 2 in bfloat16. Reported per method and N:

- parity: the largest parameter difference from one process, relative to each tensor's largest entry;
- resume: the same between the resumed and the uninterrupted run;
- bytes of parameters + optimizer state on the fullest rank, and that times N over one process's
  (1.0: memory falls as 1/N);
- bytes each rank hands to the collectives the optimizer step calls (``all_reduce``,
  ``all_to_all_single``; DTensor collectives the step would trigger are counted apart and are 0);
- the training step's time under FSDP2 over DDP (CPU, so a sanity check, not a GPU figure);
- at N = 2 in bfloat16, parity as above and in bfloat16 spacings of each entry (:func:`bf16_spacings`);

and, from each optimizer's per-parameter state (checked against the measured bytes), the memory per
GPU of an 8B Llama (Llama-3-8B shapes) on 8 GPUs. The last line is JSON.

``--trainers [NAME ...]`` measures the trainers instead (``benchmarks/_sharded_trainers.py``): the bytes each rank
holds (parameters, gradients, optimizer and ZO state, reference model) and its peak RSS growth, on SmolLM2-135M
for 1 and N accelerate FSDP2 processes, as ratios to one process.

The tests launch the worker once for all methods (``tests/optim/test_sharded_parity.py``):
``torchrun --nproc_per_node 2 benchmarks/sharded.py --worker --output-dir DIR``.
"""

import argparse
import copy
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from _harness import benchmark_parser, emit, save_json
from accelerate import Accelerator, FullyShardedDataParallelPlugin
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.debug import CommDebugMode
from transformers import LlamaConfig, LlamaForCausalLM

from hf_ext.distributed import enable_fsdp_on_cpu
from hf_ext.models import tiny_causal_lm
from hf_ext.optim import NGN, SPS, GradientSmoothing, MuonWithAdamW, Scion, SymmetryCurvature
from hf_ext.optim.shared.sharding import assign_owners

MODES = ("single", "fsdp", "ddp")
# FSDP2 as accelerate's ``prepare`` applies it (the Trainer's path): the optimizer is built on the whole model first.
ACCELERATE = "accelerate"
GIB = 1024**3


def _by_dimension(model: nn.Module) -> list[dict]:
    """Matrices and vectors in two groups, so that per-group step sizes differ."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2]}, {"params": [p for p in params if p.dim() < 2]}]


METHODS: dict[str, Callable[[nn.Module], torch.optim.Optimizer]] = {
    "sps": lambda model: SPS(model.parameters(), lr=0.5, c=0.5),
    "ngn": lambda model: NGN(model.parameters(), lr=0.5),
    "ngn_m": lambda model: NGN(_by_dimension(model), lr=0.5, momentum=0.9, weight_decay=0.1, norm="per_group"),
    "gradient_smoothing_adamw": lambda model: GradientSmoothing(
        torch.optim.AdamW(model.parameters(), lr=1e-2), model, window=3
    ),
    "gradient_smoothing_scion": lambda model: GradientSmoothing(
        Scion(model, lr=0.02), model, window=3, mode="gradient"
    ),
    "scion": lambda model: Scion(model, lr=0.02),
    "symmetry_curvature": lambda model: SymmetryCurvature(model, lr=1e-2),
    "muon_adamw": lambda model: MuonWithAdamW(model, lr=1e-2),
    # torch's own, for what FSDP2 alone changes (bf16 updates of odd-sized shards round otherwise than whole tensors)
    "torch_sgd": lambda model: torch.optim.SGD(model.parameters(), lr=0.1),
}


def odd_sized_llama(seed: int, num_layers: int) -> nn.Module:
    """A Llama whose sizes split unevenly across 2 and 3 ranks: vocabulary 101 (tied head), hidden 37, MLP 75, one
    attention head of 10 (37 is prime; rotary embeddings need an even head), the final norm frozen (GradientSmoothing
    refuses a role frozen in some blocks only)."""
    config = LlamaConfig(
        vocab_size=101,
        hidden_size=37,
        intermediate_size=75,
        num_hidden_layers=num_layers,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=10,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.model.norm.weight.requires_grad_(False)
    return model


def build_model(name: str, seed: int, args: argparse.Namespace) -> nn.Module:
    """``--model``'s Llama: ``tiny`` (``tiny_causal_lm``, ``--hidden-size``) or ``odd`` (:func:`odd_sized_llama`)."""
    if name == "odd":
        return odd_sized_llama(seed, args.layers)
    return tiny_causal_lm(seed=seed, hidden_size=args.hidden_size, num_layers=args.layers)[0]


def batches(seed: int, steps: int, size: int, vocab: int = 500, length: int = 16) -> list[torch.Tensor]:
    """The global batch of token ids (below ``vocab``) of each step."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (size, length), generator=generator) for _ in range(steps)]


def prepare(model: nn.Module, mode: str) -> nn.Module:
    """``model`` as the mode trains it (sharded in place for FSDP2); returns what the forward pass calls."""
    if mode == "fsdp":
        for block in model.model.layers:
            fully_shard(block)
        fully_shard(model)
        assert all(isinstance(p, DTensor) for p in model.parameters())
    if mode == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    return model


def accelerate_prepare(model: nn.Module, optimizer: torch.optim.Optimizer) -> nn.Module:
    """``model`` sharded by accelerate's FSDP2 plugin (each decoder layer, then the root), which also puts the
    ``DTensor``\\ s in place of the tensors ``optimizer`` was built on, in its ``param_groups``, as for the Trainer."""
    enable_fsdp_on_cpu()  # accelerate would wrap a CPU model in DDP
    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, auto_wrap_policy="transformer_based_wrap")
    prepared, _ = Accelerator(cpu=True, fsdp_plugin=plugin).prepare(model, optimizer)
    assert all(isinstance(p, DTensor) for p in prepared.parameters())
    return prepared


def local_bytes(tensor: torch.Tensor) -> int:
    part = tensor.to_local() if isinstance(tensor, DTensor) else tensor
    return part.numel() * part.element_size()


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the optimizer's state tensors on this rank, 0-d counters left out (``step``, SPS's and NGN's step
    size: a few bytes a parameter, whole on every rank, as torch keeps ``step``)."""
    entries = optimizer.state.values()
    return sum(local_bytes(v) for entry in entries for v in entry.values() if isinstance(v, torch.Tensor) and v.dim())


@contextmanager
def counted_collectives(counts: dict):
    """Adds to ``counts["bytes"]`` what this rank hands to ``all_reduce`` and sends to other ranks by
    ``all_to_all_single`` (the collectives hf_ext's optimizers call) while open; to ``counts["calls"]``, the calls."""
    all_reduce, all_to_all_single = dist.all_reduce, dist.all_to_all_single

    def counted_all_reduce(tensor, *args, **kwargs):
        counts["bytes"] += tensor.numel() * tensor.element_size()
        counts["calls"] += 1
        return all_reduce(tensor, *args, **kwargs)

    def counted_all_to_all_single(output, input, output_split_sizes, input_split_sizes, group=None, **kwargs):
        own = input_split_sizes[dist.get_rank(group)]
        counts["bytes"] += (input.numel() - own) * input.element_size()
        counts["calls"] += 1
        return all_to_all_single(output, input, output_split_sizes, input_split_sizes, group=group, **kwargs)

    dist.all_reduce, dist.all_to_all_single = counted_all_reduce, counted_all_to_all_single
    try:
        yield
    finally:
        dist.all_reduce, dist.all_to_all_single = all_reduce, all_to_all_single


def train(
    method: str,
    mode: str,
    base: nn.Module,
    data: list[torch.Tensor],
    checkpoint: Path | None = None,
    save_at: int | None = None,
    resume_at: int | None = None,
) -> dict:
    """``len(data)`` steps of ``method``: the whole parameters afterwards and this rank's measurements.

    Each step's global batch is split into one micro-batch per rank. One process (``single``) takes
    them all in turn and accumulates ``loss / N``: the gradient the ranks' average makes, summed in the
    same order (bit for bit at N = 2), so what differs is only the distributed optimizer step.
    With ``save_at``, model and optimizer are saved to ``checkpoint`` after that many steps
    (torch.distributed.checkpoint); with ``resume_at``, loaded from it first, and the run takes the
    steps after that one.
    """
    world_size, rank = dist.get_world_size(), dist.get_rank()
    model = copy.deepcopy(base)
    if mode == ACCELERATE:
        optimizer = METHODS[method](model)
        forward = accelerate_prepare(model, optimizer)
    else:
        forward = prepare(model, mode)
        optimizer = METHODS[method](model)
    if resume_at is not None:
        model_state, optimizer_state = get_state_dict(forward, optimizer)  # the layout to load into
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=checkpoint)
        set_state_dict(forward, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    run = {"sent": [], "implicit": 0, "seconds": []}
    for step, ids in enumerate(data[resume_at or 0 :], start=(resume_at or 0) + 1):
        start = time.perf_counter()
        if mode == "single":
            loss = 0.0
            for part in ids.chunk(world_size):
                micro = forward(input_ids=part, labels=part).loss / world_size
                micro.backward()
                loss += micro.detach()
        else:
            loss = forward(input_ids=ids.chunk(world_size)[rank], labels=ids.chunk(world_size)[rank]).loss
            loss.backward()
            loss = loss.detach()
        if mode == "ddp":  # the loss of the averaged gradient, as LossToOptimizerTrainer hands it over
            dist.all_reduce(loss)
            loss /= world_size
        if hasattr(optimizer, "set_loss"):  # FSDP2: the optimizer averages the ranks' losses itself
            optimizer.set_loss(loss)
        counts = {"bytes": 0, "calls": 0}
        with counted_collectives(counts), CommDebugMode() as every:  # CommDebugMode sees all, DTensor's too
            optimizer.step()
        optimizer.zero_grad()
        run["seconds"].append(time.perf_counter() - start)
        run["sent"].append(counts["bytes"])
        run["implicit"] += every.get_total_counts() - counts["calls"]
        if step == save_at:
            model_state, optimizer_state = get_state_dict(forward, optimizer)
            dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=checkpoint)
    run["param_bytes"] = sum(local_bytes(p) for p in model.parameters())
    run["state_bytes"] = state_bytes(optimizer)
    run["params"] = {
        n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone() for n, p in model.named_parameters()
    }
    return run


def worker(args: argparse.Namespace) -> None:
    """One torchrun process: every method in every mode and seed; rank 0 writes ``seed{s}/{method}.pt`` (each mode's
    run, its measurements listed per rank) and ``seed{s}/initial.pt``."""
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    for seed in args.seeds:
        torch.manual_seed(seed)
        base = build_model(args.model, seed, args)
        base.to(getattr(torch, args.dtype))
        data = batches(seed, args.steps, args.batch_size, vocab=min(500, base.config.vocab_size))
        out = Path(args.output_dir) / f"seed{seed}"
        out.mkdir(parents=True, exist_ok=True)
        if rank == 0:
            torch.save({n: p.detach().clone() for n, p in base.named_parameters()}, out / "initial.pt")
        for method in args.methods:
            results = {}
            for mode in args.modes:
                checkpoint = out / "checkpoints" / f"{method}-{mode}"
                if mode == "single":
                    if rank == 0 and args.resume_at is None:
                        results[mode] = train(method, mode, base, data) | {"ranks": 1}
                    continue
                if args.resume_at is not None:
                    run = train(method, mode, base, data, checkpoint, resume_at=args.resume_at)
                else:
                    run = train(method, mode, base, data, checkpoint, save_at=args.save_at)
                measured = {k: v for k, v in run.items() if k != "params"}
                gathered = [None] * world_size
                dist.all_gather_object(gathered, measured)
                results[mode] = {k: [g[k] for g in gathered] for k in measured} | {"params": run["params"]}
            if rank == 0:
                name = f"{method}-resumed" if args.resume_at is not None else method
                torch.save(results, out / f"{name}.pt")
    # rank 0 ends later (its one-process runs, its saves): a rank that tears gloo down while its peer still
    # holds the connection can abort at exit ("terminate called without an active exception")
    dist.barrier()
    dist.destroy_process_group()


def relative_difference(params: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> float:
    """The largest ``max|p - ref| / max|ref|`` over the tensors (fp32)."""
    return max(
        ((params[n].float() - ref.float()).abs().max() / ref.float().abs().max().clamp(min=1e-30)).item()
        for n, ref in reference.items()
    )


def bf16_spacings(
    params: dict[str, torch.Tensor], reference: dict[str, torch.Tensor], initial: dict[str, torch.Tensor]
) -> float:
    """The largest ``|p - ref|`` in bfloat16 spacings at that entry: the gap between neighbouring bfloat16 numbers at
    the larger of ``|ref|`` and ``|initial|`` (after one step, the magnitudes it wrote from and to), so that a
    rounding of one step's update that went the other way is 1 whatever the entry's size."""

    def spacing(x: torch.Tensor) -> torch.Tensor:
        _, exponent = torch.frexp(x)  # x in [2^(e-1), 2^e): bfloat16's 8 significant bits are 2^(e-8) apart
        return torch.ldexp(torch.ones_like(x), exponent - 8)

    return max(
        ((params[n].float() - ref.float()).abs() / spacing(torch.maximum(ref.float().abs(), initial[n].float().abs())))
        .max()
        .item()
        for n, ref in reference.items()
    )


def launch(world_size: int, flags: list[str]) -> None:
    """``torchrun --nproc_per_node world_size`` of this script's worker (one thread a process)."""
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    command = [torchrun, "--standalone", f"--nproc_per_node={world_size}", __file__, "--worker", *flags]
    subprocess.run(command, check=True, env=os.environ | {"OMP_NUM_THREADS": "1"})


# Llama-3-8B: vocabulary 128256, hidden 4096, 32 layers, MLP 14336, 8 key-value heads of 128, untied head.
LLAMA_8B = {"vocab": 128256, "hidden": 4096, "layers": 32, "mlp": 14336, "kv": 1024, "tied": False}


def llama_shapes(c: dict) -> list[tuple[str, tuple[int, ...]]]:
    """(role, shape) of every parameter: ``hidden`` for the blocks' matrices, ``other`` for the rest."""
    h, m, kv = c["hidden"], c["mlp"], c["kv"]
    block = [(h, h), (kv, h), (kv, h), (h, h), (m, h), (m, h), (h, m)]  # q, k, v, o, gate, up, down
    shapes = [("other", (c["vocab"], h))] * (1 if c["tied"] else 2) + [("other", (h,))]  # embeddings, head, norm
    for _ in range(c["layers"]):
        shapes += [("hidden", s) for s in block] + [("other", (h,)), ("other", (h,))]
    return shapes


def state_elements(method: str, role: str, shape: tuple[int, ...]) -> int:
    """Elements of optimizer state one parameter gets (whole, one process): what each optimizer allocates."""
    numel = torch.Size(shape).numel()
    if method in ("sps", "ngn", "torch_sgd"):
        return 0
    if method in ("ngn_m", "scion", "gradient_smoothing_scion"):
        return numel  # momentum
    if method == "gradient_smoothing_adamw" or (method == "muon_adamw" and role == "other"):
        return 2 * numel  # exp_avg, exp_avg_sq (step: a counter)
    if method == "muon_adamw":
        return numel  # momentum
    if role == "other" or len(shape) < 2:  # symmetry curvature, diagonal S: exp_avg, moment, mean_square
        return 2 * numel + 1
    return numel + 2 * shape[1] ** 2 + 1  # (permutation, identity): exp_avg, two in x in blocks of S, mean_square


def per_gpu_bytes(method: str, shapes: list, ranks: int, element_bytes: int = 4) -> int:
    """fp32 parameters and state on the fullest of ``ranks`` FSDP2 ranks: parameters and element-wise state split
    evenly; symmetry curvature's hidden matrices' state whole on their owners, assigned as the optimizer does."""
    owned = [s for r, s in shapes if method == "symmetry_curvature" and r == "hidden"]
    split = sum(torch.Size(s).numel() for _, s in shapes)
    split += sum(state_elements(method, r, s) for r, s in shapes if not (s in owned and r == "hidden"))
    costs = [state_elements(method, "hidden", s) - 1 for s in owned]  # momentum + S, as the optimizer balances them
    loads = [0] * ranks
    for shape, owner in zip(owned, assign_owners(costs, ranks), strict=True):
        loads[owner] += state_elements(method, "hidden", shape)
    return (split // ranks + max(loads)) * element_bytes


def _fullest_rank(run: dict) -> int:
    """Bytes of parameters + optimizer state on the rank that holds the most."""
    return max(p + s for p, s in zip(run["param_bytes"], run["state_bytes"], strict=True))


def _time_ratio(run: dict) -> float:
    """FSDP2's median step time over DDP's on rank 0, leaving out the first (warm-up) step."""
    return statistics.median(run["fsdp"]["seconds"][0][1:]) / statistics.median(run["ddp"]["seconds"][0][1:])


def summarize_world_size(runs: list[dict], resumed: list[dict], world_size: int) -> dict:
    """One world size's numbers for one method (``runs``/``resumed``: one per seed; the largest differences)."""
    row = {}
    for mode in ("fsdp", "ddp"):
        row[f"parity_{mode}"] = max(relative_difference(r[mode]["params"], r["single"]["params"]) for r in runs)
        pairs = zip(resumed, runs, strict=True)
        row[f"resume_{mode}"] = max(relative_difference(r[mode]["params"], u[mode]["params"]) for r, u in pairs)
        row[f"bytes_{mode}"] = _fullest_rank(runs[0][mode])
    single = runs[0]["single"]
    row["bytes_single"] = single["param_bytes"] + single["state_bytes"]
    row["state_bytes_single"] = single["state_bytes"]
    row["memory_scaling_fsdp"] = row["bytes_fsdp"] * world_size / row["bytes_single"]
    row["sent_per_step_fsdp"] = statistics.mean(b for r in runs for rank in r["fsdp"]["sent"] for b in rank)
    row["implicit_collectives"] = sum(sum(r[mode]["implicit"]) for r in runs for mode in ("fsdp", "ddp"))
    ratios = [_time_ratio(r) for r in runs]
    row["time_fsdp_over_ddp"] = statistics.mean(ratios)
    row["time_fsdp_over_ddp_std"] = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
    return row


def summarize(out: Path, world_sizes: list[int], seeds: list[int], methods: list[str], model: dict | None) -> dict:
    """Per method: each world size's numbers, whether the state rule predicts the measured one-process state
    bytes (on ``model``'s shapes; ``None``: not checked), and the rule's memory per GPU for an 8B Llama on 8 GPUs."""
    summary = {}
    for method in methods:
        rows = {}
        for n in world_sizes:
            folders = [out / f"n{n}" / f"seed{s}" for s in seeds]
            runs = [torch.load(f / f"{method}.pt") for f in folders]
            resumed = [torch.load(f / f"{method}-resumed.pt") for f in folders]
            rows[n] = summarize_world_size(runs, resumed, n)
        predicted_state = 4 * sum(state_elements(method, r, s) for r, s in llama_shapes(model)) if model else None
        summary[method] = {
            "by_world_size": rows,
            "state_rule_matches": model and rows[world_sizes[0]]["state_bytes_single"] == predicted_state,
            "llama_8b_8_gpus_gib": per_gpu_bytes(method, llama_shapes(LLAMA_8B), 8) / GIB,
        }
    return summary


def main(argv=None) -> dict:
    args = parse(argv)
    out = Path(args.output_dir)
    if args.trainers is not None:
        from _sharded_trainers import trainer_memory  # transformers and TRL: the optimizers' workers do without

        summary = trainer_memory(out / "trainers", args.world_sizes, args.trainers)
        save_json(str(out), "sharded_trainers", {"args": vars(args), "summary": summary})
        emit({"world_sizes": args.world_sizes, "trainers": summary})
        return summary
    shared = ["--seeds", *map(str, args.seeds), "--methods", *args.methods, "--steps", str(args.steps)]
    shared += ["--model", args.model, "--layers", str(args.layers), "--hidden-size", str(args.hidden_size)]
    shared += ["--batch-size", str(args.batch_size)]
    for n in args.world_sizes:
        flags = [*shared, "--output-dir", str(out / f"n{n}")]
        launch(n, flags)
        launch(n, [*flags, "--resume-at", str(args.save_at), "--modes", "fsdp", "ddp"])
    bf16 = out / "bf16"
    launch(2, [*shared, "--output-dir", str(bf16), "--dtype", "bfloat16", "--save-at", "0"])  # 0: no checkpoint
    h = args.hidden_size  # tiny_causal_lm: two heads, one key-value head, MLP 4 h, tied embeddings
    tiny = {"vocab": 49152, "hidden": h, "layers": args.layers, "mlp": 4 * h, "kv": h // 2, "tied": True}
    # the state rule is checked on tiny_causal_lm's shapes; the odd model's frozen norm keeps no state
    summary = summarize(out, args.world_sizes, args.seeds, args.methods, tiny if args.model == "tiny" else None)
    for method in args.methods:
        runs = [torch.load(bf16 / f"seed{s}" / f"{method}.pt") for s in args.seeds]
        initial = [torch.load(bf16 / f"seed{s}" / "initial.pt") for s in args.seeds]
        for mode in ("fsdp", "ddp"):
            summary[method][f"parity_bf16_{mode}"] = max(
                relative_difference(r[mode]["params"], r["single"]["params"]) for r in runs
            )
            summary[method][f"parity_bf16_{mode}_spacings"] = max(
                bf16_spacings(r[mode]["params"], r["single"]["params"], i) for r, i in zip(runs, initial, strict=True)
            )
    save_json(str(out), "sharded", {"args": vars(args), "summary": summary})
    emit({"world_sizes": args.world_sizes, "seeds": args.seeds, "summary": summary})
    return summary


def parse(argv=None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__, seeds=[0, 1], output_dir="outputs/benchmarks/sharded")
    parser.add_argument("--worker", action="store_true", help="run as one torchrun process")
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument(
        "--trainers",
        nargs="*",
        help="measure these trainers' per-rank memory on SmolLM2-135M instead of the optimizers (adamw, agzo, mezo, "
        "grpo_sgd, grpo_adamw, regularized_dpo; none named: all)",
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=[*MODES, ACCELERATE])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--save-at", type=int, default=2, help="save FSDP2 and DDP runs after this step")
    parser.add_argument("--resume-at", type=int, help="resume the runs saved after this step and finish them")
    parser.add_argument(
        "--batch-size", type=int, default=4, help="global batch (sequences of 16 tokens); a multiple of each world size"
    )
    parser.add_argument(
        "--model",
        default="tiny",
        choices=["tiny", "odd"],
        help="tiny_causal_lm, or a Llama whose every size splits unevenly (vocabulary 101, hidden 37, a frozen norm)",
    )
    parser.add_argument("--hidden-size", type=int, default=16, help="of the tiny model")
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    if arguments.worker:
        worker(arguments)
    else:
        main()
