"""Optimizers and optimizer wrappers: gradient smoothing across depth, Scion with its batch-size schedule."""

from .batch_schedule import BatchSchedule, Stage
from .batch_schedule_callback import BatchScheduleCallback, PackedStream, PackedStreamCollator
from .constants import Constants, CriticalBatch, critical_batch_size, measure_constants
from .gradient_smoothing import (
    GradientSmoothing,
    GradientSmoothingFactory,
    distance_weights,
    find_blocks,
    smoothing_matrix,
)
from .newton_schulz import newton_schulz
from .scion import Scion, scion_param_groups

__all__ = [
    "BatchSchedule",
    "BatchScheduleCallback",
    "Constants",
    "CriticalBatch",
    "GradientSmoothing",
    "GradientSmoothingFactory",
    "PackedStream",
    "PackedStreamCollator",
    "Scion",
    "Stage",
    "critical_batch_size",
    "distance_weights",
    "find_blocks",
    "measure_constants",
    "newton_schulz",
    "scion_param_groups",
    "smoothing_matrix",
]
