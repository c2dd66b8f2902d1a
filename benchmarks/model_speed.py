"""What a user feels on a whole model: GradientSmoothing's step time, and the packed 1-bit model's forward.

    python benchmarks/model_speed.py [--seeds 0 1 2] [--repeats 10]

1. ``GradientSmoothing(AdamW, window=3)`` against ``AdamW`` alone on a randomly initialised
   512-wide, 12-layer Llama (batch 8 x 256 tokens on CUDA), with fp32 and with bf16 parameters:
   the optimizer step alone and the whole training step (forward, backward, step).
2. A SmolLM2-135M-shaped model (random weights) with every linear layer but the output
   embedding binarized and exported with ``save_packed`` / ``load_packed``, in bf16, against the
   dense bf16 model: the forward pass at 1 token, 16 sequences x 1 token (decode) and 4 x 512
   tokens (prefill).

Ratios are ``time with / time without`` (GradientSmoothing: < 1.10 is the target; packed model:
< 0.5 at 1 and 16 tokens, <= 1 at prefill), a median over ``--seeds`` (model initialisations), with
the spread. On CPU (no CUDA) small models and shapes check the script itself. Last line JSON.
"""

import statistics
import tempfile

import torch
from _harness import benchmark_parser, emit, sample_ms, save_json
from transformers import LlamaConfig, LlamaForCausalLM

from hf_ext.models import smollm2_from_scratch
from hf_ext.optim import GradientSmoothing
from hf_ext.quant import binarize_model, load_packed, save_packed, set_binarization_mix

SIZES = {
    "cuda": {
        "smoothing_model": (512, 12),
        "smoothing_batch": (8, 256),
        "forward": {"1": (1, 1), "16x1": (16, 1), "4x512": (4, 512)},
    },
    "cpu": {
        "smoothing_model": (64, 4),
        "smoothing_batch": (2, 32),
        "forward": {"1": (1, 1), "16x1": (16, 1), "4x64": (4, 64)},
    },
}


def small_llama(width: int, layers: int, dtype: torch.dtype, seed: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=width,
        intermediate_size=4 * width,
        num_hidden_layers=layers,
        num_attention_heads=max(1, width // 64),
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).to(dtype)


def smoothing_ratios(device: torch.device, dtype: torch.dtype, seed: int, repeats: int, inner: int) -> dict:
    """Step time of AdamW wrapped in GradientSmoothing over AdamW alone (optimizer step, training step)."""
    width, layers = SIZES[device.type]["smoothing_model"]
    batch, tokens = SIZES[device.type]["smoothing_batch"]
    times = {}
    for name in ("adamw", "smoothed"):
        model = small_llama(width, layers, dtype, seed).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        if name == "smoothed":
            optimizer = GradientSmoothing(optimizer, model, window=3)
        ids = torch.randint(0, 49152, (batch, tokens), device=device)
        model(ids, labels=ids).loss.backward()

        def train_step(model=model, optimizer=optimizer, ids=ids):
            optimizer.zero_grad(set_to_none=False)
            model(ids, labels=ids).loss.backward()
            optimizer.step()

        times[name] = {
            "optimizer_step_ms": statistics.median(sample_ms(optimizer.step, device, repeats, inner)),
            "train_step_ms": statistics.median(sample_ms(train_step, device, repeats, 1)),
        }
    return {
        key: times["smoothed"][f"{key}_ms"] / times["adamw"][f"{key}_ms"] for key in ("optimizer_step", "train_step")
    } | {"ms": times}


def packed_model(binary: LlamaForCausalLM, device: torch.device) -> LlamaForCausalLM:
    """``binary`` with every linear layer but ``lm_head`` binarized, through save_packed / load_packed, in bf16."""
    binarize_model(binary)
    set_binarization_mix(binary, 1.0)
    with tempfile.TemporaryDirectory() as directory:
        save_packed(binary, directory)
        return load_packed(directory).to(device=device, dtype=torch.bfloat16)


def forward_ratios(device: torch.device, seed: int, repeats: int, inner: int) -> dict:
    """Forward time of the packed 1-bit model over the dense bf16 model, per input shape."""

    def build() -> LlamaForCausalLM:  # the same weights at every call
        if device.type == "cuda":
            return smollm2_from_scratch(dtype=torch.float32, seed=seed)
        return small_llama(64, 2, torch.float32, seed)

    packed = packed_model(build(), device).eval()
    dense = build().to(device=device, dtype=torch.bfloat16).eval()
    result = {}
    for name, shape in SIZES[device.type]["forward"].items():
        ids = torch.randint(0, dense.config.vocab_size, shape, device=device)
        times = {}
        with torch.no_grad():
            for label, model in (("dense", dense), ("packed", packed)):
                forward = lambda model=model, ids=ids: model(ids, use_cache=False)  # noqa: E731
                times[label] = statistics.median(sample_ms(forward, device, repeats, inner))
        result[name] = times["packed"] / times["dense"]
        result[f"{name}_ms"] = times
    return result


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2])
    parser.add_argument("--repeats", type=int, default=10, help="timing samples per measurement")
    parser.add_argument("--inner", type=int, default=5, help="back-to-back calls per sample")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    runs = {"smoothing_float32": [], "smoothing_bfloat16": [], "packed_forward": []}
    for seed in args.seeds:
        for dtype in (torch.float32, torch.bfloat16):
            runs[f"smoothing_{str(dtype).removeprefix('torch.')}"].append(
                smoothing_ratios(device, dtype, seed, args.repeats, args.inner)
            )
        runs["packed_forward"].append(forward_ratios(device, seed, args.repeats, args.inner))
    summary = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "seeds": args.seeds}
    for name in ("smoothing_float32", "smoothing_bfloat16"):
        summary[name] = {key: spread([run[key] for run in runs[name]]) for key in ("optimizer_step", "train_step")}
    shapes = SIZES[device.type]["forward"]
    summary["packed_over_dense_forward"] = {key: spread([run[key] for run in runs["packed_forward"]]) for key in shapes}
    summary["runs"] = runs
    for name, value in summary.items():
        if name != "runs":
            print(f"{name}: {value}", flush=True)
    save_json(args.output_dir, "model_speed", summary)
    emit(summary)


if __name__ == "__main__":
    main()
