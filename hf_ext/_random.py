"""Seeds for a resumable run's randomness: derived from its settings, and applied to code that draws from global state.

A run that is killed and resumed in a new process must draw the same numbers as the uninterrupted
one. Our own code draws from generators seeded by :func:`derived_seed`; a library that draws from
the global generators (BoTorch's ``PairwiseGP`` starts its solver from ``np.random``, a
``fit_gpytorch_mll`` retry samples the priors with ``torch``) runs inside :func:`seeded_global_rng`,
because the global state differs between processes (and within one, by what ran before). Runs that share a
process (a thread pool as the executor) take turns inside those blocks: the global generators are one per process.
"""

import hashlib
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

# Held while a block draws from the seeded global generators, so that a second thread's block cannot reseed or
# draw from them in between; re-entrant, for blocks nested in one thread.
_GLOBAL_RNG_LOCK = threading.RLock()


def derived_seed(*parts: object) -> int:
    """A seed in ``[0, 2**63)`` that is a function of ``parts`` only (their ``repr``): the same in every process.

    ``derived_seed(config.seed, round_index, "model")`` gives each round and purpose its own stream;
    Python's ``hash`` of a string would not do, it changes from process to process.
    """
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@contextmanager
def seeded_global_rng(seed: int) -> Iterator[None]:
    """Seed the global torch, NumPy and ``random`` generators with ``seed``, and restore them afterwards.

    Torch's CUDA generators are included once CUDA is initialised (seeding them before would
    initialise it). Code outside the block draws exactly what it would have drawn without it. Blocks in other
    threads wait for this one to end.
    """
    cuda = torch.cuda.is_initialized()
    with _GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=range(torch.cuda.device_count()) if cuda else []):
        numpy_state, python_state = np.random.get_state(), random.getstate()
        torch.default_generator.manual_seed(seed)
        if cuda:
            torch.cuda.manual_seed_all(seed)
        np.random.seed(seed % 2**32)
        random.seed(seed)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)
