#!/usr/bin/env bash
# Every GPU check in one go, for a CUDA machine: the kernel tests on CUDA (no interpreter), each
# kernel's speed against eager torch and Liger-Kernel, the token log-prob memory, AGZO and MeZO
# bf16 training steps, GradientSmoothing's step time, the packed 1-bit model's forward, and every optimizer's
# step against torch's own (eager at 135M; compiled at 4 layers).
# Writes one JSON file of all results (default outputs/gpu_check.json; set GPU_CHECK_OUTPUT to change it).
#
# On a machine whose torch (with CUDA) and Triton are already installed:
#   pip install --no-deps -e .
#   pip install accelerate datasets peft matplotlib pytest liger-kernel   # whichever are missing
#   make gpu-check PYTHON_BIN=python        # or: bash benchmarks/gpu_check.sh
# After `make install TORCH=...` it uses .venv/bin/python.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON_BIN:-}
if [ -z "$PY" ]; then
  if [ -x "${VENV:-.venv}/bin/python" ]; then PY="${VENV:-.venv}/bin/python"; else PY=python3; fi
fi
unset TRITON_INTERPRET
export HF_HUB_OFFLINE=1
exec "$PY" benchmarks/gpu_check.py --output "${GPU_CHECK_OUTPUT:-outputs/gpu_check.json}" "$@"
