"""Speed of each kernel as a ratio to eager torch doing the same work, with bandwidth, in fp32 and bf16.

    python benchmarks/kernel_speed.py [--dtypes float32 bfloat16] [--device cuda|cpu] [--quick] [--repeats 20]

For every kernel: the time of ``hf_ext.kernels``' public function (Triton on CUDA, the torch
reference elsewhere) and of eager torch, ``speedup`` = eager / kernel (> 1: the kernel is faster),
the bytes the operation must move, the kernel's GB/s, and that as a fraction of the bandwidth of a
device-to-device copy measured in the same run. ``packed_binary_matmul`` runs at a decode shape
(1 and 16 rows of ``x``, 4096 -> 11008) and a prefill shape (2048 rows) against dense ``F.linear``
in the same dtype. ``token_logprobs`` is timed forward only and forward + backward, with the extra
memory above the logits on CUDA, against eager ``log_softmax`` + gather and Liger-Kernel's
``LigerCrossEntropyLoss(reduction="none")`` (the ``bench`` extra; skipped with a reason without it
or without CUDA). On CPU (no CUDA, or ``--device cpu``) tiny shapes check the script itself. Times
are medians over ``--repeats`` samples with their spread (standard deviation); the last line is JSON.
"""

import importlib
import importlib.util
import platform
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _harness import benchmark_parser, emit, sample_ms, save_json

from hf_ext.kernels import (
    depth_smooth,
    lowrank_perturb_,
    pack_signs,
    packed_binary_matmul,
    seeded_perturb_,
    token_logprobs,
    unpack_signs,
    use_triton,
)
from hf_ext.optim import smoothing_matrix

# Shapes per device: the GPU shapes, and tiny CPU ones that only check the script runs.
SHAPES = {
    "cuda": {
        "perturb": (8192, 8192),
        "lowrank": (4096, 4096, 8),
        "logits": (4096, 49152),
        "train_logits": (8192, 49152),
        "depth_smooth": (30, 1536 * 576),  # one role (mlp.up_proj) of SmolLM2-135M's 30 layers
        "linear": (4096, 11008),
        "linear_rows": {"decode_1": 1, "decode_16": 16, "prefill_2048": 2048},
        "copy_bytes": 2**30,
    },
    "cpu": {
        "perturb": (256, 256),
        "lowrank": (256, 256, 8),
        "logits": (64, 2048),
        "train_logits": (64, 2048),
        "depth_smooth": (30, 4096),
        "linear": (256, 512),
        "linear_rows": {"decode_1": 1, "decode_16": 16, "prefill_128": 128},
        "copy_bytes": 2**24,
    },
}


class Timer:
    """Times calls on one device and turns the samples into the numbers this script reports."""

    def __init__(self, device: torch.device, repeats: int, inner: int):
        self.device, self.repeats, self.inner = device, repeats, inner
        self.copy_gbps = None

    def ms(self, fn: Callable[[], object]) -> dict:
        samples = sample_ms(fn, self.device, self.repeats, self.inner)
        return {"ms": statistics.median(samples), "ms_std": statistics.stdev(samples) if len(samples) > 1 else 0.0}

    def measure_copy(self, nbytes: int) -> dict:
        """A device-to-device copy of ``nbytes``: the bandwidth every kernel is compared with."""
        src = torch.empty(nbytes // 4, device=self.device)
        dst = torch.empty_like(src)
        timing = self.ms(lambda: dst.copy_(src))
        self.copy_gbps = 2 * nbytes / timing["ms"] / 1e6
        return timing | {"bytes": nbytes, "gbps": self.copy_gbps}

    def compare(self, kernel: Callable, eager: Callable, nbytes: int, **others: Callable) -> dict:
        """``kernel`` against ``eager`` (and any ``others``), with the kernel's bandwidth for ``nbytes`` moved."""
        result = {"kernel": self.ms(kernel), "eager": self.ms(eager)}
        result |= {name: self.ms(fn) for name, fn in others.items()}
        kernel_ms = result["kernel"]["ms"]
        gbps = nbytes / kernel_ms / 1e6
        result |= {
            "speedup": result["eager"]["ms"] / kernel_ms,
            "bytes": nbytes,
            "gbps": gbps,
            "fraction_of_copy": gbps / self.copy_gbps,
        }
        for name in others:
            result[f"speedup_vs_{name}"] = result[name]["ms"] / kernel_ms
        return result


def eager_seeded_perturb_(param: torch.Tensor, seed: int, scale: float) -> torch.Tensor:
    """What eager torch does: materialise the noise tensor, then add it."""
    generator = torch.Generator(device=param.device).manual_seed(seed)
    return param.add_(
        torch.randn(param.shape, generator=generator, device=param.device, dtype=param.dtype), alpha=scale
    )


def eager_lowrank_perturb_(weight: torch.Tensor, basis: torch.Tensor, seed: int, scale: float) -> torch.Tensor:
    """Eager torch: materialise N, then the full-size N @ U^T, then add it."""
    generator = torch.Generator(device=weight.device).manual_seed(seed)
    noise = torch.randn(weight.shape[0], basis.shape[1], generator=generator, device=weight.device, dtype=weight.dtype)
    return weight.add_(noise @ basis.T, alpha=scale)


def eager_token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Eager torch: a full fp32 log_softmax over the vocabulary, then gather."""
    return torch.log_softmax(logits.float(), -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def eager_depth_smooth(stacked, mixing, before):
    """What torch does without the kernel: fp32 copies, a difference, a matmul and a sum."""
    return (before.float() + mixing @ (stacked.float() - before.float())).to(stacked.dtype)


def liger_cross_entropy(device: torch.device) -> tuple[Callable | None, str]:
    """Liger-Kernel's per-token cross entropy (``-logprob``), or ``None`` and why not."""
    if device.type != "cuda":
        return None, "Liger-Kernel runs on CUDA only"
    if importlib.util.find_spec("liger_kernel") is None:
        return None, "liger-kernel is not installed (pip install -e '.[bench]')"
    from liger_kernel.transformers import LigerCrossEntropyLoss

    return LigerCrossEntropyLoss(reduction="none"), ""


def extra_memory_mib(fn: Callable[[], object], device: torch.device) -> float | None:
    """Peak memory allocated by ``fn()`` above what was allocated before it (CUDA only)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - baseline) / 2**20


def bench_token_logprobs(timer: Timer, shapes: dict, dtype: torch.dtype, liger: Callable | None) -> dict:
    """Forward only (no gradient) and forward + backward, each against eager torch and Liger."""
    device = timer.device
    tokens, vocab = shapes["logits"]
    logits = torch.randn(tokens, vocab, device=device, dtype=dtype)
    labels = torch.randint(0, vocab, (tokens,), device=device)
    others = {"liger": lambda: liger(logits, labels)} if liger else {}
    with torch.no_grad():
        result = {
            "forward": timer.compare(
                lambda: token_logprobs(logits, labels),
                lambda: eager_token_logprobs(logits, labels),
                logits.numel() * logits.element_size(),
                **others,
            )
        }

    tokens, vocab = shapes["train_logits"]
    logits = torch.randn(tokens, vocab, device=device, dtype=dtype, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,), device=device)

    def gradient(loss: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
        # The gradient w.r.t. the logits, as a model's lm_head receives it (no copy into .grad).
        return lambda: torch.autograd.grad(loss().sum(), logits)[0]

    calls = {
        "kernel": gradient(lambda: token_logprobs(logits, labels, overwrite_logits=True)),
        "eager": gradient(lambda: eager_token_logprobs(logits, labels)),
        "kernel_keep_logits": gradient(lambda: token_logprobs(logits, labels)),
    }
    if liger:
        calls["liger"] = gradient(lambda: -liger(logits, labels))
    memory = {name: extra_memory_mib(fn, device) for name, fn in calls.items()}
    # Bytes: read the logits, then read them and write the gradient in their place (Liger's minimum).
    # The kernel overwrites the logits with the gradient at each call, which timing allows.
    others = {name: fn for name, fn in calls.items() if name not in ("kernel", "eager")}
    nbytes = 3 * logits.numel() * logits.element_size()
    result["train"] = timer.compare(calls["kernel"], calls["eager"], nbytes, **others) | {"extra_memory_mib": memory}
    return result


def bench_packed_matmul(timer: Timer, shapes: dict, dtype: torch.dtype) -> dict:
    """The 1-bit matmul against dense ``F.linear`` on the binarised weight in ``x``'s dtype."""
    device = timer.device
    in_features, out_features = shapes["linear"]
    packed = pack_signs(torch.randn(out_features, in_features, device=device))
    row_scale = torch.rand(out_features, device=device, dtype=dtype)
    col_scale = torch.rand(in_features, device=device, dtype=dtype)
    dense = row_scale[:, None] * unpack_signs(packed, in_features, dtype) * col_scale[None, :]
    result = {"shape": [in_features, out_features]}
    for name, rows in shapes["linear_rows"].items():
        x = torch.randn(rows, in_features, device=device, dtype=dtype)
        nbytes = packed.numel() + (x.numel() + rows * out_features) * x.element_size()
        result[name] = timer.compare(
            lambda x=x: packed_binary_matmul(x, packed, row_scale, col_scale), lambda x=x: F.linear(x, dense), nbytes
        )
    return result


def bench_dtype(timer: Timer, shapes: dict, dtype: torch.dtype, liger: Callable | None) -> dict:
    device = timer.device
    size = torch.tensor([], dtype=dtype).element_size()
    param = torch.zeros(shapes["perturb"], device=device, dtype=dtype)
    rows, cols, rank = shapes["lowrank"]
    weight = torch.zeros(rows, cols, device=device, dtype=dtype)
    basis = torch.linalg.qr(torch.randn(cols, rank, device=device))[0].to(dtype)
    depth, width = shapes["depth_smooth"]
    stacked = torch.randn(depth, width, device=device, dtype=dtype)
    before = torch.randn_like(stacked)
    mixing = smoothing_matrix(depth, 3).to(device)
    return {
        "path": "triton" if use_triton(param) else "reference",
        "seeded_perturb": timer.compare(
            lambda: seeded_perturb_(param, 1, 1e-3),
            lambda: eager_seeded_perturb_(param, 1, 1e-3),
            2 * param.numel() * size,
        ),
        "lowrank_perturb": timer.compare(
            lambda: lowrank_perturb_(weight, basis, 1, 1e-3),
            lambda: eager_lowrank_perturb_(weight, basis, 1, 1e-3),
            2 * weight.numel() * size,
        ),
        "depth_smooth": timer.compare(
            lambda: depth_smooth(stacked, mixing, before),
            lambda: eager_depth_smooth(stacked, mixing, before),
            3 * stacked.numel() * size,
        ),
        "token_logprobs": bench_token_logprobs(timer, shapes, dtype, liger),
        "packed_binary_matmul": bench_packed_matmul(timer, shapes, dtype),
    }


def headline(results: dict) -> dict:
    """The ratios docs/kernels.md's table shows: ``<kernel>_<dtype>`` -> eager (or dense) time over kernel time."""
    ratios = {}
    for dtype, kernels in results.items():
        for name in ("seeded_perturb", "lowrank_perturb", "depth_smooth"):
            ratios[f"{name}_{dtype}"] = kernels[name]["speedup"]
        for phase, numbers in kernels["token_logprobs"].items():
            ratios[f"token_logprobs_{phase}_{dtype}"] = numbers["speedup"]
            if "speedup_vs_liger" in numbers:
                ratios[f"token_logprobs_{phase}_vs_liger_{dtype}"] = numbers["speedup_vs_liger"]
        for shape, numbers in kernels["packed_binary_matmul"].items():
            if shape != "shape":
                ratios[f"packed_binary_matmul_{shape}_{dtype}"] = numbers["speedup"]
    return ratios


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument(
        "--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16", "float16"]
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available")
    parser.add_argument("--repeats", type=int, default=20, help="timing samples per measurement")
    parser.add_argument("--inner", type=int, default=10, help="back-to-back calls per sample")
    args = parser.parse_args()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    shapes = SHAPES[device.type]
    timer = Timer(device, args.repeats, args.inner)
    liger, liger_reason = liger_cross_entropy(device)
    summary = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "triton": _version("triton"),
        "liger_kernel": _version("liger_kernel") if liger else f"skipped: {liger_reason}",
        "copy": timer.measure_copy(shapes["copy_bytes"]),
    }
    print(f"{summary['device']}: device-to-device copy {summary['copy']['gbps']:.0f} GB/s", flush=True)
    results = {}
    for name in args.dtypes:
        results[name] = bench_dtype(timer, shapes, getattr(torch, name), liger)
        for kernel, numbers in results[name].items():
            if isinstance(numbers, dict) and "speedup" in numbers:
                share = numbers["fraction_of_copy"]
                print(f"{name} {kernel}: x{numbers['speedup']:.2f} vs eager, {share:.0%} of copy bandwidth", flush=True)
    summary |= {"path": results[args.dtypes[0]]["path"], "speedup": headline(results)}
    save_json(args.output_dir, "kernel_speed", {"summary": summary, "shapes": shapes, "results": results})
    emit(summary | {"results": results})


def _version(module: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return None
    return getattr(importlib.import_module(module), "__version__", "unknown")


if __name__ == "__main__":
    main()
