"""The BO loop's evaluations on local processes: ``local_executor(n)`` is a process pool that survives a dead worker.

The pool pickles what it sends, so the objective is a module-level object (a BoTorch test function here). The same
pool runs the recipes' jobs (``hf-ext run cam workers=2``); docs/cluster.md has the Dask and Ray versions.
"""

from botorch.test_functions import Branin

from hf_ext.companion.bo import BayesianOptimization, BayesianOptimizationConfig
from hf_ext.executors import local_executor

objective = Branin(negate=True)  # maximised; the workers unpickle it, so it lives at module level
config = BayesianOptimizationConfig(model="gp", n_initial=4, q=2, num_restarts=2, raw_samples=32)

if __name__ == "__main__":  # where workers are spawned (macOS, Windows), they import this script
    executor = local_executor(2)  # 2 processes (a RestartingProcessPool); local_executor(1) is this process
    history = BayesianOptimization(objective, objective.bounds, config, executor=executor).run(8)
    executor.shutdown()
    best = max(history, key=lambda evaluation: evaluation.true)
    print(f"{len(history)} evaluations on 2 processes, q = 2 at a time; best {best.true:.3f} (optimum -0.398)")
