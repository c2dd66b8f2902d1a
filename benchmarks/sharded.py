"""Sharded training: every optimizer and wrapper of hf_ext on FSDP2 shards and under DDP, against one process.

    python benchmarks/sharded.py [--world-sizes 1 2 4] [--seeds 0 1] [--methods ...]

For each world size it starts ``torchrun --nproc_per_node N`` on CPU (gloo) once; the workers run
every method on a small Llama from ``hf_ext.models.tiny_causal_lm`` for ``--steps`` steps, the same
global batch each step (each rank its 1/N of it): on one process (rank 0, the whole batch), on
FSDP2 shards (``fully_shard`` on each block, then the root) and under DDP. Reported per method and
world size: the largest parameter difference from one process (relative to each tensor's largest
entry), and the same for a run saved after step 2 with torch.distributed.checkpoint and resumed in
new processes. The last line is JSON.

The tests launch the worker once for all methods (``tests/optim/test_sharded_parity.py``):
``torchrun --nproc_per_node 2 benchmarks/sharded.py --worker --output-dir DIR``.
"""

import argparse
import copy
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import NGN, SPS, GradientSmoothing, MuonWithAdamW, Scion, SymmetryCurvature

MODES = ("single", "fsdp", "ddp")


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
}


def batches(seed: int, steps: int, size: int, length: int = 16) -> list[torch.Tensor]:
    """The global batch of token ids of each step."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 500, (size, length), generator=generator) for _ in range(steps)]


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


def train(
    method: str,
    mode: str,
    base: nn.Module,
    data: list[torch.Tensor],
    checkpoint: Path | None = None,
    save_at: int | None = None,
    resume_at: int | None = None,
) -> dict[str, torch.Tensor]:
    """``len(data)`` steps of ``method``; the whole parameters afterwards (every rank).

    With ``save_at``, model and optimizer are saved to ``checkpoint`` after that many steps
    (torch.distributed.checkpoint); with ``resume_at``, loaded from it first, and the run takes the
    steps after that one.

    Each step's global batch is split into one micro-batch per rank. One process (``single``) takes
    them all in turn and accumulates ``loss / N``: the gradient the ranks' average makes, summed in the
    same order (bit for bit at N = 2), so what differs is only the distributed optimizer step.
    """
    world_size, rank = dist.get_world_size(), dist.get_rank()
    model = copy.deepcopy(base)
    forward = prepare(model, mode)
    optimizer = METHODS[method](model)
    if resume_at is not None:
        model_state, optimizer_state = get_state_dict(forward, optimizer)  # the layout to load into
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=checkpoint)
        set_state_dict(forward, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    for step, ids in enumerate(data[resume_at or 0 :], start=(resume_at or 0) + 1):
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
        optimizer.step()
        optimizer.zero_grad()
        if step == save_at:
            model_state, optimizer_state = get_state_dict(forward, optimizer)
            dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=checkpoint)
    return {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone() for n, p in model.named_parameters()}


def worker(args: argparse.Namespace) -> None:
    """One torchrun process: every method in every mode; rank 0 writes ``{method}.pt`` with each mode's parameters."""
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    base, _ = tiny_causal_lm(seed=args.seed, hidden_size=args.hidden_size, num_layers=args.layers)
    data = batches(args.seed, args.steps, args.batch_size)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if dist.get_rank() == 0:
        torch.save({n: p.detach().clone() for n, p in base.named_parameters()}, out / "initial.pt")
    for method in args.methods:
        results = {}
        for mode in args.modes:
            if mode == "single" and dist.get_rank() != 0:
                continue
            checkpoint = out / "checkpoints" / f"{method}-{mode}"
            if args.resume_at is not None and mode != "single":
                results[mode] = train(method, mode, base, data, checkpoint, resume_at=args.resume_at)
            elif args.resume_at is None:
                save_at = args.save_at if mode != "single" else None
                results[mode] = train(method, mode, base, data, checkpoint, save_at=save_at)
        if dist.get_rank() == 0:
            name = f"{method}-resumed" if args.resume_at is not None else method
            torch.save(results, out / f"{name}.pt")
    dist.destroy_process_group()


def relative_difference(params: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> float:
    """The largest ``max|p - ref| / max|ref|`` over the tensors (fp32)."""
    return max(
        ((params[n].float() - ref.float()).abs().max() / ref.float().abs().max().clamp(min=1e-30)).item()
        for n, ref in reference.items()
    )


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help="run as one torchrun process")
    parser.add_argument("--output-dir", default="outputs/benchmarks/sharded")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--save-at", type=int, default=2, help="save FSDP2 and DDP runs after this step")
    parser.add_argument("--resume-at", type=int, help="resume the runs saved after this step and finish them")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=4, help="global batch (sequences of 16 tokens)")
    parser.add_argument("--hidden-size", type=int, default=16)
    parser.add_argument("--layers", type=int, default=3)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    if arguments.worker:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        worker(arguments)
    else:
        sys.exit("the launcher comes next; run with --worker under torchrun")
