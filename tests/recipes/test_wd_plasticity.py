import dataclasses
import json

import pytest
from transformers import LlamaConfig, LlamaForCausalLM, Trainer

from hf_ext.data import stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.plasticity import plasticity_report
from hf_ext.recipes import shipped_config
from hf_ext.recipes.wd_plasticity import (
    PlasticityArguments,
    PretrainingArguments,
    downstream_data,
    finetuning_args,
    main,
    parser,
    pretraining_trainer,
)


def _flags(tmp_path, *extra):
    return ["--config", str(shipped_config("wd_plasticity_quick")), "--output_dir", str(tmp_path), *extra]


def _decayed(trainer) -> tuple[set[str], set[str]]:
    """Names of the parameters the Trainer's AdamW decays, and of those it does not."""
    optimizer = trainer.create_optimizer()
    names = {id(p): name for name, p in trainer.model.named_parameters()}
    decayed, kept = set(), set()
    for group in optimizer.param_groups:
        (decayed if group["weight_decay"] > 0 else kept).update(names[id(p)] for p in group["params"])
    return decayed, kept


def test_pretraining_decays_matrices_but_not_norms(tmp_path):
    script_args, training_args = parser().parse_args_and_config(_flags(tmp_path))
    tokenizer = stdlib_bpe_tokenizer(script_args.vocab_size)
    corpus = stdlib_corpus(tokenizer, 16, max_files=4)
    probe = corpus["train"].select(range(8)).add_column("label", [0, 1] * 4)
    trainer, _ = pretraining_trainer(0.3, tokenizer, corpus, probe, script_args, training_args, tmp_path)
    decayed, kept = _decayed(trainer)
    assert trainer.args.weight_decay == 0.3
    assert kept and all("norm" in name for name in kept)
    assert {name for name, p in trainer.model.named_parameters() if p.dim() == 2} == decayed


def test_the_pretraining_weight_decay_is_set_only_by_the_sweep(tmp_path):
    """Issue 38: TrainingArguments' weight_decay was parsed, then replaced by each of weight_decays."""
    _, training_args = parser().parse_args_and_config(_flags(tmp_path))
    assert "weight_decay" not in {field.name for field in dataclasses.fields(training_args) if field.init}


def test_the_trainer_grouping_also_leaves_biases_undecayed(training_args):
    config = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    config.attention_bias = config.mlp_bias = True
    decayed, kept = _decayed(Trainer(model=LlamaForCausalLM(config), args=training_args(weight_decay=0.1)))
    assert any(name.endswith("bias") for name in kept)
    assert not any(name.endswith("bias") or "norm" in name for name in decayed)


def test_quick_sweep_end_to_end(tmp_path, capsys):
    results = main(_flags(tmp_path, "--weight_decays", "0.0", "1.0", "--learning_rate", "1e-2"))
    rows = results["rows"]
    assert [row["weight_decay"] for row in rows] == [0.0, 1.0]
    for row in rows:
        assert 0 <= row["probe_accuracy"] <= 1 and 0 <= row["classification_accuracy"] <= 1
        assert 0 <= row["arithmetic_exact_match"] <= 1 and row["arithmetic_loss"] > 0
        assert row["qk_spectral_norm"] <= row["qk_frobenius_norm"]
    # Same initialisation, data and steps: only the decay differs, and it shrinks the weights.
    assert rows[1]["weight_norm"] < rows[0]["weight_norm"]
    assert rows[1]["base_validation_loss"] != rows[0]["base_validation_loss"]
    for decay in ("0", "1"):
        point = tmp_path / f"wd_{decay}"
        steps = [entry["step"] for entry in json.loads((point / "plasticity.json").read_text())]
        assert steps[0] == 0 and steps[-1] == 6
        assert (point / "base" / "model.safetensors").is_file() and (point / "base" / "tokenizer.json").is_file()
    assert (tmp_path / "plasticity.png").stat().st_size > 1000
    capsys.readouterr()
    assert plasticity_report(tmp_path) == rows
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| weight decay | base val loss") and len(printed) == 4


def test_report_of_an_empty_directory_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no wd_\*/results.json under"):
        plasticity_report(tmp_path)


@pytest.mark.parametrize(
    ("weight_decays", "message"),
    [
        ([], "`weight_decays` must list at least one weight decay, got an empty sweep"),
        ([0.1, -0.1], r"`weight_decays` must all be >= 0, got \[-0.1\]"),
        ([0.1, 0.1], "`weight_decays` must not repeat a value"),
    ],
)
def test_bad_sweeps_name_the_field(weight_decays, message):
    with pytest.raises(ValueError, match=message):
        PlasticityArguments(weight_decays=weight_decays)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_heads": 3}, ValueError, r"`hidden_size` \(128\) must be a multiple of `num_heads` \(3\)"),
        ({"num_heads": 0}, ValueError, "`num_heads` must be an integer >= 1, got 0"),
    ],
)
def test_a_model_shape_llama_refuses_is_refused_before_any_work(kwargs, error, message):
    """The walk of issue 72: 3 heads of a 128-wide model failed in LlamaConfig after the corpus was read, in a
    traceback."""
    with pytest.raises(error, match="PlasticityArguments: " + message):
        PlasticityArguments(**kwargs)


def test_bad_sweep_from_the_command_line(tmp_path):
    with pytest.raises(ValueError, match="must all be >= 0"):
        parser().parse_args_and_config(_flags(tmp_path, "--weight_decays", "-1"))


def test_held_out_arithmetic_must_not_be_all_seen():
    script_args = PlasticityArguments(arithmetic_difficulty=1, arithmetic_train=2000)
    with pytest.raises(ValueError, match="every held-out arithmetic problem at difficulty 1"):
        downstream_data(stdlib_bpe_tokenizer(script_args.vocab_size), script_args, seed=0)


@pytest.mark.slow
def test_quick_sweep_on_two_cpu_processes(tmp_path, run_on_two_processes):
    stdout = run_on_two_processes("wd_plasticity", ["--config", "wd_plasticity_quick", "weight_decays=0.0 1.0"])
    assert stdout.count("weight decay 1: base val loss") == 1
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [row["weight_decay"] for row in rows] == [0.0, 1.0]


def test_the_finetuning_batch_is_global_and_split_across_processes(tmp_path, monkeypatch):
    """A launch of 2 processes fine-tunes on the one-process batch, half on each (it took 2x as many sequences)."""
    script_args, training_args = parser().parse_args_and_config(_flags(tmp_path))[:2]
    monkeypatch.setattr(PretrainingArguments, "world_size", property(lambda self: 2))
    args = finetuning_args(training_args, script_args, tmp_path, steps=4)
    assert args.per_device_train_batch_size * 2 == script_args.finetune_batch_size == 16
    script_args.finetune_batch_size = 15
    with pytest.raises(ValueError, match="`finetune_batch_size` must be a multiple of the 2 processes, got 15"):
        finetuning_args(training_args, script_args, tmp_path, steps=4)
