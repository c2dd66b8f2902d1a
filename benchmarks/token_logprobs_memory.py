"""Peak memory of the fused, vocabulary-chunked token log-prob vs ``log_softmax`` + gather.

    python benchmarks/token_logprobs_memory.py [--tokens 4096] [--vocabs 49152 2048] [--repeats 3]

For each vocabulary size, implementation and phase ("forward": under ``no_grad``, as in
analysis; "train": forward and backward) over ``(tokens, vocab)`` fp32 logits, each in its own
process: the peak above the memory held once the logits exist (on CPU the kernel's high-water mark of
resident memory, reset before the step; ``max_memory_allocated`` on CUDA), in MiB. On CPU the fused path is the chunked
torch reference; on CUDA the Triton kernels (forward and backward, ``overwrite_logits=False``). The
last line is JSON with ``fused_over_eager_<phase>_<vocab>`` (< 1: the fused path needs less).
"""

import argparse
import json

import torch
from _harness import PeakRSS, benchmark_parser, emit, median_of_isolated_runs, save_json

from hf_ext.kernels import token_logprobs

IMPLEMENTATIONS = ("fused", "eager")
PHASES = ("forward", "train")


def eager_token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """What the fused path replaces: a full fp32 log-softmax over the vocabulary, then gather."""
    return torch.log_softmax(logits.float(), -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def run_one(implementation: str, phase: str, tokens: int, vocab: int) -> dict:
    """One phase of one implementation in this process; the peak above the logits, in MiB."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    generator = torch.Generator(device=device).manual_seed(0)
    logits = torch.randn(tokens, vocab, device=device, generator=generator, requires_grad=True)
    labels = torch.randint(vocab, (tokens,), device=device, generator=generator)
    fn = token_logprobs if implementation == "fused" else eager_token_logprobs
    fn(logits[:2].detach(), labels[:2])  # one-off costs (the dispatch's Triton import) stay out of the peak

    def step():
        if phase == "train":
            fn(logits, labels).sum().backward()
        else:
            with torch.no_grad():
                fn(logits, labels)

    mib = 1024**2
    if device.type == "cuda":
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        return {"peak_above_logits_mib": (torch.cuda.max_memory_allocated() - baseline) / mib}
    with PeakRSS() as peak:
        step()
    return {"peak_above_logits_mib": (peak.peak - peak.start) / mib}


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--vocabs", type=int, nargs="+", default=[49152, 2048])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs=2, metavar=("IMPLEMENTATION", "PHASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(run_one(*args.only, args.tokens, args.vocabs[0])))
        return
    results, summary = {}, {"tokens": args.tokens, "device": "cuda" if torch.cuda.is_available() else "cpu"}
    for vocab in args.vocabs:
        for phase in PHASES:
            for implementation in IMPLEMENTATIONS:
                flags = ["--only", implementation, phase, "--tokens", str(args.tokens), "--vocabs", str(vocab)]
                results[f"{implementation}_{phase}_{vocab}"] = median_of_isolated_runs(__file__, flags, args.repeats)
            fused, eager = (results[f"{i}_{phase}_{vocab}"]["peak_above_logits_mib"] for i in IMPLEMENTATIONS)
            key = f"{phase}_{vocab}"
            summary |= {f"fused_mib_{key}": fused, f"eager_mib_{key}": eager, f"fused_over_eager_{key}": fused / eager}
            print(f"vocab {vocab}, {phase}: fused {fused:.0f} MiB, log_softmax+gather {eager:.0f} MiB", flush=True)
    save_json(args.output_dir, "token_logprobs_memory", {"results": results, "summary": summary})
    emit(summary)


if __name__ == "__main__":
    main()
