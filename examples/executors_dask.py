"""The BO loop's evaluations on a Dask cluster: ``client.get_executor()`` is a ``concurrent.futures.Executor``.

Asynchronous batch BO: two evaluations run at all times, and each one that finishes gets a new point proposed with
the other still running. A ``LocalCluster`` here; ``Client("tcp://scheduler:8786")`` reaches a real one. Needs the
``[cluster]`` extra (``distributed``).
"""

from botorch.test_functions import Branin
from distributed import Client, LocalCluster

from hf_ext.companion.bo import BayesianOptimization, BayesianOptimizationConfig

objective = Branin(negate=True)
config = BayesianOptimizationConfig(model="gp", n_initial=4, q=2, asynchronous=True, num_restarts=2, raw_samples=32)

if __name__ == "__main__":  # Dask spawns its workers, which import this script
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        executor = client.get_executor()
        history = BayesianOptimization(objective, objective.bounds, config, executor=executor).run(8)
    best = max(history, key=lambda evaluation: evaluation.true)
    print(f"{len(history)} evaluations on 2 Dask workers, 2 in flight; best {best.true:.3f} (optimum -0.398)")
