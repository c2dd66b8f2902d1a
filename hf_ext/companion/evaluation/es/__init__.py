"""How the evolution strategies of :mod:`hf_ext.companion.es` are judged: every compared method behind one
``solve`` (ours, pycma, Nevergrad), COCO's bbob-noisy runs, two noisy tasks outside COCO, the misranking of a
generation, and the paired statistics of the comparison.

The COCO runner needs the ``[es]`` extra (``coco-experiment``, ``cma`` for the pycma baselines, and ``cocopp`` to
post-process the result folders).
"""

from .coco import CocoConfig, algorithm_folders, read_index, run_coco, run_key
from .harness import METHODS, solve
from .misranking import misranking_by_generation, pair_misranking

__all__ = [
    "METHODS",
    "CocoConfig",
    "algorithm_folders",
    "misranking_by_generation",
    "pair_misranking",
    "read_index",
    "run_coco",
    "run_key",
    "solve",
]
