"""The CPU-side logic of benchmarks/gpu_check.py: collecting each step's JSON, surviving a failing step."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('progress\n{"speedup": 1.5}\n\n', {"speedup": 1.5}),
        ("progress\nnot json\n", None),
        ("[1, 2]\n", None),
        ("", None),
    ],
)
def test_the_result_is_the_json_object_on_the_last_line(output, expected):
    assert gpu_check.last_json_line(output) == expected


def test_a_failing_step_is_recorded_and_the_next_steps_still_run(tmp_path):
    steps = [
        ("first", ["-c", "print('warming up'); print('{\"ratio\": 2.0}')"]),
        ("broken", ["-c", "import sys; print('partial'); sys.exit('boom: out of memory')"]),
        ("silent", ["-c", "print('no json here')"]),
        ("last", ["-c", "print('{\"ratio\": 3.0}')"]),
    ]
    output = tmp_path / "out" / "gpu_check.json"
    report = gpu_check.run_all(steps, output, timeout=60)
    assert json.loads(output.read_text()) == report
    assert report["ok"] is False
    first, broken, silent, last = (report["steps"][name] for name, _ in steps)
    assert first["ok"] and first["result"] == {"ratio": 2.0} and first["returncode"] == 0
    assert not broken["ok"] and broken["returncode"] == 1 and "boom: out of memory" in broken["error"]
    assert not silent["ok"] and silent["result"] is None and "no json here" in silent["error"]
    assert last["ok"] and last["result"] == {"ratio": 3.0}
    assert "boom" in (tmp_path / "out" / "gpu_check_logs" / "broken.log").read_text()
    assert set(report["environment"]["versions"]) == {"torch", "triton", "transformers", "liger_kernel"}


def test_a_step_past_its_timeout_is_recorded(tmp_path):
    steps = [("slow", ["-c", "import time; print('started', flush=True); time.sleep(30)"])]
    record = gpu_check.run_all(steps, tmp_path / "gpu_check.json", timeout=2)["steps"]["slow"]
    assert not record["ok"] and record["returncode"] is None and "timed out after 2 s" in record["error"]


@pytest.mark.skipif(gpu_check.torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_without_cuda_the_script_says_so_and_measures_nothing(tmp_path):
    env = os.environ | {"PYTHON_BIN": sys.executable, "GPU_CHECK_OUTPUT": str(tmp_path / "gpu_check.json")}
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert gpu_check.NO_CUDA in done.stderr
    assert not (tmp_path / "gpu_check.json").exists()
