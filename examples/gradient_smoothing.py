"""Gradient smoothing across depth: any optimizer, each block's update averaged with its neighbours'.

`GradientSmoothing` wraps a base optimizer and replaces each repeated block's update by a
weighted average of the updates of the same parameter in the neighbouring blocks. It is a
`torch.optim.Optimizer`, so the stock `Trainer` takes it through `optimizers=`. Pretrains a
small Llama from scratch on standard-library source for a few steps; for a real run raise
`max_steps` (`benchmarks/gradient_smoothing.py`: 8 layers, 200 steps).
"""

import torch
from transformers import Trainer, TrainingArguments

from hf_ext.data import stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.optim import GradientSmoothing

tokenizer = stdlib_bpe_tokenizer(2048)
model = llama_from_scratch(tokenizer, hidden_size=64, num_layers=4)
data = stdlib_corpus(tokenizer, block_size=64, max_files=8)["train"]
args = TrainingArguments(output_dir="outputs/smoothing", max_steps=5, per_device_train_batch_size=4, report_to="none")

optimizer = GradientSmoothing(torch.optim.AdamW(model.parameters(), lr=1e-3), model, window=3)
trainer = Trainer(model=model, args=args, train_dataset=data, optimizers=(optimizer, None))
result = trainer.train()
print(f"AdamW + gradient smoothing (window 3): {result.global_step} steps, training loss {result.training_loss:.3f}")
