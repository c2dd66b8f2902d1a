"""Zeroth-order fine-tuning with AGZO: a `Trainer` that learns from forward passes only.

Fine-tunes all-MiniLM-L6-v2 with a fresh 4-class head on standard-library docstrings. AGZO
perturbs each linear layer only inside the span of its input activations; the MeZO baseline is
the same line with `zo_config=MeZOConfig()`. Runs in seconds on a CPU; for a real run raise
`max_steps` (the `agzo_finetune` recipe trains 400 steps).
"""

from transformers import TrainingArguments

from hf_ext.data import docstring_classification
from hf_ext.models import load_minilm
from hf_ext.zo import AGZOConfig, ZOTrainer

model, tokenizer = load_minilm(num_labels=4)
train = docstring_classification(num_classes=4)["train"].map(
    lambda rows: tokenizer(rows["text"], truncation=True, max_length=64), batched=True, remove_columns=["text"]
)

# ZO has no gradient to clip (max_grad_norm=0) and keeps its weight decay in the ZO config.
args = TrainingArguments(output_dir="outputs/zo", learning_rate=1e-2, max_grad_norm=0.0, max_steps=5, report_to="none")
trainer = ZOTrainer(
    model, args, train_dataset=train, processing_class=tokenizer, zo_config=AGZOConfig(rank=8, eps=1e-3)
)
result = trainer.train()
print(f"AGZO: {result.global_step} steps from forward passes only, mean training loss {result.training_loss:.3f}")
