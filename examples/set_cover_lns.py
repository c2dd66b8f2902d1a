"""Weighted set cover: greedy, then LNS repaired by HiGHS (row-based and GLNS's generative neighbourhoods), scored
against HiGHS's bound (seconds, CPU)."""

from hf_ext.companion.combinatorial.set_cover import (
    DenoiserTrainingConfig,
    GenerativeNeighbourhood,
    LNSConfig,
    beasley,
    greedy,
    load_denoiser,
    run_lns,
    save_denoiser,
    solve_mip,
    train_denoiser,
)
from hf_ext.companion.evaluation.combinatorial.set_cover import primal_gap, primal_integral

instance = beasley(n_rows=400, n_columns=8000, density=0.0125, cost_range=(1, 100), seed=0)  # ~5 rows per column
start = greedy(instance)  # cost per newly covered row (Chvatal's rule in numpy rounds), then redundancy removal
print(f"greedy: {instance.objective(start):.0f} with {start.sum()} columns")

config = LNSConfig(policy="local", neighbourhood_size=800, time_limit=5.0, sub_time_limit=0.5, seed=0)
result = run_lns(instance, config, initial=start)  # free a connected neighbourhood, fix the rest, HiGHS repairs
assert instance.is_feasible(result.selected)

# GLNS: a tiny denoiser for the example (seconds); `default_denoiser()` or `hf-ext run set_cover_denoiser` train
# the shipped one (60 subproblems x 30 epochs, about two minutes)
training = DenoiserTrainingConfig(examples=4, epochs=5, region_size=100, instance_columns=1000)
save_denoiser(train_denoiser(training), "set_cover_denoiser_tiny", training)  # config.json + model.safetensors
glns = GenerativeNeighbourhood(load_denoiser("set_cover_denoiser_tiny"), seed=0)
generative = run_lns(instance, config, initial=start, neighbourhood=glns)  # grows from the most unstable column
print(f"GLNS: {generative.objective:.0f} after {generative.iterations} subproblems")

bound = solve_mip(instance.costs, instance.matrix, time_limit=5.0, warm_start=result.selected).bound
print(f"LNS: {result.objective:.0f} after {result.iterations} subproblems; HiGHS's lower bound {bound:.1f}")
print(
    f"primal gap to the bound {primal_gap(result.objective, bound):.3f}, "
    f"primal integral over 5 s {primal_integral(result.times, result.values, bound, 5.0):.3f}"
)
