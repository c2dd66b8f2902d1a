"""Scion with a growing batch size and sequence length: pretrain a small Llama through the stock Trainer.

`Scion` steps each layer to the linear minimization oracle of its own norm ball (spectral for hidden
matrices, sign for the head, column norms for embeddings, RMS for gains). `BatchScheduleCallback`
grows the tokens per step as T^(2/3) and shrinks the step size as T^(-1/3) over token-budget stages;
`PackedStream` packs the token stream to each stage's sequence length, to the token. For the
constants behind the rule, see `measure_constants` and `critical_batch_size` in docs/scion.md.
"""

import torch
from transformers import Trainer, TrainingArguments

from hf_ext.data import PackedStream, PackedStreamCollator, stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.optim import BatchScheduleCallback, Scion

tokenizer = stdlib_bpe_tokenizer(2048)
model = llama_from_scratch(tokenizer, hidden_size=64, num_layers=2, max_positions=128)
tokens = torch.tensor(stdlib_corpus(tokenizer, block_size=64, max_files=8)["train"]["input_ids"]).flatten()

# Budgets of 2k, 8k and 32k tokens: 4 x 32 tokens per step, then 5 x 64 at 0.63x and 8 x 96 at 0.40x the lr.
callback = BatchScheduleCallback(budgets=[2048, 8192, 32768], batch_size=4, seq_len=32, max_seq_len=128)
args = TrainingArguments(
    output_dir="outputs/scion_schedule",
    max_steps=callback.schedule.total_steps,
    per_device_train_batch_size=1,  # one item of the PackedStream is one micro-batch of the schedule
    train_sampling_strategy="sequential",
    learning_rate=0.02,
    lr_scheduler_type="constant",
    report_to="none",
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=PackedStream(tokens, callback.schedule),
    data_collator=PackedStreamCollator(),
    callbacks=[callback],
    optimizers=(Scion(model, lr=0.02), None),
)
result = trainer.train()
print(f"{callback.schedule}\nScion: {result.global_step} steps, training loss {result.training_loss:.3f}")
