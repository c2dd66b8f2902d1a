import os
import runpy
import socket
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402  (torch does not import Triton)

if not torch.cuda.is_available():
    # Triton reads this once, at its first import: run kernels on CPU tensors in the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hf_ext.kernels.testing import kernel_variant, triton_runnable  # noqa: E402  (after TRITON_INTERPRET)

# Settings every test that trains shares: fast on 2 CPU cores, nothing written outside tmp_path,
# and TRL's GPU defaults (bf16, activation checkpointing) switched off.
CPU_TRAINING_SETTINGS = {
    "per_device_train_batch_size": 4,
    "max_steps": 1,
    "report_to": "none",
    "save_strategy": "no",
    "use_cpu": True,
    "bf16": False,
    "activation_checkpointing": False,
    "dataloader_pin_memory": False,
    "disable_tqdm": True,
}


@pytest.fixture
def training_args(tmp_path):
    """Build CPU training arguments writing under ``tmp_path``; keyword arguments override the shared settings.

    ``training_args(max_steps=4)`` gives ``TrainingArguments``; ``training_args(DPOConfig, beta=0.2)`` builds
    any subclass of it (TRL configs, ours) from the same settings.
    """

    def build(config_class=None, /, **overrides):
        if config_class is None:
            from transformers import TrainingArguments as config_class
        settings = CPU_TRAINING_SETTINGS | {"output_dir": tmp_path} | overrides
        return config_class(**settings | {"output_dir": str(settings["output_dir"])})

    return build


@dataclass(frozen=True)
class KernelPath:
    """The implementation a kernel test runs: the plain-torch ``reference`` or the ``triton`` kernel."""

    name: str

    def __call__(self, kernel):
        """This path's implementation of the public ``kernel`` (``path(pack_signs)`` is ``pack_signs_triton``)."""
        return kernel_variant(kernel, self.name)

    def skip_unsupported(self, dtype) -> None:
        """Skip the test for a dtype this path cannot run here (the Triton interpreter has no bfloat16)."""
        if self.name == "triton" and dtype == torch.bfloat16 and not torch.cuda.is_available():
            pytest.skip("the Triton interpreter has no bfloat16 (its tl.dot multiplies bit patterns, triton#11584)")


@pytest.fixture(
    params=[
        pytest.param(KernelPath("reference"), id="reference"),
        pytest.param(KernelPath("triton"), id="triton", marks=pytest.mark.triton),
    ]
)
def kernel_path(request) -> KernelPath:
    """Runs a kernel test once per implementation; the Triton one is skipped where Triton cannot run."""
    return request.param


def pytest_collection_modifyitems(config, items):
    """Skip the tests marked ``triton`` where no Triton kernel can run (no CUDA and no interpreter)."""
    runnable, reason = triton_runnable()
    if runnable:
        return
    for item in items:
        if item.get_closest_marker("triton"):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def torchrun():
    """Run ``script *args`` in ``cwd`` under ``torchrun --nproc_per_node=N`` on CPU (one thread a process); fails the
    test on a non-zero exit. Session-scoped, so a module fixture can launch once for many tests.

    With ``accelerate_config`` (an FSDP accelerate config file) the processes get its settings and run
    through ``python -m hf_ext.distributed``, as ``hf-ext run`` starts them: sharded by accelerate's FSDP.
    """

    def run(
        script: Path, *args: str, cwd: Path, nproc_per_node: int = 2, accelerate_config: Path | None = None
    ) -> None:
        from hf_ext.distributed import fsdp_launch_env

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        torchrun = Path(sys.executable).with_name("torchrun")
        module = ["-m", "hf_ext.distributed"] if accelerate_config else []
        command = [str(torchrun), f"--nproc_per_node={nproc_per_node}", f"--master_port={port}", *module, str(script)]
        command += args
        env = os.environ | {"OMP_NUM_THREADS": "1"} | (fsdp_launch_env(accelerate_config) if accelerate_config else {})
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    return run


DISTRIBUTED_RUNS = Path(__file__).with_name("_distributed_runs.py")


@dataclass(frozen=True)
class DistributedRuns:
    """The runs of ``tests/_distributed_runs.py``: on FSDP2-sharded CPU processes, and in this process."""

    folder: Path

    def sharded(self, run: str) -> dict:
        """``run``'s result on the sharded processes, its parameters gathered whole."""
        return torch.load(self.folder / f"{run}.pt")

    def one_process(self, run: str, output_dir: Path) -> dict:
        """``run`` in this process, unsharded, on the same global batch."""
        return runpy.run_path(str(DISTRIBUTED_RUNS))["ALL_RUNS"][run](output_dir)

    @staticmethod
    def max_relative_difference(ours: dict, reference: dict) -> float:
        """Over the tensors of two state dicts with the same names: the largest ``max|ours - ref| / max|ref|``."""
        assert ours.keys() == reference.keys()
        return max(((ours[n] - reference[n]).abs().max() / reference[n].abs().max()).item() for n in reference)


@pytest.fixture(scope="session")
def launch_distributed_runs(torchrun):
    """``launch(folder, runs, ..., nproc_per_node=2)``: each list of runs of ``tests/_distributed_runs.py`` in one
    launch of ``nproc_per_node`` CPU processes sharded by accelerate's FSDP2 (the shipped ``fsdp2_cpu_2proc``
    config), one launch after the other in new processes; returns their ``DistributedRuns``."""
    from hf_ext.recipes import recipes_dir

    config = recipes_dir() / "accelerate" / "fsdp2_cpu_2proc.yaml"

    def launch(folder: Path, *launches: list[str], nproc_per_node: int = 2) -> DistributedRuns:
        for runs in launches:
            torchrun(
                DISTRIBUTED_RUNS,
                str(folder),
                *runs,
                cwd=folder,
                nproc_per_node=nproc_per_node,
                accelerate_config=config,
            )
        return DistributedRuns(folder)

    return launch


@pytest.fixture(scope="session")
def distributed_runs(launch_distributed_runs, tmp_path_factory) -> DistributedRuns:
    """Every tiny-model run of ``tests/_distributed_runs.py`` on two processes, launched once for the whole session
    (twice: ``LATER_RUNS`` in new processes, as a resumed run does)."""
    script = runpy.run_path(str(DISTRIBUTED_RUNS))
    return launch_distributed_runs(
        tmp_path_factory.mktemp("fsdp2_runs"), list(script["RUNS"]), list(script["LATER_RUNS"])
    )


@pytest.fixture
def torchrun_two_processes(tmp_path, torchrun):
    """Run ``script tmp_path`` under ``torchrun --nproc_per_node=2`` on CPU; fails the test on a non-zero exit."""
    return lambda script: torchrun(script, str(tmp_path), cwd=tmp_path)


@pytest.fixture(scope="session")
def resume_check():
    """``tests/_resume.py``: SIGKILL a run at a point, resume it in a new process, compare with the whole run's files
    (``assert_resumes_identically``, ``module_command``, ``lines``)."""
    return SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("_resume.py"))))


# Tensor methods that read a value on the host: each is a device sync on a GPU.
HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__")


@pytest.fixture
def host_reads():
    """A context manager counting, by method, the tensor values read on the host inside it (``HOST_READS``)."""

    @contextmanager
    def counting():
        counts = Counter()

        def counted(name):
            original = getattr(torch.Tensor, name)

            def read(tensor, *args, **kwargs):
                counts[name] += 1
                return original(tensor, *args, **kwargs)

            return mock.patch.object(torch.Tensor, name, read)

        with ExitStack() as patches:
            for name in HOST_READS:
                patches.enter_context(counted(name))
            yield counts

    return counting
