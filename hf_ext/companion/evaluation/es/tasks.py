"""Two noisy objectives outside COCO: a scikit-learn hyperparameter search (the noise is the random validation
split) and a linear policy on a cart-pole with random starts and force noise (numpy, no gym).

Each task is ``task(x) -> float`` to minimise over the box ``[-5, 5]^dimension``, noisy through its own seeded
generator; ``task.expected(x, repeats)`` averages fresh evaluations (from another generator) to judge a result.
"""

import numpy as np

from .harness import solve


class CVHyperparameters:
    """Validation error of scikit-learn's ``SGDClassifier`` (elastic net, log loss) on the bundled breast-cancer
    data, on a fresh random 70/30 split per evaluation. x = (log10 alpha + 3, log10 eta0 + 2, logit l1_ratio)."""

    dimension = 3

    def __init__(self, seed: int = 0):
        from sklearn.datasets import load_breast_cancer
        from sklearn.preprocessing import StandardScaler

        features, self.labels = load_breast_cancer(return_X_y=True)
        self.features = StandardScaler().fit_transform(features)
        self.rng = np.random.default_rng(seed)

    def _error(self, x: np.ndarray, rng: np.random.Generator) -> float:
        from sklearn.linear_model import SGDClassifier

        order = rng.permutation(len(self.labels))
        train, test = order[: int(0.7 * len(order))], order[int(0.7 * len(order)) :]
        model = SGDClassifier(
            loss="log_loss",
            penalty="elasticnet",
            alpha=10.0 ** (x[0] - 3),
            learning_rate="constant",
            eta0=10.0 ** (x[1] - 2),
            l1_ratio=1 / (1 + np.exp(-x[2])),
            max_iter=5,
            tol=None,
            random_state=int(rng.integers(2**31)),
        )
        model.fit(self.features[train], self.labels[train])
        return float(1 - model.score(self.features[test], self.labels[test]))

    def __call__(self, x) -> float:
        return self._error(np.asarray(x, dtype=float), self.rng)

    def expected(self, x, repeats: int = 50, seed: int = 12345) -> float:
        rng = np.random.default_rng(seed)
        return float(np.mean([self._error(np.asarray(x, dtype=float), rng) for _ in range(repeats)]))


class NoisyCartPole:
    """Minus the steps (of 200) a linear policy ``force = 10 tanh(w . state + b)`` keeps a cart-pole up, from a
    random start with Gaussian force noise. x = (w, b), 5 numbers. The classic dynamics (Barto et al. 1983)."""

    dimension = 5
    steps = 200

    def __init__(self, seed: int = 0, force_noise: float = 3.0):
        self.rng = np.random.default_rng(seed)
        self.force_noise = force_noise

    def _episode(self, x: np.ndarray, rng: np.random.Generator) -> float:
        gravity, cart, pole, half_length, dt = 9.8, 1.0, 0.1, 0.5, 0.02
        position, velocity, angle, spin = rng.uniform(-0.1, 0.1, 4)
        for step in range(self.steps):
            state = np.array([position, velocity, angle, spin])
            force = 10 * np.tanh(x[:4] @ state + x[4]) + self.force_noise * rng.standard_normal()
            cos, sin = np.cos(angle), np.sin(angle)
            temp = (force + pole * half_length * spin**2 * sin) / (cart + pole)
            spin_acc = (gravity * sin - cos * temp) / (half_length * (4 / 3 - pole * cos**2 / (cart + pole)))
            acc = temp - pole * half_length * spin_acc * cos / (cart + pole)
            position, velocity = position + dt * velocity, velocity + dt * acc
            angle, spin = angle + dt * spin, spin + dt * spin_acc
            if abs(position) > 2.4 or abs(angle) > 0.21:
                return -float(step)
        return -float(self.steps)

    def __call__(self, x) -> float:
        return self._episode(np.asarray(x, dtype=float), self.rng)

    def expected(self, x, repeats: int = 50, seed: int = 12345) -> float:
        rng = np.random.default_rng(seed)
        return float(np.mean([self._episode(np.asarray(x, dtype=float), rng) for _ in range(repeats)]))


TASKS = {"cv_hyperparameters": CVHyperparameters, "cartpole": NoisyCartPole}


def run_task(name: str, method: str, budget_multiplier: int, seed: int, repeats: int) -> dict:
    """One ``method`` run on task ``name`` for ``budget_multiplier`` x dimension evaluations, from a random start of
    ``seed`` (the same for every method); judged by ``expected`` (``repeats`` fresh evaluations) at its
    ``xfavorite``, the distribution mean, and, for comparison, at its ``xbest`` (``expected_xbest``)."""
    task = TASKS[name](seed)
    x0 = np.random.default_rng(seed).uniform(-4, 4, task.dimension)
    result = solve(method, task, x0, budget_multiplier * task.dimension, -5.0, 5.0, seed)
    return {
        "task": name,
        "method": method,
        "budget_multiplier": budget_multiplier,
        "seed": seed,
        "evaluations": result.evaluations,
        "expected": task.expected(result.xfavorite, repeats),
        "expected_xbest": task.expected(result.xbest, repeats),
    }
