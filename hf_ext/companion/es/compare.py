"""What the bbob-noisy runs are judged by: wins/losses with a sign test, and the ECDF of targets reached."""

from collections import defaultdict

import numpy as np
from scipy.stats import binomtest

# COCO's 51 targets on f - f_opt, 10^2 down to 10^-8, computed as cocopp computes them (its bbob testbeds'
# ``pprldmany_target_values``) so that each float is the same and a target is reached at the same evaluation
TARGETS = 10 ** np.arange(2, -8.2, -0.2)


def _finals(records: list[dict], method: str, budget_multiplier: int) -> dict[tuple[int, int], float]:
    return {
        (r["function"], r["instance"]): r["final"]
        for r in records
        if r["method"] == method and r["budget_multiplier"] == budget_multiplier
    }


def wins_losses(records: list[dict], method: str, baseline: str, budget_multiplier: int, tie: float = 1e-8) -> dict:
    """Over the (function, instance) pairs both ran: wins of ``method`` (a lower final best noise-free f - f_opt),
    losses, ties (equal, or both below ``tie``), and the two-sided sign-test p-value on wins vs losses."""
    ours, theirs = _finals(records, method, budget_multiplier), _finals(records, baseline, budget_multiplier)
    wins = losses = ties = 0
    for pair in ours.keys() & theirs.keys():
        a, b = ours[pair], theirs[pair]
        if a == b or (a < tie and b < tie):
            ties += 1
        elif a < b:
            wins += 1
        else:
            losses += 1
    p = binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
    return {"wins": wins, "losses": losses, "ties": ties, "p_value": float(p)}


def ecdf(records: list[dict], grid: np.ndarray, targets: np.ndarray = TARGETS) -> dict[tuple[str, int], np.ndarray]:
    """For each (method, budget multiplier): the fraction of (run, target) pairs reached within ``grid[j]``
    evaluations, from each run's trajectory of the best noise-free f - f_opt."""
    reached = defaultdict(list)
    for r in records:
        evaluations = np.array([e for e, _ in r["trajectory"]])
        best = np.minimum.accumulate(np.array([f for _, f in r["trajectory"]]))
        first = np.array([evaluations[np.argmax(best <= t)] if (best <= t).any() else np.inf for t in targets])
        reached[r["method"], r["budget_multiplier"]].append(first[None, :] <= grid[:, None])
    return {key: np.concatenate(runs, axis=1).mean(axis=1) for key, runs in reached.items()}
