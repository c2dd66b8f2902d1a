import pytest

from hf_ext.data import docstring_classification
from hf_ext.models import tiny_causal_lm
from hf_ext.plasticity import downstream


def test_the_classifier_loss_is_not_scaled_by_the_number_of_processes(monkeypatch, training_args):
    """On 2 processes wd_plasticity's classification loss read 1.364 against 0.685 on one: transformers multiplies
    a loss by the number of processes under `average_tokens_across_devices`, meant for token-summed LM losses."""

    class Built(Exception):
        pass

    def trainer(model, args, **kwargs):
        raise Built(args)

    monkeypatch.setattr(downstream, "Trainer", trainer)
    base, tokenizer = tiny_causal_lm()
    args = training_args(max_steps=1)
    assert args.average_tokens_across_devices  # transformers' default, which the fine-tuning must not keep
    with pytest.raises(Built) as built:
        downstream.classification_after_finetuning(base, tokenizer, docstring_classification(2, seed=0), args)
    (used,) = built.value.args
    assert used.average_tokens_across_devices is False and used.max_steps == 1
