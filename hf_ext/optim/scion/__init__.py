"""Scion (norm-constrained conditional gradient) with its batch-size schedule and the critical-batch rule."""

from .batch_schedule import BatchSchedule, Stage
from .callback import BatchScheduleCallback
from .critical_batch import Constants, CriticalBatch, critical_batch_size, measure_constants
from .optimizer import Scion, scion_param_groups

__all__ = [
    "BatchSchedule",
    "BatchScheduleCallback",
    "Constants",
    "CriticalBatch",
    "Scion",
    "Stage",
    "critical_batch_size",
    "measure_constants",
    "scion_param_groups",
]
