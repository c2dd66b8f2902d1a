"""Decentralized SGD in the Trainer: each process keeps its own model and gossips with its ring neighbours.

Run it on 4 CPU processes with `torchrun --nproc_per_node=4 examples/dsgd.py` (or `accelerate launch`
with a multi-process config); `python examples/dsgd.py` runs one worker, where gossip does nothing.
`DecentralizedTrainer` keeps the model out of DDP (whose all-reduce would undo the point) and saves
the average of the workers' models. Pretrains a small Llama on standard-library source for a few steps.
"""

import torch
from transformers import TrainingArguments

from hf_ext.data import stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.optim import DecentralizedMetricsCallback, DecentralizedSGD, DecentralizedTrainer

tokenizer = stdlib_bpe_tokenizer(1024)
model = llama_from_scratch(tokenizer, hidden_size=64, num_layers=2)
corpus = stdlib_corpus(tokenizer, block_size=64, max_files=8)
args = TrainingArguments(
    output_dir="outputs/dsgd_example",
    max_steps=6,
    per_device_train_batch_size=4,
    logging_steps=3,
    report_to="none",
    use_cpu=True,  # on CPU: without it transformers does not join torchrun's processes into one gloo group
)
held_out = corpus["validation"][:8]
loss_inputs = {key: torch.tensor(held_out[key]) for key in ("input_ids", "attention_mask", "labels")}

optimizer = DecentralizedSGD(torch.optim.SGD(model.parameters(), lr=0.5), topology="ring", order="atc")
trainer = DecentralizedTrainer(
    model=model,
    args=args,
    train_dataset=corpus["train"],
    optimizers=(optimizer, None),
    callbacks=[DecentralizedMetricsCallback(every=3, loss_inputs=loss_inputs)],
)
trainer.train()
trainer.save_model()  # on every process: writes the average of the workers' models
last = [entry for entry in trainer.state.log_history if "dsgd/averaged_loss" in entry][-1]
if trainer.is_world_process_zero():
    print(
        f"{trainer.accelerator.num_processes} worker(s), ring: consensus distance "
        f"{last['dsgd/consensus_distance']:.2e}, loss of the averaged model {last['dsgd/averaged_loss']:.3f}"
    )
