"""RB-PEM's ask/tell loop on a noisy sphere, then bbob-noisy runs written as COCO result folders (seconds, CPU)."""

import numpy as np

from hf_ext.companion.es import ESConfig, SepCMAES
from hf_ext.companion.evaluation.es import CocoConfig, run_coco

rng = np.random.default_rng(0)


def noisy_sphere(x):
    return float(x @ x) * np.exp(0.5 * rng.standard_normal())  # multiplicative noise, like bbob-noisy's f101


# popsize 20 > D + 1: the fit on [1, x] that RB-PEM's replicates keep needs residual freedom (at the default
# popsize 10 for D = 10 it has none, and the weights are the hard ones)
config = ESConfig(weights="rb_pem", popsize=20, max_evaluations=3000, lower=-5, upper=5)
es = SepCMAES(np.full(10, 3.0), config)
while not es.stop():
    X = es.ask()  # a new population, or re-evaluations of the candidates at the elite boundary
    es.tell(X, [noisy_sphere(x) for x in X])
result = es.result  # pycma's names: xfavorite (the mean), xbest (the best point evaluated), ...
mean = result.xfavorite
print(f"RB-PEM: {result.evaluations} evaluations, {result.iterations} generations, |mean|^2 = {mean @ mean:.2e}")

config = CocoConfig(
    methods=["rb_pem", "sep_cma"],
    functions=[101, 107],
    instances=[1],
    dimension=5,
    budget_multipliers=[100],
    result_folder="outputs/pem_example/coco",  # exdata/<method>_<k>D/ for cocopp; index.jsonl for resuming
    workers=1,
)
for run in run_coco(config):
    print(f"{run['method']} f{run['function']}: best noise-free f - f_opt = {run['final']:.3g}")
