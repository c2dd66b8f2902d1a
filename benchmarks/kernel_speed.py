"""Speed of each Triton kernel as a ratio to eager torch doing the same work (CUDA only).

    python benchmarks/kernel_speed.py [--rows 4096] [--cols 4096] [--rank 8] [--tokens 4096] [--vocab 49152]
                                      [--linear-shape 2048 576 1536] [--dtype bfloat16]

Prints one line per kernel and a JSON object on the last line; ``speedup`` > 1 means the
kernel is faster than eager torch. Without CUDA it reports that nothing was measured.
"""

import argparse
import functools

import torch
import torch.nn.functional as F
from _harness import emit, median_seconds

from hf_ext.kernels import (
    depth_smooth_triton,
    lowrank_perturb_triton_,
    pack_signs,
    packed_binary_matmul_triton,
    seeded_perturb_triton_,
    token_logprobs_triton,
    triton_available,
    unpack_signs,
)
from hf_ext.optim import smoothing_matrix


def _eager_noise(shape, seed: int, like: torch.Tensor) -> torch.Tensor:
    generator = torch.Generator(device=like.device).manual_seed(seed)
    return torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)


def eager_seeded_perturb_(param: torch.Tensor, seed: int, scale: float) -> torch.Tensor:
    """What eager torch does: materialise the noise tensor, then add it."""
    return param.add_(_eager_noise(param.shape, seed, param), alpha=scale)


def eager_lowrank_perturb_(weight: torch.Tensor, basis: torch.Tensor, seed: int, scale: float) -> torch.Tensor:
    """Eager torch: materialise N, then the full-size N @ U^T, then add it."""
    return weight.add_(_eager_noise((weight.shape[0], basis.shape[1]), seed, weight) @ basis.T, alpha=scale)


def eager_token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Eager torch: a full fp32 log_softmax over the vocabulary, then gather."""
    return torch.log_softmax(logits.float(), -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def eager_depth_smooth(stacked, mixing, before):
    """What torch does without the kernel: fp32 copies, a difference, a matmul and a sum."""
    return (before.float() + mixing @ (stacked.float() - before.float())).to(stacked.dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=4096, help="rows of the token_logprobs case")
    parser.add_argument("--vocab", type=int, default=49152, help="vocabulary of the token_logprobs case")
    parser.add_argument(
        "--linear-shape",
        type=int,
        nargs=3,
        default=[8 * 256, 576, 1536],
        metavar=("TOKENS", "IN", "OUT"),
        help="x rows and weight (out, in) of the packed_binary_matmul case (default: a SmolLM2-135M MLP up-projection)",
    )
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = parser.parse_args()
    if not (torch.cuda.is_available() and triton_available()):
        emit({"measured": False, "reason": "needs CUDA and Triton"})
        return
    device = torch.device("cuda")
    dtype = getattr(torch, args.dtype)
    weight = torch.zeros(args.rows, args.cols, device=device, dtype=dtype)
    basis = torch.linalg.qr(torch.randn(args.cols, args.rank, device=device))[0].to(dtype)
    logits = torch.randn(args.tokens, args.vocab, device=device, dtype=dtype)
    labels = torch.randint(0, args.vocab, (args.tokens,), device=device)
    linear_tokens, linear_in, linear_out = args.linear_shape
    x = torch.randn(linear_tokens, linear_in, device=device, dtype=dtype)
    packed = pack_signs(torch.randn(linear_out, linear_in, device=device))
    row_scale = torch.rand(linear_out, device=device, dtype=dtype)
    col_scale = torch.rand(linear_in, device=device, dtype=dtype)
    # Eager torch keeps the dense binarised weight in x's dtype and calls F.linear on it.
    dense = row_scale[:, None] * unpack_signs(packed, linear_in, dtype) * col_scale[None, :]
    # One role of SmolLM2-135M's 30 layers (mlp.up_proj, 1536 x 576), stacked, window 3.
    stacked = torch.randn(30, 1536 * 576, device=device, dtype=dtype)
    before = torch.randn_like(stacked)
    mixing = smoothing_matrix(30, 3).to(device)
    result = {
        "measured": True,
        "device": torch.cuda.get_device_name(),
        "shape": [args.rows, args.cols],
        "rank": args.rank,
        "logits": [args.tokens, args.vocab],
        "linear_shape": args.linear_shape,
        "dtype": args.dtype,
    }
    calls = {
        "seeded_perturb": (
            functools.partial(seeded_perturb_triton_, weight, 1, 1e-3),
            functools.partial(eager_seeded_perturb_, weight, 1, 1e-3),
        ),
        "lowrank_perturb": (
            functools.partial(lowrank_perturb_triton_, weight, basis, 1, 1e-3),
            functools.partial(eager_lowrank_perturb_, weight, basis, 1, 1e-3),
        ),
        "token_logprobs": (
            functools.partial(token_logprobs_triton, logits, labels),
            functools.partial(eager_token_logprobs, logits, labels),
        ),
        "depth_smooth": (
            functools.partial(depth_smooth_triton, stacked, mixing, before),
            functools.partial(eager_depth_smooth, stacked, mixing, before),
        ),
        "packed_binary_matmul": (
            functools.partial(packed_binary_matmul_triton, x, packed, row_scale, col_scale),
            functools.partial(F.linear, x, dense),
        ),
    }
    for name, (kernel_call, eager_call) in calls.items():
        kernel_s = median_seconds(kernel_call, device)
        eager_s = median_seconds(eager_call, device)
        result[name] = {"kernel_ms": kernel_s * 1e3, "eager_ms": eager_s * 1e3, "speedup": eager_s / kernel_s}
        print(f"{name}: kernel {kernel_s * 1e3:.3f} ms, eager {eager_s * 1e3:.3f} ms, x{eager_s / kernel_s:.2f}")
    emit(result)


if __name__ == "__main__":
    main()
