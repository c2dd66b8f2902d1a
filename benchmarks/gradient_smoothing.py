"""Gradient smoothing across depth vs its base optimizer: LM pretraining from scratch and a ViT on digits.

    python benchmarks/gradient_smoothing.py [--steps 200] [--batch-size 8] [--seeds 0 1 2] [--window 3]

(1) An 8-layer Llama (hidden 128, 2.4M parameters) pretrained from scratch on standard-library
source with a 2048-token BPE trained on it: AdamW vs AdamW + smoothing and Muon (block matrices;
AdamW for embeddings and norms) vs Muon + smoothing, same seeds, data order and steps; held-out
loss at the end and the training curves (PNG). (2) A 6-layer ViT on scikit-learn's digits
(8x8 images, 2x2 patches): AdamW vs AdamW + smoothing, test accuracy. Also the wall time per
step of each smoothed run over its base (target <= 1.10). Means and standard deviations over the
seeds. About 13 minutes on 2 CPU cores. The last line is JSON.
"""

import statistics
import time
from pathlib import Path

import torch
from _harness import benchmark_parser, emit, save_json
from sklearn.model_selection import train_test_split
from torch.nn import functional as F
from transformers import ViTConfig, ViTForImageClassification

from hf_ext.data import digits, stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.optim import GradientSmoothing, find_blocks
from hf_ext.recipes._plotting import plot_seed_curves

LM_METHODS = ("adamw", "adamw+smoothing", "muon", "muon+smoothing")
VIT_METHODS = ("adamw", "adamw+smoothing")


def build_optimizers(method: str, model, lr: float, muon_lr: float, window: int) -> list[torch.optim.Optimizer]:
    """The method's optimizers; Muon takes the blocks' matrices, AdamW everything else."""
    base, _, smoothed = method.partition("+")
    if base == "adamw":
        optimizers = [torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)]
    else:
        matrices = [p for p in find_blocks(model)[1].parameters() if p.dim() == 2]
        chosen = {id(p) for p in matrices}
        rest = [p for p in model.parameters() if id(p) not in chosen]
        optimizers = [torch.optim.Muon(matrices, lr=muon_lr, weight_decay=0.0), torch.optim.AdamW(rest, lr=lr)]
    if smoothed:
        optimizers[0] = GradientSmoothing(optimizers[0], model, window=window)
    return optimizers


def train(model, optimizers, batches, loss_fn, warmup: int = 10) -> dict:
    """Plain loop with a linear warmup; returns the loss curve and the median seconds per step."""
    schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lambda s: min(1.0, (s + 1) / warmup)) for o in optimizers]
    curve, seconds = [], []
    model.train()
    for step, batch in enumerate(batches, start=1):
        start = time.perf_counter()
        loss = loss_fn(model, batch)
        for optimizer in optimizers:
            optimizer.zero_grad()
        loss.backward()
        for optimizer in optimizers:
            optimizer.step()
        for scheduler in schedulers:
            scheduler.step()
        seconds.append(time.perf_counter() - start)
        curve.append((step, loss.item()))
    return {"curve": curve, "seconds_per_step": statistics.median(seconds[warmup:] or seconds)}


def _lm_loss(model, input_ids):
    return model(input_ids=input_ids, labels=input_ids).loss


@torch.no_grad()
def _held_out_loss(model, blocks: torch.Tensor, batch_size: int = 16) -> float:
    model.eval()
    losses = [_lm_loss(model, blocks[i : i + batch_size]).item() for i in range(0, len(blocks), batch_size)]
    return sum(losses) / len(losses)


def pretraining(args) -> dict:
    tokenizer = stdlib_bpe_tokenizer(vocab_size=2048, max_files=400)
    corpus = stdlib_corpus(tokenizer, block_size=128, max_files=400, seed=0)
    train_ids = torch.tensor(corpus["train"]["input_ids"])
    held_out = torch.tensor(corpus["validation"]["input_ids"][:128])
    runs = {method: [] for method in LM_METHODS}
    for seed in args.seeds:
        order = torch.randperm(len(train_ids), generator=torch.Generator().manual_seed(seed))
        size = args.batch_size
        batches = [train_ids[order[i * size : (i + 1) * size]] for i in range(args.steps)]
        for method in LM_METHODS:
            model = llama_from_scratch(tokenizer, hidden_size=128, num_layers=8, seed=seed)
            optimizers = build_optimizers(method, model, args.lr, args.muon_lr, args.window)
            result = train(model, optimizers, batches, _lm_loss)
            result["held_out_loss"] = _held_out_loss(model, held_out)
            runs[method].append(result)
            print(f"LM seed {seed} {method}: held-out loss {result['held_out_loss']:.4f}", flush=True)
    return runs


def digits_vit(args) -> dict:
    images, labels = digits()
    train_x, test_x, train_y, test_y = train_test_split(images.view(-1, 1, 8, 8), labels, test_size=0.2, random_state=0)
    config = ViTConfig(
        image_size=8,
        patch_size=2,
        num_channels=1,
        hidden_size=64,
        num_hidden_layers=6,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=10,
    )
    runs = {method: [] for method in VIT_METHODS}
    for seed in args.seeds:
        generator = torch.Generator().manual_seed(seed)
        orders = [torch.randperm(len(train_x), generator=generator) for _ in range(args.vit_epochs)]
        batches = [(train_x[o[i : i + 64]], train_y[o[i : i + 64]]) for o in orders for i in range(0, len(o), 64)]
        for method in VIT_METHODS:
            torch.manual_seed(seed)
            model = ViTForImageClassification(config)
            optimizers = build_optimizers(method, model, args.vit_lr, args.muon_lr, args.window)
            result = train(model, optimizers, batches, lambda m, b: F.cross_entropy(m(pixel_values=b[0]).logits, b[1]))
            model.eval()
            with torch.no_grad():
                result["test_accuracy"] = (model(pixel_values=test_x).logits.argmax(-1) == test_y).float().mean().item()
            runs[method].append(result)
            print(f"ViT seed {seed} {method}: test accuracy {result['test_accuracy']:.4f}", flush=True)
    return runs


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8, help="LM blocks of 128 tokens per step")
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--lr", type=float, default=2e-3, help="AdamW learning rate of the LM")
    parser.add_argument("--muon-lr", type=float, default=2e-2)
    parser.add_argument("--vit-lr", type=float, default=2e-3)
    parser.add_argument("--vit-epochs", type=int, default=30)
    args = parser.parse_args()
    lm, vit = pretraining(args), digits_vit(args)
    summary = {"steps": args.steps, "seeds": args.seeds, "window": args.window}
    for method, results in lm.items():
        summary[f"lm_{method}_held_out_loss"], summary[f"lm_{method}_held_out_loss_std"] = _mean_std(
            [r["held_out_loss"] for r in results]
        )
    for method, results in vit.items():
        summary[f"vit_{method}_test_accuracy"], summary[f"vit_{method}_test_accuracy_std"] = _mean_std(
            [r["test_accuracy"] for r in results]
        )
    for name, runs in (("lm_adamw", lm), ("lm_muon", lm), ("vit_adamw", vit)):
        base = name.split("_", 1)[1]
        ratios = [
            s["seconds_per_step"] / b["seconds_per_step"]
            for s, b in zip(runs[f"{base}+smoothing"], runs[base], strict=True)
        ]
        summary[f"{name}_step_time_ratio"] = statistics.median(ratios)
    out = Path(args.output_dir) / "gradient_smoothing"
    plot_seed_curves(
        {method: [r["curve"] for r in results] for method, results in lm.items()},
        out / "lm_loss.png",
        f"Llama 8x128 from scratch, mean +- std over {len(args.seeds)} seeds",
        ylabel="training loss",
    )
    save_json(args.output_dir, "gradient_smoothing", summary)
    emit(summary)


if __name__ == "__main__":
    main()
