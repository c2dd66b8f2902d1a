"""Fine-tune a base model on a downstream task and score it: what plasticity means in practice.

Each function trains a copy (the base model is left as it was) with the stock ``Trainer`` and
the ``TrainingArguments`` given, so every base model of a sweep gets the same fine-tuning budget.
"""

import copy
import dataclasses

import numpy as np
import torch
from datasets import Dataset, DatasetDict
from transformers import (
    AutoModelForSequenceClassification,
    DataCollatorForSeq2Seq,
    DataCollatorWithPadding,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    TrainingArguments,
)

from .._sharded import whole
from ..data.sft import tokenize_prompt_completion
from ..distributed import unsharded_copy
from ..evaluation import arithmetic_accuracy


def _accuracy(prediction) -> dict[str, float]:
    return {"accuracy": float((np.argmax(prediction.predictions, axis=-1) == prediction.label_ids).mean())}


def classification_after_finetuning(
    base: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    splits: DatasetDict,
    args: TrainingArguments,
    max_length: int = 64,
) -> dict[str, float]:
    """Validation accuracy and loss after fine-tuning ``base``'s body with a fresh classification head.

    ``splits`` has ``train`` and ``validation`` with ``text`` and a ``ClassLabel`` ``label``
    (as :func:`hf_ext.data.docstring_classification` makes them). The head is the architecture's
    own ``...ForSequenceClassification`` head, initialised from ``args.seed``; the whole model trains.
    """
    for split in ("train", "validation"):
        if split not in splits or not {"text", "label"} <= set(splits[split].column_names):
            raise ValueError(f"classification_after_finetuning: `splits` needs a {split!r} split with text and label")
    config = copy.deepcopy(base.config)
    config.num_labels = splits["train"].features["label"].num_classes
    config.pad_token_id = tokenizer.pad_token_id
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        model = AutoModelForSequenceClassification.from_config(config)
    model.base_model.load_state_dict({name: whole(t) for name, t in base.base_model.state_dict().items()})
    model.to(base.device)
    tokenized = splits.map(
        lambda rows: tokenizer(rows["text"], truncation=True, max_length=max_length),
        batched=True,
        remove_columns=["text"],
    )
    # The classifier's loss is a mean per process: transformers multiplies it by the number of processes when
    # `average_tokens_across_devices` is on (meant for token-summed LM losses), which doubled it on 2 processes.
    trainer = Trainer(
        model=model,
        args=dataclasses.replace(args, average_tokens_across_devices=False),
        train_dataset=tokenized["train"],
        eval_dataset=tokenized["validation"],
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=_accuracy,
    )
    trainer.train()
    metrics = trainer.evaluate()
    return {"accuracy": metrics["eval_accuracy"], "loss": metrics["eval_loss"]}


def arithmetic_after_finetuning(
    base: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train: Dataset,
    test: Dataset,
    args: TrainingArguments,
    max_new_tokens: int = 32,
) -> dict[str, float]:
    """Greedy exact-match accuracy and completion loss on ``test`` after LM fine-tuning on ``train``.

    Both are chat-format arithmetic rows (:func:`hf_ext.data.arithmetic_dataset`); the loss is on
    the completion tokens only, and ``tokenizer`` needs a chat template.
    """
    model = unsharded_copy(base)
    columns = train.column_names
    tokenize = {"tokenizer": tokenizer}
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train.map(tokenize_prompt_completion, fn_kwargs=tokenize, remove_columns=columns),
        eval_dataset=test.map(tokenize_prompt_completion, fn_kwargs=tokenize, remove_columns=test.column_names),
        data_collator=DataCollatorForSeq2Seq(tokenizer),
    )
    trainer.train()
    loss = trainer.evaluate()["eval_loss"]
    return {"exact_match": arithmetic_accuracy(model, tokenizer, test, max_new_tokens), "loss": loss}
