"""Callbacks that add metrics to a Trainer's log entry from ``on_log``."""


def add_to_logs(state, logs: dict | None, metrics: dict) -> None:
    """Add ``metrics`` to the logs being reported and to the entry ``Trainer.log`` already stored.

    ``Trainer.log`` appends a copy of ``logs`` to ``state.log_history`` before calling
    ``on_log``, so updating ``logs`` alone would not reach the saved history.
    """
    if logs is not None:
        logs.update(metrics)
    if state.log_history and state.log_history[-1].get("step") == state.global_step:
        state.log_history[-1].update(metrics)
