"""The one way the combinatorial solvers make and run a HiGHS model.

HiGHS runs every solve on a process-wide scheduler sized by the first solve's ``threads`` option
and refuses a later solve that asks for another count (its model status stays ``kNotset`` and no
solution comes back), so a process that mixed two solvers' settings lost solutions silently.
"""

_scheduler_threads: int | None = None


def highs_model(time_limit: float, threads: int = 1):
    """A silent ``highspy.Highs`` with a time limit, the global scheduler resized when ``threads`` changes."""
    import highspy

    global _scheduler_threads
    if _scheduler_threads is not None and _scheduler_threads != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _scheduler_threads = threads
    model = highspy.Highs()
    model.setOptionValue("output_flag", False)
    model.setOptionValue("time_limit", float(time_limit))
    model.setOptionValue("threads", int(threads))
    return model


def run_highs(model) -> None:
    """``model.run()``, raising where HiGHS reports an error instead of leaving an empty solution."""
    import highspy

    if model.run() == highspy.HighsStatus.kError:
        raise RuntimeError(f"HiGHS failed to solve the model (status {model.getModelStatus()})")
