"""RB-PEM against the hard rank weights where its replicate model holds: a sphere with additive Gaussian noise.

The control in docs/pem.md ("D = 10, 20 and 40"): at D = 40 with popsize 80 the two end level within the spread
of 3 seeds; on bbob-noisy, whose severe noise is multiplicative and heavy-tailed, RB-PEM loses to them.
"""

import numpy as np

from hf_ext.companion.es import ESConfig, SepCMAES

for weights in ("log", "rb_pem"):
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        config = ESConfig(weights=weights, popsize=80, max_evaluations=4000, seed=seed, restarts="none")
        es = SepCMAES(np.full(40, 3.0), config)
        while not es.stop():
            X = es.ask()
            es.tell(X, [float(x @ x) + 10 * rng.standard_normal() for x in X])
        print(weights, seed, float(es.result.xfavorite @ es.result.xfavorite))
