"""Every GPU check in one run, collected into one JSON file (run by ``benchmarks/gpu_check.sh``).

    python benchmarks/gpu_check.py [--output outputs/gpu_check.json] [--only kernel_speed ...] [--timeout 1800]

Runs the kernel tests on CUDA (no interpreter), then each benchmark in its own process; every
benchmark prints JSON on its last line, which is stored under its name with its exit status and
duration. A step that fails (non-zero exit, a timeout, no JSON) is recorded with the tail of its
output and the run goes on; the file is rewritten after every step, so an interrupted run keeps
what it measured. Full logs go next to the JSON file (``<output stem>_logs/<step>.log``).
"""

import argparse
import importlib.util
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

# (name, arguments after the Python interpreter). The benchmarks build random-weight models where
# the offline model packages are absent.
STEPS = (
    ("kernel_tests", ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/kernels"]),
    ("kernel_speed", ["benchmarks/kernel_speed.py"]),
    ("token_logprobs_memory", ["benchmarks/token_logprobs_memory.py", "--repeats", "1"]),
    ("zo_step", ["benchmarks/zo_bf16_step.py"]),
    ("model_speed", ["benchmarks/model_speed.py"]),
    # Every optimizer's step at 135M parameters (dense and MoE, fp32 and bf16) against torch's AdamW and its anchor.
    ("optimizer_step", ["benchmarks/optimizer_step.py", "--seeds", "0", "1"]),
    # Compiled against eager on a 4-layer SmolLM2: at 135M, compiling Scion's and SymmetryCurvature's steps took
    # longer than a step's timeout on a CPU.
    (
        "optimizer_step_compiled",
        [
            "benchmarks/optimizer_step.py",
            *("--shapes", "smollm2", "--dtypes", "fp32", "--layers", "4", "--hidden", "256", "--compiled"),
            *("--optimizers", "sps", "ngn", "gradient_smoothing", "scion", "symmetry_curvature", "--seeds", "0", "1"),
        ],
    ),
)
# What the steps import beyond torch and Triton: `pip install --no-deps -e .` installs none of it.
NEEDED_MODULES = ("transformers", "accelerate", "datasets", "peft", "matplotlib", "pytest")
NO_CUDA = "gpu_check: no CUDA device visible to torch; nothing was measured (run this on a machine with a GPU)"


def environment() -> dict:
    """The machine and versions the numbers belong to."""
    versions = {}
    for module in ("torch", "triton", "transformers", "liger_kernel"):
        if importlib.util.find_spec(module) is None:
            versions[module] = None
        else:
            versions[module] = getattr(__import__(module), "__version__", "unknown")
    cuda = torch.cuda.is_available()
    return {
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "versions": versions,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def last_json_line(output: str) -> dict | None:
    """The JSON object on the last non-empty line of ``output``, or ``None``."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def run_step(name: str, command: list[str], log_dir: Path, timeout: float) -> dict:
    """Run one step; its exit status, seconds, and its JSON result or an error with the output's tail."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        output, returncode = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as error:
        output = _text(error.stdout) + _text(error.stderr) + f"\ntimed out after {timeout:.0f} s"
        returncode = None
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / f"{name}.log").write_text(output)
    record = {"command": " ".join(command), "returncode": returncode, "seconds": time.perf_counter() - start}
    result = last_json_line(output)
    if name == "kernel_tests":  # pytest ends with its summary line, not JSON
        summary = [line for line in output.splitlines() if line.strip()][-1:] or [""]
        result = {"summary": summary[0]}
    if returncode == 0 and result is not None:
        return record | {"ok": True, "result": result}
    return record | {"ok": False, "result": result, "error": output[-3000:]}


def _text(stream: bytes | str | None) -> str:
    if stream is None:
        return ""
    return stream.decode(errors="replace") if isinstance(stream, bytes) else stream


def run_all(steps, output: Path, timeout: float, python: str = sys.executable) -> dict:
    """Run ``steps`` in order, writing ``output`` after each; returns what was written."""
    report = {"environment": environment(), "steps": {}}
    output.parent.mkdir(parents=True, exist_ok=True)
    log_dir = output.with_name(f"{output.stem}_logs")
    for name, arguments in steps:
        print(f"gpu_check: {name} ...", flush=True)
        record = run_step(name, [python, *arguments], log_dir, timeout)
        report["steps"][name] = record
        status = "ok" if record["ok"] else f"FAILED (exit {record['returncode']}), see {log_dir / name}.log"
        print(f"gpu_check: {name} {status} in {record['seconds']:.0f} s", flush=True)
        output.write_text(json.dumps(report, indent=2, sort_keys=True))
    report["ok"] = all(record["ok"] for record in report["steps"].values())
    output.write_text(json.dumps(report, indent=2, sort_keys=True))
    return report


def missing_modules() -> list[str]:
    return [module for module in NEEDED_MODULES if importlib.util.find_spec(module) is None]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="outputs/gpu_check.json", help="the one JSON file of all results")
    parser.add_argument("--only", nargs="+", choices=[name for name, _ in STEPS], help="run only these steps")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed to each step")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(NO_CUDA, file=sys.stderr)
        return 2
    missing = missing_modules()
    if missing:
        print(f"gpu_check: missing modules {missing}; the steps that import them will fail", file=sys.stderr)
    steps = [(name, arguments) for name, arguments in STEPS if not args.only or name in args.only]
    report = run_all(steps, Path(args.output), args.timeout)
    print(f"gpu_check: wrote {args.output} ({'all ok' if report['ok'] else 'some steps failed'})")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
