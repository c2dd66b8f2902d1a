"""Speed of each Triton kernel as a ratio to eager torch doing the same work (CUDA only).

    python benchmarks/kernel_speed.py [--numel 16777216] [--dtype bfloat16]

Prints one line per kernel and a JSON object on the last line; ``speedup`` > 1 means the
kernel is faster than eager torch. Without CUDA it reports that nothing was measured.
"""

import argparse
import functools

import torch
from _harness import emit, median_seconds
from hf_ext.kernels import seeded_perturb_triton_, triton_available


def eager_seeded_perturb_(param: torch.Tensor, seed: int, scale: float) -> torch.Tensor:
    """What eager torch does: materialise the noise tensor, then add it."""
    generator = torch.Generator(device=param.device).manual_seed(seed)
    noise = torch.randn(param.shape, generator=generator, device=param.device, dtype=param.dtype)
    return param.add_(noise, alpha=scale)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numel", type=int, default=1 << 24)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = parser.parse_args()
    if not (torch.cuda.is_available() and triton_available()):
        emit({"measured": False, "reason": "needs CUDA and Triton"})
        return
    device = torch.device("cuda")
    param = torch.zeros(args.numel, device=device, dtype=getattr(torch, args.dtype))
    cases = {"seeded_perturb": (seeded_perturb_triton_, eager_seeded_perturb_)}
    result = {"measured": True, "device": torch.cuda.get_device_name(), "numel": args.numel, "dtype": args.dtype}
    for name, (kernel, eager) in cases.items():
        kernel_s = median_seconds(functools.partial(kernel, param, 1, 1e-3), device)
        eager_s = median_seconds(functools.partial(eager, param, 1, 1e-3), device)
        result[name] = {"kernel_ms": kernel_s * 1e3, "eager_ms": eager_s * 1e3, "speedup": eager_s / kernel_s}
        print(f"{name}: kernel {kernel_s * 1e3:.3f} ms, eager {eager_s * 1e3:.3f} ms, x{eager_s / kernel_s:.2f}")
    emit(result)


if __name__ == "__main__":
    main()
