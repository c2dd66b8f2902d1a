"""LILO: language-in-the-loop BO vs preferential BO, BO on the true utility, an LLM-only optimizer and random search.

    hf-ext run lilo                                              # shipped config (SmolLM2-135M, local)
    hf-ext run lilo backend=http base_url=http://127.0.0.1:8000/v1 environments=dtlz2
    hf-ext run lilo --config lilo_quick                          # one seed, one round: the end-to-end check

Runs every environment x method x seed: an initial Sobol design, then ``rounds`` rounds of
feedback and ``batch_size`` new points each, the simulated decision maker answering in words and
the language model (``backend``: ``local`` transformers or an OpenAI-compatible ``http`` server)
turning the answers into labels. Each run's transcript (every LLM call, answer, label and
evaluation) goes to ``transcripts/<environment>/<method>/seed_<s>.jsonl`` as it is made; a rerun
takes the LLM's answers from it instead of asking again, and refuses other settings. Writes
``results.json`` (per environment and method: the gap of the best point's true utility to the
best known, mean and std over seeds, per round; the LLM's label accuracy against the hidden
utility; LLM calls) and ``utility_gap.png`` to ``output_dir``.

The runs go ``workers`` at a time to local processes (each loads the local LLM once), or to any
``concurrent.futures.Executor`` passed to ``main(argv, executor=...)`` (Dask, Ray: docs/cluster.md).
Launched on several processes, the main one runs them and the others wait.
"""

import statistics
import time
from collections import defaultdict
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.companion.bo.lilo import (
    ENVIRONMENTS,
    LILO,
    METHODS,
    LILOConfig,
    OpenAIBackend,
    TransformersBackend,
    make_environment,
)
from hf_ext.recipes._jobs import check_workers, on_main_process, run_all, workers_field
from hf_ext.recipes._plotting import plot_bands
from hf_ext.recipes._results import write_results
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser, shared_settings

BACKENDS = ("local", "http")


@dataclass
class LILOArguments:
    environments: list[str] = field(
        default_factory=lambda: ["dtlz2", "vehicle_safety"], metadata={"help": f"Any of {list(ENVIRONMENTS)}."}
    )
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={"help": f"Any of {list(METHODS)}."})
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "One run per seed and setting."})
    backend: str = field(
        default="local",
        metadata={
            "help": f"One of {list(BACKENDS)}. local: the transformers model `model` (a name from hf_ext.models, "
            "'smollm2' or 'tiny', or a checkpoint path) with `max_new_tokens` and `temperature`; http: the "
            "OpenAI-compatible server at `base_url` (OpenAIBackend's settings)."
        },
    )
    workers: int = workers_field()
    output_dir: str = field(default="outputs/lilo", metadata={"help": "Where results, plot and transcripts go."})

    def __post_init__(self):
        check_finite_fields(self)
        check_workers("LILOArguments", self.workers)
        for name, chosen, allowed in (
            ("environments", self.environments, ENVIRONMENTS),
            ("methods", self.methods, METHODS),
        ):
            unknown = [value for value in chosen if value not in allowed]
            if unknown or not chosen:
                raise ValueError(f"LILOArguments: `{name}` must be a non-empty list from {list(allowed)}, got {chosen}")
        if self.backend not in BACKENDS:
            raise ValueError(f"LILOArguments: `backend` must be one of {list(BACKENDS)}, got {self.backend!r}")
        if not self.seeds:
            raise ValueError("LILOArguments: `seeds` must not be empty")


def make_backend(args: LILOArguments, server: OpenAIBackend) -> OpenAIBackend | TransformersBackend:
    """The backend ``args.backend`` names: ``server`` itself (http), or a local model with its sampling settings."""
    if args.backend == "local":
        return TransformersBackend(server.model, server.max_new_tokens, server.temperature)
    return server


@dataclass
class LILORecipeConfig(LILOConfig):
    """LILO's settings shared by every run; each run's seed is one of LILOArguments' ``seeds``."""

    seed: int = set_per_run(LILOConfig, "seed", by="LILOArguments' `seeds`")


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(LILOArguments, LILORecipeConfig, OpenAIBackend)


def run_one(args: LILOArguments, config: LILORecipeConfig, backend, environment: str, method: str, seed: int) -> dict:
    """One run (resumed from its transcript): per-round true-utility gap, label counts, LLM calls, seconds."""
    env = make_environment(environment)
    transcript = Path(args.output_dir) / "transcripts" / environment / method / f"seed_{seed}.jsonl"
    start = time.perf_counter()
    loop = LILO(env, backend, run_config(LILOConfig, config, seed=seed), method, transcript_file=transcript)
    results = loop.run()
    return {
        "environment": environment,
        "method": method,
        "seed": seed,
        "gap": [env.best_utility - r.best_utility for r in results],
        "labels": results[-1].labels,
        "correct_labels": results[-1].correct_labels,
        "llm_calls": loop.transcript.llm_calls,
        "seconds": time.perf_counter() - start,
    }


def summarize(runs: list[dict]) -> dict:
    """Per environment and method: final gap (mean, std over seeds), gap per round, label accuracy, LLM calls."""
    grouped = defaultdict(list)
    for run in runs:
        grouped[run["environment"], run["method"]].append(run)
    summary = {}
    for (environment, method), group in grouped.items():
        final = [run["gap"][-1] for run in group]
        labels = sum(run["labels"] for run in group)
        summary[f"{environment}/{method}"] = {
            "final_gap": statistics.fmean(final),
            "final_gap_std": statistics.stdev(final) if len(final) > 1 else 0.0,
            "gap_per_round": [statistics.fmean(r) for r in zip(*(run["gap"] for run in group), strict=True)],
            "label_accuracy": sum(run["correct_labels"] for run in group) / labels if labels else None,
            "labels": labels,
            "llm_calls": sum(run["llm_calls"] for run in group),
            "seconds": sum(run["seconds"] for run in group),
        }
    return summary


@on_main_process
def main(argv: list[str] | None = None, executor: Executor | None = None) -> dict:
    """The recipe; its runs go to ``executor`` when given (a Dask or Ray executor), else as ``workers`` says."""
    args, config, server = parser(argv).parse_args_and_config(argv)
    backend = make_backend(args, server)
    jobs = [(args, config, backend, e, m, s) for e in args.environments for m in args.methods for s in args.seeds]
    runs = run_all(run_one, jobs, args.workers, "lilo", executor)
    results = {"summary": summarize(runs), "runs": runs, "args": asdict(args), "config": shared_settings(config)}
    results["backend"] = asdict(backend)
    out = Path(args.output_dir)
    write_results(out, results)
    panels = {
        environment: {
            m: [r["gap"] for r in runs if r["environment"] == environment and r["method"] == m] for m in args.methods
        }
        for environment in args.environments
    }
    title = "Gap to the best true utility (mean +- std over seeds; round 1 = initial design)"
    plot_bands(panels, out / "utility_gap.png", title, "round", "utility gap", ncols=len(panels))
    for key, entry in results["summary"].items():
        accuracy = "-" if entry["label_accuracy"] is None else f"{entry['label_accuracy']:.2f}"
        print(
            f"{key}: final gap {entry['final_gap']:.3f} +- {entry['final_gap_std']:.3f}, label accuracy "
            f"{accuracy} ({entry['labels']} labels), {entry['llm_calls']} LLM calls"
        )
    return results


if __name__ == "__main__":
    run_as_script(main)
