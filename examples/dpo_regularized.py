"""Regularized DPO: TRL's DPO with a penalty that keeps each pair's total probability from collapsing.

Two lines of a TRL DPO script change: the config and the trainer. Trains SmolLM2-135M-Instruct
on offline arithmetic preference pairs for a few steps on a CPU; for a real run raise
`max_steps` and the number of pairs (the `dpo_regularized` recipe: 64 pairs, 60 steps).
"""

from hf_ext.alignment import RegularizedDPOConfig, RegularizedDPOTrainer
from hf_ext.data import preference_dataset
from hf_ext.models import load_smollm2

model, tokenizer = load_smollm2()
ref_model, _ = load_smollm2()
pairs = preference_dataset(4)  # prompt / chosen / rejected

args = RegularizedDPOConfig(
    output_dir="outputs/dpo",
    regularizer_coef=1.0,
    regularizer_form="one_sided",
    max_steps=2,
    per_device_train_batch_size=2,
    bf16=False,  # TRL defaults to bf16, which a CPU cannot train in; drop on a GPU
    activation_checkpointing=False,  # TRL's default recomputes activations: 3x slower on a CPU
    report_to="none",
)
trainer = RegularizedDPOTrainer(
    model=model, ref_model=ref_model, args=args, train_dataset=pairs, processing_class=tokenizer
)  # SimPO: RegularizedSimPOConfig / RegularizedSimPOTrainer, see simpo_regularized.py
result = trainer.train()
print(f"DPO + regularizer: {result.global_step} steps on {len(pairs)} pairs, mean loss {result.training_loss:.3f}")
