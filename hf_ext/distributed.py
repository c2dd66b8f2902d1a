"""Sharded training with accelerate's FSDP2 on CPU processes, through the code path GPUs take.

A run that works on one device goes to many by its accelerate config alone (``fsdp_version: 2``):
accelerate shards the model with ``fully_shard`` (each decoder layer, then the root), and the
``Trainer`` and TRL's trainers save and resume through it. On GPUs nothing here is needed.

accelerate 1.16 takes an FSDP plugin only on GPU-like devices: on CPU processes (``MULTI_CPU``,
gloo) it drops the plugin and wraps the model in DDP, so a CPU run would test nothing sharded.
:func:`enable_fsdp_on_cpu` lets its state take the FSDP path there as it does on a GPU, so that two
CPU processes run the same sharding, collectives and checkpoints an FSDP2 run on GPUs does (tests,
CI, and ``hf-ext run NAME --accelerate-config fsdp2_cpu_2proc``). ``python -m hf_ext.distributed
SCRIPT ARGS`` runs a script with it enabled; ``hf-ext run`` starts CPU FSDP configs that way.
"""

import copy
import functools
import runpy
import sys
import warnings
from pathlib import Path

import torch
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor
from transformers import PreTrainedModel

from ._sharded import whole


def enable_fsdp_on_cpu() -> None:
    """Let accelerate shard with its FSDP plugin on CPU processes instead of silently using DDP (idempotent).

    From the next ``Accelerator`` (which every ``Trainer`` creates) on, a state that accelerate
    makes ``MULTI_CPU`` while given an FSDP plugin (an FSDP accelerate config, ``ACCELERATE_USE_FSDP``,
    or ``TrainingArguments(fsdp=True, fsdp_config=...)``) becomes ``FSDP`` with that plugin, as
    accelerate does for GPU processes. Other states are left as they are.
    """
    initialize = AcceleratorState.__init__
    if getattr(initialize, "_hf_ext_fsdp_on_cpu", False):
        return

    @functools.wraps(initialize)
    def __init__(self, *args, fsdp_plugin=None, **kwargs):
        initialize(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
        if self.distributed_type == DistributedType.MULTI_CPU and fsdp_plugin is not None:
            if self._mixed_precision != "no":
                fsdp_plugin.set_mixed_precision(self._mixed_precision)
            self.fsdp_plugin = fsdp_plugin
            self.distributed_type = DistributedType.FSDP
            PartialState._shared_state["distributed_type"] = DistributedType.FSDP  # as accelerate does on GPUs

    __init__._hf_ext_fsdp_on_cpu = True
    AcceleratorState.__init__ = __init__


def fsdp_launch_env(accelerate_config: str | Path) -> dict[str, str]:
    """The ``ACCELERATE_*`` and ``FSDP_*`` variables ``accelerate launch`` gives each process of ``accelerate_config``.

    Read by accelerate's own launcher code, so every FSDP setting means what it means on GPUs; the
    caller starts the processes (``torchrun``: accelerate starts a CPU config as one process).
    """
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(["--config_file", str(accelerate_config), "script.py"])
    args, _, _ = _validate_launch_command(args)
    with warnings.catch_warnings():  # its launcher's own port check: the caller starts the processes
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        environment = prepare_multi_gpu_env(args)
    if args.use_cpu:  # accelerate's GPU launcher, which wrote the rest, has no CPU setting
        environment["ACCELERATE_USE_CPU"] = "true"
    return {key: value for key, value in environment.items() if key.startswith(("ACCELERATE_", "FSDP_"))}


def unsharded_copy(model: PreTrainedModel) -> PreTrainedModel:
    """A copy of ``model`` holding whole tensors on this rank, as one process would have it.

    ``copy.deepcopy`` of an unsharded model. An FSDP2-sharded one is rebuilt as its own class from its
    config (without drawing from the global random generator) and gets every shard gathered: every
    rank calls this. The copy trains, evaluates or is sharded again independently of ``model``.
    """
    if not any(isinstance(param, DTensor) for param in model.parameters()):
        return copy.deepcopy(model)
    architecture = next(cls for cls in type(model).__mro__ if not issubclass(cls, FSDPModule))
    with torch.random.fork_rng(devices=[]):
        plain = architecture(copy.deepcopy(model.config))
    plain.load_state_dict({name: whole(tensor) for name, tensor in model.state_dict().items()})
    plain.generation_config = copy.deepcopy(model.generation_config)
    reference = next(model.parameters())
    return plain.to(reference.device, reference.dtype)


def main(argv: list[str] | None = None) -> None:
    """``python -m hf_ext.distributed SCRIPT [ARGS]``: run ``SCRIPT`` as ``__main__`` with FSDP enabled on CPU."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        raise SystemExit("usage: python -m hf_ext.distributed SCRIPT [ARGS ...]")
    enable_fsdp_on_cpu()
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
