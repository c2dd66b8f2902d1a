"""Regularized SimPO: TRL's CPO trainer as SimPO, with the same total-probability regularizer as DPO.

SimPO has no reference model: each pair's anchor is the policy's own `log P` before training,
computed once when the trainer is built. Trains SmolLM2-135M-Instruct for a few steps on a
CPU; for a real run raise `max_steps` and the number of pairs (`hf-ext run dpo_regularized
--config simpo_regularized`: 64 pairs, 60 steps, beta 2, gamma 0.5).
"""

from hf_ext.alignment import RegularizedSimPOConfig, RegularizedSimPOTrainer
from hf_ext.data import preference_dataset
from hf_ext.models import load_smollm2

model, tokenizer = load_smollm2()
pairs = preference_dataset(4)

args = RegularizedSimPOConfig(
    output_dir="outputs/simpo",
    regularizer_coef=1.0,
    beta=2.0,
    simpo_gamma=0.5,
    max_steps=2,
    per_device_train_batch_size=2,
    bf16=False,  # TRL defaults to bf16, which a CPU cannot train in; drop on a GPU
    activation_checkpointing=False,  # TRL's default recomputes activations: 3x slower on a CPU
    report_to="none",
)
trainer = RegularizedSimPOTrainer(model=model, args=args, train_dataset=pairs, processing_class=tokenizer)
result = trainer.train()
print(f"SimPO + regularizer: {result.global_step} steps on {len(pairs)} pairs, mean loss {result.training_loss:.3f}")
