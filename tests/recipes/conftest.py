import concurrent.futures as cf
import subprocess
import sys

import pytest


@pytest.fixture
def run_on_two_processes(tmp_path):
    """``hf-ext run RECIPE --accelerate-config cpu_2proc key=value...`` into ``tmp_path``; returns stdout.

    ``accelerate_config="fsdp2_cpu_2proc"`` shards the model between the two processes instead.
    """

    def run(recipe: str, overrides: list[str], accelerate_config: str = "cpu_2proc") -> str:
        command = [sys.executable, "-m", "hf_ext.cli", "run", recipe, "--accelerate-config", accelerate_config]
        result = subprocess.run(
            [*command, *overrides, f"output_dir={tmp_path}"], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout

    return run


class CountingExecutor(cf.ThreadPoolExecutor):
    """A thread pool that counts the jobs given to it: a stand-in for a user's Dask or Ray executor."""

    submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def counting_executor():
    with CountingExecutor(2) as executor:
        yield executor
