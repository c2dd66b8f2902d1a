import pytest


@pytest.fixture
def trl_args(tmp_path):
    """Keyword arguments for a TRL config that runs a tiny model fast on the CPU."""
    return dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        max_steps=1,
        report_to="none",
        bf16=False,
        activation_checkpointing=False,
        use_cpu=True,
        save_strategy="no",
        dataloader_pin_memory=False,
    )
