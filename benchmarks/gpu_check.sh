#!/usr/bin/env bash
# GPU checks in one go, for a CUDA machine: the kernel tests on CUDA (no interpreter),
# then each kernel's speed as a ratio to eager torch, then a bf16 AGZO training step on
# SmolLM2. Run after `make install TORCH=...`; each step ends with a JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
unset TRITON_INTERPRET
export HF_HUB_OFFLINE=1
"$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check.sh: no CUDA device')"
"$VENV/bin/pytest" -q tests/kernels
"$VENV/bin/python" benchmarks/kernel_speed.py --dtype float32
"$VENV/bin/python" benchmarks/kernel_speed.py --dtype bfloat16
"$VENV/bin/python" benchmarks/token_logprobs_memory.py --repeats 1
"$VENV/bin/python" benchmarks/zo_bf16_step.py
