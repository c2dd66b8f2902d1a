"""A short GRPO run on a tiny model with the SGD preset, the sparsity callback and delta checkpoints."""

from trl import GRPOTrainer

from hf_ext.data import arithmetic_dataset
from hf_ext.models import tiny_causal_lm
from hf_ext.rl import SparseDeltaCallback, UpdateSparsityCallback, apply_sparse_delta, checked_reward
from hf_ext.rl.delta import DELTA_FILE
from hf_ext.rl.presets import sgd_grpo_config


def length_reward(completions, **kwargs):
    """Varies within each group, so that GRPO's advantages, and the gradient, are not zero."""
    return [float(len(c[0]["content"]) % 7) for c in completions]


def test_sgd_grpo_changes_some_entries_keeps_no_state_and_checkpoints_a_restorable_delta(tmp_path):
    model, tokenizer = tiny_causal_lm(seed=0)
    sparsity, delta = UpdateSparsityCallback(), SparseDeltaCallback()
    args = sgd_grpo_config(
        output_dir=str(tmp_path),
        max_steps=2,
        max_completion_length=8,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="steps",
        save_steps=2,
        use_cpu=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=checked_reward(length_reward),
        args=args,
        train_dataset=arithmetic_dataset(8),
        processing_class=tokenizer,
        callbacks=[sparsity, delta],
    )
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 2 and all("sparsity/changed_entry_fraction" in entry for entry in logged)
    assert 0 < logged[-1]["sparsity/changed_entry_fraction"] <= 1
    assert logged[-1]["sparsity/optimizer_state_bytes"] == 0
    restored = apply_sparse_delta(tiny_causal_lm(seed=0)[0], tmp_path / "checkpoint-2" / DELTA_FILE)
    for name, tensor in trainer.model.state_dict().items():
        assert tensor.equal(restored.state_dict()[name]), name
