"""SGD for RL from verifiable rewards: TRL's GRPO with plain SGD, no optimizer state at all.

`sgd_grpo_config()` is a `trl.GRPOConfig` preset (plain SGD, lr 3e-2; `adamw_grpo_config()` is
the baseline). `UpdateSparsityCallback` logs how many weights changed; add `SparseDeltaCallback()`
to store only the changed entries in each checkpoint. Trains SmolLM2-135M-Instruct on arithmetic
for one step on a CPU; for a real run raise `max_steps` (the `grpo_sgd` recipe trains 80).
"""

from trl import GRPOTrainer

from hf_ext.data import arithmetic_dataset, arithmetic_reward
from hf_ext.models import load_smollm2
from hf_ext.rl import UpdateSparsityCallback, checked_reward, sgd_grpo_config

model, tokenizer = load_smollm2()
prompts = arithmetic_dataset(16)  # conversational prompts + the `answer` column the reward reads

args = sgd_grpo_config(output_dir="outputs/grpo", max_steps=1)  # bf16 only on a GPU
sparsity = UpdateSparsityCallback()
trainer = GRPOTrainer(
    model=model,
    reward_funcs=checked_reward(arithmetic_reward),
    args=args,
    train_dataset=prompts,
    processing_class=tokenizer,  # without it TRL tries to fetch a tokenizer from the Hub
    callbacks=[sparsity],
)
trainer.train()
measured = sparsity.measure(trainer.model, trainer.optimizer)
print(
    f"GRPO + SGD: {measured['sparsity/changed_entry_fraction']:.2%} of the weights changed in one step "
    f"(none if every group's completions got equal rewards), optimizer state "
    f"{measured['sparsity/optimizer_state_bytes']} bytes"
)
