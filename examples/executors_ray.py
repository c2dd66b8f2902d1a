"""An ES population evaluated on Ray: :class:`~hf_ext.executors.RayExecutor` makes each evaluation a Ray task.

``minimize`` sends a generation's candidates all at once. A local Ray instance of 2 CPUs here;
``ray.init(address="auto")`` joins a running cluster. Ray pickles the function by value, so one defined in a script
travels too. Needs the ``[cluster]`` extra (``ray``).
"""

import numpy as np
import ray

from hf_ext.companion.es import ESConfig, minimize
from hf_ext.executors import RayExecutor


def noisy_sphere(x: np.ndarray) -> float:
    return float(x @ x) + 0.1 * np.random.default_rng().standard_normal()


ray.init(num_cpus=2, include_dashboard=False)  # or ray.init(address="auto") on a cluster
executor = RayExecutor(num_cpus=1)  # what each call reserves; other .options() too: resources=, runtime_env=
result = minimize(noisy_sphere, np.full(4, 2.0), ESConfig(popsize=8, max_evaluations=80), executor=executor)
ray.shutdown()
print(f"{result.evaluations} evaluations as Ray tasks; best value {result.fbest:.3f} (sphere from 16, noise 0.1)")
