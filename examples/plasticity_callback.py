"""Plasticity measurements while training: linear probes, attention statistics, train/validation gap.

`PlasticityCallback` measures, every `every` steps, how plastic a model still is: per-layer
linear-probe accuracy on labelled probe texts, attention entropy and `W_Q W_K^T` norms, the
validation-minus-train loss and weight statistics. Pretrains a small Llama from scratch on
standard-library source for a few steps; for a real run raise `max_steps` and `every` (the
`wd_plasticity` recipe: 1000 steps, every 200).
"""

from transformers import Trainer, TrainingArguments

from hf_ext.data import docstring_classification, stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.plasticity import PlasticityCallback

tokenizer = stdlib_bpe_tokenizer(2048)
model = llama_from_scratch(tokenizer, hidden_size=64, num_layers=2)
corpus = stdlib_corpus(tokenizer, block_size=64, max_files=12)
train_sample, val_sample = corpus["train"].select(range(8)), corpus["validation"].select(range(8))
probe_set = (  # `input_ids` and a `label`: docstrings of two standard-library packages
    docstring_classification(num_classes=2)["train"]
    .select(range(64))
    .map(lambda rows: tokenizer(rows["text"], truncation=True, max_length=32, padding="max_length"), batched=True)
)
args = TrainingArguments(output_dir="outputs/plasticity", max_steps=4, per_device_train_batch_size=4, report_to="none")
trainer = Trainer(model=model, args=args, train_dataset=corpus["train"])

callback = PlasticityCallback(
    probe_set, every=2, loss_datasets=(train_sample, val_sample), output_file="outputs/plasticity/plasticity.json"
)
callback.attach(trainer)  # first in the list, so TensorBoard / report_to integrations see its metrics
trainer.train()
last = callback.history[-1]
print(
    f"step {last['step']}: probe accuracy of the last layer {last['plasticity/probe_accuracy/layer_1']:.2f}, "
    f"val - train loss {last['plasticity/loss_gap']:.3f}; history in {callback.output_file}"
)
