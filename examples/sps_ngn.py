"""SPS and NGN: step sizes computed from the loss, in the stock Trainer and in a plain PyTorch loop.

Both optimizers need the loss at `step()`. The Trainer steps without a closure, so
`LossToOptimizerTrainer` (the stock `Trainer` plus `LossToOptimizerMixin`) hands them the
step's loss, summed over gradient-accumulation micro-batches and averaged over processes.
A plain loop passes a closure. Pretrains a small Llama on standard-library source for a few steps.
"""

import torch
from transformers import TrainingArguments

from hf_ext.data import stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.optim import NGN, SPS, LossToOptimizerTrainer

tokenizer = stdlib_bpe_tokenizer(512)
data = stdlib_corpus(tokenizer, block_size=64, max_files=8)["train"]
args = TrainingArguments(
    output_dir="outputs/sps_ngn",
    max_steps=5,
    per_device_train_batch_size=4,
    gradient_accumulation_steps=2,
    max_grad_norm=0.0,
    logging_steps=1,
    report_to="none",
)

model = llama_from_scratch(tokenizer, hidden_size=32, num_layers=2)
optimizer = NGN(model.parameters(), lr=1.0, momentum=0.9)  # NGN-M; lr is sigma
trainer = LossToOptimizerTrainer(model=model, args=args, train_dataset=data, optimizers=(optimizer, None))
trainer.train()
print(f"NGN-M: loss {trainer.state.log_history[-2]['loss']:.3f}, step size {optimizer.step_sizes()[0]:.3f}")

model = llama_from_scratch(tokenizer, hidden_size=32, num_layers=2)
trainer = LossToOptimizerTrainer(
    model=model, args=args, train_dataset=data, optimizer_cls_and_kwargs=(SPS, {"lr": 10.0, "c": 0.5})
)
trainer.train()
print(f"SPS_max: step sizes {[entry['step_size'] for entry in trainer.state.log_history if 'step_size' in entry]}")

# A plain loop: the closure returns the loss, as for torch.optim.LBFGS.
model = llama_from_scratch(tokenizer, hidden_size=32, num_layers=2)
optimizer = SPS(model.parameters(), lr=10.0)
batch = torch.tensor(data[:8]["input_ids"])
for _ in range(3):

    def closure():
        optimizer.zero_grad()
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        return loss

    loss = optimizer.step(closure)
    print(f"plain loop: loss {loss.item():.3f}, SPS step size {optimizer.step_sizes()[0]:.3f}")
