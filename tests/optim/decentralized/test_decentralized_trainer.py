from pathlib import Path

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import DecentralizedMetricsCallback, DecentralizedSGD, DecentralizedTrainer

SCRIPT = Path(__file__).with_name("_dsgd_trainer_run.py")


def _data():
    ids = torch.randint(0, 500, (16, 12), generator=torch.Generator().manual_seed(0)).tolist()
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def test_one_process_trains_logs_and_saves(training_args, tmp_path):
    model, _ = tiny_causal_lm(num_layers=2)
    optimizer = DecentralizedSGD(torch.optim.SGD(model.parameters(), lr=0.05), "exponential")
    batch = torch.tensor(_data()["input_ids"][:2])
    trainer = DecentralizedTrainer(
        model=model,
        args=training_args(max_steps=4, logging_steps=100),
        train_dataset=_data(),
        optimizers=(optimizer, None),
        callbacks=[DecentralizedMetricsCallback(every=2, loss_inputs={"input_ids": batch, "labels": batch})],
    )
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "dsgd/consensus_distance" in entry]
    assert [entry["step"] for entry in logged] == [2, 4]
    assert all(entry["dsgd/consensus_distance"] == 0.0 and entry["dsgd/spectral_gap"] == 1.0 for entry in logged)
    assert all(entry["dsgd/averaged_loss"] > 0 for entry in logged)
    trainer.save_model(str(tmp_path / "saved"))
    saved = load_file(tmp_path / "saved" / "model.safetensors")
    torch.testing.assert_close(saved["model.norm.weight"], model.model.norm.weight.detach())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every": 0}, "`every` must be an integer >= 1, got 0"),
        ({"every": float("nan")}, "`every` must be a finite number"),
        ({"loss_inputs": {"input_ids": torch.ones(1, 2)}}, "`loss_inputs` must hold `labels`"),
    ],
)
def test_callback_refuses_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DecentralizedMetricsCallback(**kwargs)


@pytest.mark.slow
def test_two_processes_keep_their_own_weights_and_save_the_average(tmp_path, torchrun_two_processes):
    torchrun_two_processes(SCRIPT)
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert rank0["num_processes"] == 2
    assert rank0["wrapped"] == "LlamaForCausalLM"  # not DistributedDataParallel: no gradient all-reduce
    differing = [n for n, p in rank0["params"].items() if not torch.equal(p, rank1["params"][n])]
    assert differing, "the ranks hold identical weights: something averaged them exactly"
    saved = load_file(tmp_path / "saved" / "model.safetensors")
    assert set(saved) <= set(rank0["params"]) and len(saved) >= len(rank0["params"]) - 1  # a tied head is not saved
    for name, tensor in saved.items():
        torch.testing.assert_close(tensor, (rank0["params"][name] + rank1["params"][name]) / 2, msg=name)
    for rank in (rank0, rank1):  # saving put each rank's own weights back
        assert all(torch.equal(rank["after_save"][n], p) for n, p in rank["params"].items())
    logged = [entry for entry in rank0["log_history"] if "dsgd/consensus_distance" in entry]
    assert [entry["step"] for entry in logged] == [2, 4]
    assert all(entry["dsgd/consensus_distance"] > 0 for entry in logged)
    assert logged[0]["dsgd/spectral_gap"] == pytest.approx(2 / 3)  # ring of 2: W = [[1/3, 2/3], [2/3, 1/3]]
    assert logged[0]["dsgd/bytes_sent_per_step"] == sum(p.numel() * 4 for p in rank0["params"].values())

    def dsgd_metrics(history):  # global quantities: the same on every rank (grad_norm, say, is local)
        return [
            {k: v for k, v in entry.items() if k.startswith("dsgd/")}
            for entry in history
            if "dsgd/spectral_gap" in entry
        ]

    assert dsgd_metrics(rank0["log_history"]) == dsgd_metrics(rank1["log_history"])
