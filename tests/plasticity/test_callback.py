import json
import math

import pytest
import torch
import transformers as tf
from datasets import Dataset
from transformers import Trainer

from hf_ext.models import tiny_causal_lm
from hf_ext.plasticity import PlasticityCallback


def _probe_set(rows=40, length=8):
    """Label 0 sequences use tokens 10..49, label 1 tokens 60..99: separable by their embeddings."""
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(rows) % 2
    ids = torch.randint(10, 50, (rows, length), generator=generator) + 50 * labels[:, None]
    return Dataset.from_dict({"input_ids": ids.tolist(), "label": labels.tolist()})


def _lm_blocks(seed, rows=8, length=8):
    ids = torch.randint(0, 500, (rows, length), generator=torch.Generator().manual_seed(seed)).tolist()
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def test_measure_reports_every_layer_and_restores_the_model():
    model, _ = tiny_causal_lm(hidden_size=16)
    model.train()
    callback = PlasticityCallback(_probe_set(), loss_datasets=(_lm_blocks(0), _lm_blocks(1)))
    metrics = callback.measure(model)
    assert metrics["plasticity/probe_accuracy/layer_0"] >= 0.85  # the token sets are separable (chance 0.5)
    for layer in (0, 1):
        assert 0 <= metrics[f"plasticity/attention_entropy/layer_{layer}"] <= math.log(8)
        assert (
            0
            < metrics[f"plasticity/qk_spectral_norm/layer_{layer}"]
            <= metrics[f"plasticity/qk_frobenius_norm/layer_{layer}"]
        )
    assert math.isfinite(metrics["plasticity/loss_gap"]) and metrics["plasticity/weight_norm"] > 0
    assert model.training and model.config._attn_implementation == "sdpa"


def test_metrics_reach_the_trainer_logs_and_the_json_file(training_args, tmp_path):
    model, _ = tiny_causal_lm(hidden_size=16)
    callback = PlasticityCallback(_probe_set(), every=2, output_file=tmp_path / "plasticity.json")
    trainer = Trainer(model=model, args=training_args(max_steps=4, logging_steps=100), train_dataset=_lm_blocks(2))
    callback.attach(trainer)
    assert trainer.callback_handler.callbacks[0] is callback
    trainer.train()
    logged = [entry["step"] for entry in trainer.state.log_history if "plasticity/weight_norm" in entry]
    assert logged == [2, 4]
    assert [entry["step"] for entry in json.loads((tmp_path / "plasticity.json").read_text())] == [0, 2, 4]


def test_an_encoder_decoder_gets_decoder_inputs_and_reports_each_stack():
    config = tf.T5Config(
        vocab_size=100, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2, decoder_start_token_id=0
    )
    metrics = PlasticityCallback(_probe_set()).measure(tf.T5ForConditionalGeneration(config))
    for stack in ("encoder", "decoder"):
        assert metrics[f"plasticity/probe_accuracy/{stack}/layer_1"] >= 0
    for stack in ("encoder", "decoder", "cross"):
        for layer in (0, 1):
            assert metrics[f"plasticity/attention_entropy/{stack}/layer_{layer}"] > 0
            assert metrics[f"plasticity/qk_spectral_norm/{stack}/layer_{layer}"] > 0


def test_an_attention_layer_without_readable_query_key_is_refused_by_name():
    model, _ = tiny_causal_lm(hidden_size=16)
    attention = model.model.layers[1].self_attn
    attention.__class__ = type("OpaqueMixer", (type(attention),), {})  # its maps are returned, its module not found
    with pytest.raises(ValueError, match=r"no attention module for layers \['layer_1'\]"):
        PlasticityCallback(_probe_set()).measure(model)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"probe_dataset": Dataset.from_dict({"input_ids": [[1, 2]]})}, r"needs columns \['label'\]"),
        (
            {"probe_dataset": Dataset.from_dict({"input_ids": [[1], [2]], "label": [0, 0]})},
            "at least two distinct labels",
        ),
        ({"every": 0}, "`every` must be an integer >= 1"),
        ({"batch_size": 0}, "`batch_size` must be an integer >= 1"),
        ({"probe_test_fraction": 1.0}, r"`probe_test_fraction` must be in \(0, 1\)"),
    ],
)
def test_bad_input_names_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PlasticityCallback(**{"probe_dataset": _probe_set()} | kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every": 2.5}, "`every` must be an integer >= 1, got 2.5"),  # was taken
        ({"batch_size": "16"}, "`batch_size` must be an integer >= 1, got '16'"),  # failed comparing str and int
        ({"probe_dataset": []}, "`probe_dataset` must be a datasets.Dataset"),  # no attribute 'column_names'
    ],
)
def test_input_of_another_type_names_the_field(kwargs, message):
    with pytest.raises(TypeError, match="PlasticityCallback: " + message):
        PlasticityCallback(**{"probe_dataset": _probe_set()} | kwargs)
