"""How many parameter entries has training changed? Logged while training, per module type.

Plain SGD on RLVR is reported to leave almost every entry of a bf16 model unchanged. The
callback compares the model against a snapshot taken at train start and logs the changed
fraction in the parameters' own dtype, and the fraction whose change is large enough to
survive in bf16 (which tells whether bf16 rounding is why small updates vanish), plus the
optimizer's state bytes.

On a sharded model (FSDP2) every count is over whole tensors: each rank counts its own shards, the
counts are summed across ranks, and block checksums cover the unsharded tensor's blocks, so the
metrics are those of one process.
"""

import re
from collections import defaultdict

import torch
import torch.distributed as dist
from transformers import TrainerCallback

from .._sharded import flat_shard, shard_group, sharding, sum_across
from .._trainer_logs import add_to_logs
from .._validation import check_count
from .delta import bit_pattern, changed_entries

SNAPSHOTS = ("cpu", "device", "block_hash")
_LAYER_INDEX = re.compile(r"\.\d+\.")


def module_type(parameter_name: str) -> str:
    """The parameter's name without layer indices: one group per kind of weight across depth."""
    return _LAYER_INDEX.sub(".", parameter_name)


def block_checksums(tensor: torch.Tensor, block_size: int) -> torch.Tensor:
    """One int64 checksum per ``block_size`` entries; any single-entry change alters its block's sum.

    The sum weights each entry's bit pattern by a distinct odd number (arithmetic wraps modulo
    2^64), so a change of one entry can never cancel out. The blocks are the whole tensor's: a
    sharded tensor's ranks each add their entries' terms and sum them across ranks (every rank calls this).
    """
    entries, start, group = flat_shard(tensor)
    bits = bit_pattern(entries).to(torch.int64)
    position = torch.arange(start, start + bits.numel(), device=bits.device)
    sums = torch.zeros(-(-tensor.numel() // block_size), dtype=torch.int64, device=bits.device)
    sums.index_add_(0, position // block_size, bits * (2 * (position % block_size) + 1))
    return sum_across(sums, group)


def visible_in_bf16(current: torch.Tensor, initial: torch.Tensor) -> torch.Tensor:
    """Where the change from ``initial`` is at least half a bf16 ulp of ``initial``.

    Such a change survives being added to a bf16 copy of the initial weight; a smaller one is
    rounded away. (Comparing the two bf16-rounded values instead would also count tiny changes
    of weights that sit on a rounding tie, which quantized checkpoints have many of.)
    """
    initial = initial.float()
    change = (current.float() - initial).abs()
    _, exponent = torch.frexp(initial)  # |initial| = m * 2^exponent, m in [0.5, 1); bf16 keeps 8 bits
    half_ulp = torch.ldexp(torch.ones_like(initial), exponent - 9)
    return torch.where(initial == 0, change > 0, change >= half_ulp)


def optimizer_state_bytes(optimizer) -> int:
    """Bytes held in tensors of the optimizer's per-parameter state (0 for plain SGD)."""
    if optimizer is None:
        return 0
    return sum(
        value.numel() * value.element_size()
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )


class UpdateSparsityCallback(TrainerCallback):
    """Logs ``sparsity/*``: the fraction of parameter entries that differ from their value at train start.

    Args:
        snapshot: where the initial values are kept: ``"cpu"`` (a copy in host memory), ``"device"``
            (a copy next to the parameters), or ``"block_hash"`` (one checksum per ``block_size``
            entries on the device; it reports the fraction of changed blocks, not entries).
        every_n_steps: measure at the first log at least this many steps after the last
            measurement (0: at every log).
        block_size: entries per checksum in ``"block_hash"`` mode.
    """

    def __init__(self, snapshot: str = "cpu", every_n_steps: int = 0, block_size: int = 4096):
        if snapshot not in SNAPSHOTS:
            raise ValueError(f"UpdateSparsityCallback: `snapshot` must be one of {SNAPSHOTS}, got {snapshot!r}")
        check_count("UpdateSparsityCallback", "every_n_steps", every_n_steps)
        check_count("UpdateSparsityCallback", "block_size", block_size, least=1)
        self.snapshot, self.every_n_steps, self.block_size = snapshot, every_n_steps, block_size
        self.initial: dict[str, torch.Tensor] = {}
        self.history: list[dict[str, float]] = []
        self._last_step: int | None = None

    def _keep(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.snapshot == "block_hash":
            return block_checksums(tensor, self.block_size)
        entries = flat_shard(tensor)[0].detach()
        return entries.to("cpu" if self.snapshot == "cpu" else entries.device, copy=True)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not self.initial:
            self.initial = {name: self._keep(param) for name, param in model.named_parameters()}

    def measure(self, model, optimizer=None) -> dict[str, float]:
        """The ``sparsity/*`` metrics of ``model`` against the snapshot (every rank calls this for a sharded model)."""
        params = list(model.named_parameters())
        ranks = shard_group((param for _, param in params), "UpdateSparsityCallback")
        # Tensors whole on every rank (and block checksums, always whole) are counted by one rank only.
        whole_counted_here = ranks is None or dist.get_rank(ranks) == 0
        groups = sorted({module_type(name) for name, _ in params})
        # Per module type, then bf16-visible overall; next to the parameters, where the collectives run.
        changed = torch.zeros(len(groups) + 1, dtype=torch.float64, device=params[0][1].device if params else None)
        total = defaultdict(int)
        with torch.no_grad():
            for name, param in params:
                group = groups.index(module_type(name))
                if self.snapshot == "block_hash":
                    now = block_checksums(param, self.block_size)
                    changed[group] += int((now != self.initial[name]).sum()) if whole_counted_here else 0
                    total[groups[group]] += now.numel()
                    continue
                total[groups[group]] += param.numel()
                if not (whole_counted_here or sharding(param) is not None):
                    continue
                entries, initial = flat_shard(param)[0], self.initial[name]
                changed[group] += changed_entries(entries, initial).numel()
                if param.is_floating_point():
                    changed[-1] += int(visible_in_bf16(entries, initial.to(entries.device)).sum())
        changed = sum_across(changed, ranks).tolist()
        changed, changed_bf16 = dict(zip(groups, changed[:-1], strict=True)), changed[-1]
        unit = "block" if self.snapshot == "block_hash" else "entry"
        all_changed, all_total = sum(changed.values()), sum(total.values())
        metrics = {f"sparsity/changed_{unit}_fraction": all_changed / all_total}
        if self.snapshot != "block_hash":
            metrics["sparsity/changed_entry_fraction_bf16"] = changed_bf16 / all_total
        metrics |= {f"sparsity/changed_{unit}_fraction/{g}": changed[g] / total[g] for g in sorted(total)}
        metrics["sparsity/optimizer_state_bytes"] = optimizer_state_bytes(optimizer)
        return metrics

    def on_log(self, args, state, control, logs=None, model=None, optimizer=None, **kwargs):
        step = state.global_step
        if not self.initial or (self._last_step is not None and step - self._last_step < self.every_n_steps):
            return
        self._last_step = step
        metrics = self.measure(model, optimizer)
        self.history.append({"step": step, **metrics})
        add_to_logs(state, logs, metrics)
