"""What the bbob-noisy runs are judged by: paired wins/losses with a sign test and Wilcoxon's signed-rank test,
overall and by misranking slice and function group, and the ECDF of targets reached."""

import math
from collections import defaultdict

import numpy as np
from scipy.stats import binomtest, wilcoxon

# COCO's 51 targets on f - f_opt, 10^2 down to 10^-8, computed as cocopp computes them (its bbob testbeds'
# ``pprldmany_target_values``) so that each float is the same and a target is reached at the same evaluation
TARGETS = 10 ** np.arange(2, -8.2, -0.2)
# bbob-noisy's three groups, as COCO's documentation splits the suite
FUNCTION_GROUPS = {
    "moderate noise": range(101, 107),
    "severe noise": range(107, 122),
    "severe noise, multimodal": range(122, 131),
}


def _problem(record: dict) -> tuple[int, int, int, int]:
    """What pairs two methods' runs: the same (function, instance, dimension, seed); with several seeds pooled,
    each seed's run is its own pair."""
    return record["function"], record["instance"], record["dimension"], record["seed"]


def _finals(records: list[dict], method: str, budget_multiplier: int) -> dict[tuple[int, int, int, int], float]:
    return {
        _problem(r): r["final"]
        for r in records
        if r["method"] == method and r["budget_multiplier"] == budget_multiplier
    }


def paired_test(pairs: list[tuple[float, float]], tie: float = 1e-8) -> dict:
    """Over (ours, theirs) pairs of final best noise-free f - f_opt: wins (ours lower), losses, ties (equal, or
    both below ``tie``), the two-sided sign test's p-value on wins vs losses, and the two-sided p-value of
    Wilcoxon's signed-rank test on ``log10 max(f, tie)`` (which weighs how far apart the pair is; ties drop out)."""
    wins = losses = 0
    differences = []
    for ours, theirs in pairs:
        difference = math.log10(max(ours, tie)) - math.log10(max(theirs, tie))
        if ours == theirs or difference == 0:
            continue
        wins, losses = wins + (ours < theirs), losses + (ours > theirs)
        differences.append(difference)
    sign = binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
    signed_rank = wilcoxon(differences).pvalue if differences else 1.0
    return {
        "pairs": len(pairs),
        "wins": wins,
        "losses": losses,
        "ties": len(pairs) - wins - losses,
        "p_value": float(sign),
        "wilcoxon_p_value": float(signed_rank),
    }


def wins_losses(records: list[dict], method: str, baseline: str, budget_multiplier: int, tie: float = 1e-8) -> dict:
    """:func:`paired_test` of ``method`` against ``baseline`` over the (function, instance, dimension, seed) runs
    both made at ``budget_multiplier``."""
    ours, theirs = _finals(records, method, budget_multiplier), _finals(records, baseline, budget_multiplier)
    return paired_test([(ours[key], theirs[key]) for key in sorted(ours.keys() & theirs.keys())], tie)


def run_misranking(record: dict) -> float:
    """The mean pair misranking over a run's generations (NaN if none was measured)."""
    values = [value for value in record.get("misranking", []) if value is not None]
    return float(np.mean(values)) if values else float("nan")


def problem_misranking(records: list[dict], reference: str = "sep_cma") -> dict[tuple[int, ...], float]:
    """The misranking of each (function, instance, dimension, seed, budget multiplier): that of ``reference``'s run
    there, one measure for every method's run on the problem (a method's own misranking depends on where it went)."""
    return {(*_problem(r), r["budget_multiplier"]): run_misranking(r) for r in records if r["method"] == reference}


def slice_tests(
    records: list[dict], method: str, baseline: str, threshold: float, reference: str = "sep_cma"
) -> list[dict]:
    """:func:`paired_test` of ``method`` against ``baseline`` per budget, inside the high-misranking slice
    (problems whose ``reference`` misranking is at least ``threshold``) and outside it, for each function group
    and for all functions. A problem without a ``reference`` run, or whose run measured no misranking, is in
    neither slice (not silently in the low one)."""
    misranking = problem_misranking(records, reference)
    rows = []
    for k in sorted({r["budget_multiplier"] for r in records}):
        ours, theirs = _finals(records, method, k), _finals(records, baseline, k)
        for inside in (True, False):
            for group, functions in {"all": range(101, 131), **FUNCTION_GROUPS}.items():
                keys = [
                    key
                    for key in sorted(ours.keys() & theirs.keys())
                    if key[0] in functions
                    and not math.isnan(level := misranking.get((*key, k), math.nan))
                    and (level >= threshold) == inside
                ]
                rows.append(
                    {
                        "method": method,
                        "baseline": baseline,
                        "budget": f"{k}D",
                        "slice": f"misranking {'>=' if inside else '<'} {threshold}",
                        "group": group,
                    }
                    | paired_test([(ours[key], theirs[key]) for key in keys])
                )
    return rows


def win_rate_by_misranking(
    records: list[dict], method: str, baseline: str, budget_multiplier: int, edges, reference: str = "sep_cma"
) -> list[dict]:
    """Per misranking bin ``[edges[j], edges[j + 1])``: wins / (wins + losses) of ``method`` against ``baseline``
    and the number of pairs."""
    misranking = problem_misranking(records, reference)
    ours, theirs = _finals(records, method, budget_multiplier), _finals(records, baseline, budget_multiplier)
    bins = []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        keys = [
            key
            for key in ours.keys() & theirs.keys()
            if low <= misranking.get((*key, budget_multiplier), math.nan) < high
        ]
        test = paired_test([(ours[key], theirs[key]) for key in keys])
        decided = test["wins"] + test["losses"]
        rate = test["wins"] / decided if decided else math.nan
        bins.append({"low": low, "high": high, "pairs": test["pairs"], "win_rate": rate})
    return bins


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
