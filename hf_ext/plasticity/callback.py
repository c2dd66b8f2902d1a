"""``PlasticityCallback``: log probe accuracy, attention statistics, loss gap and weight statistics while training."""

import inspect
import json
import re
from collections import defaultdict
from pathlib import Path

import torch
from datasets import Dataset
from transformers import TrainerCallback

from .._sharded import unsharded
from .._trainer_logs import add_to_logs
from .._validation import check_count, check_finite
from .metrics import attention_entropy, linear_probe_accuracy, query_key_norms, weight_statistics


def _batches(dataset: Dataset, batch_size: int, device):
    for start in range(0, len(dataset), batch_size):
        rows = dataset[start : start + batch_size]
        ids = torch.tensor(rows["input_ids"], device=device)
        mask = torch.tensor(rows["attention_mask"], device=device) if "attention_mask" in rows else torch.ones_like(ids)
        yield rows, ids, mask


def _is_encoder_decoder(model) -> bool:
    """Whether ``model``'s forward takes decoder inputs (T5, BART, ...; also through a PEFT wrapper)."""
    return "decoder_input_ids" in inspect.signature(model.forward).parameters


def _decoder_inputs(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """An encoder-decoder's decoder inputs for a probe batch: the batch shifted right, as the model's own
    ``prepare_decoder_input_ids_from_labels`` makes them for teacher forcing; none for a model without a decoder."""
    if not _is_encoder_decoder(model):
        return {}
    prepare = getattr(model, "prepare_decoder_input_ids_from_labels", None)
    if prepare is None:
        raise ValueError(
            f"PlasticityCallback: {type(model).__name__} takes decoder inputs but has no "
            "`prepare_decoder_input_ids_from_labels` to make them from the probe's `input_ids`"
        )
    return {"decoder_input_ids": prepare(labels=ids)}


def _stacks(out) -> list[tuple[str, tuple, tuple]]:
    """``(key prefix, hidden states after each layer, attention maps)`` of each stack of layers in a forward's output:
    ``encoder/``, ``decoder/`` and ``cross/`` (the decoder's attention to the encoder) for an encoder-decoder."""
    if getattr(out, "encoder_hidden_states", None) is not None:
        return [
            ("encoder/", out.encoder_hidden_states[1:], out.encoder_attentions),
            ("decoder/", out.decoder_hidden_states[1:], out.decoder_attentions),
            ("cross/", (), out.cross_attentions),
        ]
    return [("", out.hidden_states[1:], out.attentions), ("cross/", (), getattr(out, "cross_attentions", None) or ())]


def _attention_layers(model) -> dict[str, tuple[str, torch.nn.Module]]:
    """Each attention module by the key of the attention maps it returns (``layer_0``, ``encoder/layer_0``, ...).

    transformers names them ``...Attention``; the innermost is taken (BERT's ``BertSelfAttention``, not the
    ``BertAttention`` around it). Within the encoder, the decoder or a decoder-only model, the modules at the first
    path (layer numbers aside, e.g. ``model.layers.*.self_attn``) are the self-attention layers in order, and those
    at a second path (T5's ``EncDecAttention``) the cross-attention layers.
    """
    named = [(name, m) for name, m in model.named_modules() if type(m).__name__.endswith("Attention")]
    innermost = [(name, m) for name, m in named if not any(other.startswith(f"{name}.") for other, _ in named)]
    encoder = model.get_encoder() if _is_encoder_decoder(model) else None
    in_encoder = set() if encoder is None else {id(m) for m in encoder.modules()}
    paths = defaultdict(dict)  # stack -> path pattern -> [(name, module)]
    for name, module in innermost:
        stack = "encoder/" if id(module) in in_encoder else ("decoder/" if encoder is not None else "")
        paths[stack].setdefault(re.sub(r"\.\d+(?=\.|$)", ".*", name), []).append((name, module))
    layers = {}
    for stack, by_path in paths.items():
        prefixes = [stack, "cross/"] if stack != "encoder/" else [stack]
        if len(by_path) > len(prefixes):
            raise ValueError(
                f"PlasticityCallback: cannot tell which attention layers {list(by_path)} are; expected "
                f"{len(prefixes)} kind(s) in {stack.rstrip('/') or 'the model'}"
            )
        for prefix, modules in zip(prefixes, by_path.values(), strict=False):
            layers |= {f"{prefix}layer_{index}": pair for index, pair in enumerate(modules)}
    return layers


def _query_key_metrics(model, attended: list[str]) -> dict[str, float]:
    """QK norms of every attention layer; a layer in ``attended`` (whose maps the forward returned) that has no
    attention module, or one whose query and key cannot be read, is refused by name."""
    layers = _attention_layers(model)
    missing = [layer for layer in attended if layer not in layers]
    if missing:
        raise ValueError(
            f"PlasticityCallback: found no attention module for layers {missing} (modules named ...Attention: "
            f"{[name for name, _ in layers.values()]}); their QK norms cannot be measured"
        )
    metrics = {}
    for layer, (name, attention) in layers.items():
        try:
            norms = query_key_norms(attention, getattr(attention, "config", model.config))
        except ValueError as error:
            raise ValueError(f"PlasticityCallback: attention layer {layer} ({name}): {error}") from error
        metrics |= {f"plasticity/{metric}/{layer}": value for metric, value in norms.items()}
    return metrics


class PlasticityCallback(TrainerCallback):
    """Every ``every`` steps, at the start and at the end, measures how plastic the model still is.

    Logs ``plasticity/probe_accuracy/layer_{i}`` (linear probe on mean-pooled hidden states of each
    layer, fit on the first ``1 - probe_test_fraction`` of ``probe_dataset``, scored on the rest),
    ``plasticity/attention_entropy/layer_{i}``, ``plasticity/qk_spectral_norm/layer_{i}`` and
    ``.../qk_frobenius_norm/layer_{i}``, ``plasticity/loss_gap`` (validation minus train LM loss, when
    ``loss_datasets=(train, validation)`` is given), ``plasticity/weight_norm`` and
    ``plasticity/effective_rank_mean``. They go into the Trainer's logs and to ``output_file`` (JSON);
    ``history[-1]`` is always the trained model. An encoder-decoder (T5) gets the probe's ``input_ids`` shifted
    right as its decoder inputs, and its per-layer keys read ``encoder/layer_{i}``, ``decoder/layer_{i}`` and
    ``cross/layer_{i}``. A model with an attention layer whose query and key weights cannot be read is refused,
    naming the layer.

    ``probe_dataset`` needs ``input_ids`` (same length per row, or with ``attention_mask``) and
    ``label``. Integrations such as TensorBoard see the metrics when the callback runs before them:
    add it with :meth:`attach` (``callbacks=[...]`` still fills ``log_history`` and the JSON file).
    """

    def __init__(
        self,
        probe_dataset: Dataset,
        every: int = 100,
        loss_datasets: tuple[Dataset, Dataset] | None = None,
        output_file: str | Path | None = None,
        probe_test_fraction: float = 0.5,
        batch_size: int = 16,
    ):
        if not isinstance(probe_dataset, Dataset):
            raise TypeError(
                "PlasticityCallback: `probe_dataset` must be a datasets.Dataset with columns input_ids and label, "
                f"got {type(probe_dataset).__name__}"
            )
        missing = [column for column in ("input_ids", "label") if column not in probe_dataset.column_names]
        if missing:
            raise ValueError(
                f"PlasticityCallback: `probe_dataset` needs columns {missing} (has {probe_dataset.column_names})"
            )
        if len(set(probe_dataset["label"])) < 2:
            raise ValueError("PlasticityCallback: `probe_dataset` must have at least two distinct labels")
        for name, value in (("every", every), ("batch_size", batch_size)):
            check_count("PlasticityCallback", name, value, least=1)
        check_finite("PlasticityCallback", "probe_test_fraction", probe_test_fraction)
        if not 0 < probe_test_fraction < 1:
            raise ValueError(f"PlasticityCallback: `probe_test_fraction` must be in (0, 1), got {probe_test_fraction}")
        self.probe_dataset, self.every, self.loss_datasets = probe_dataset, every, loss_datasets
        self.output_file = None if output_file is None else Path(output_file)
        self.probe_test_fraction, self.batch_size = probe_test_fraction, batch_size
        self.history: list[dict] = []
        self._pending: dict[str, float] = {}

    def attach(self, trainer) -> "PlasticityCallback":
        """Put this callback first in ``trainer``'s list, so that reporting integrations log its metrics."""
        trainer.callback_handler.callbacks.insert(0, self)
        return self

    @torch.no_grad()
    def _probe_and_attention(self, model) -> dict[str, float]:
        features, entropies, labels = defaultdict(list), defaultdict(float), []
        for rows, ids, mask in _batches(self.probe_dataset, self.batch_size, model.device):
            out = model(
                input_ids=ids,
                attention_mask=mask,
                **_decoder_inputs(model, ids),
                output_hidden_states=True,
                output_attentions=True,
            )
            weights = mask[..., None].float()  # a decoder's inputs are the batch shifted right: the same length
            for prefix, hidden_states, attentions in _stacks(out):
                for layer, h in enumerate(hidden_states):
                    features[f"{prefix}layer_{layer}"].append((h.float() * weights).sum(1) / weights.sum(1))
                for layer, a in enumerate(attentions):
                    entropies[f"{prefix}layer_{layer}"] += attention_entropy(a, mask) * len(ids)
            labels.extend(rows["label"])
        labels = torch.tensor(labels)
        split = round(len(labels) * (1 - self.probe_test_fraction))
        metrics = {}
        for layer in dict.fromkeys([*features, *entropies]):
            if layer in features:
                layer_features = torch.cat(features[layer]).cpu()
                metrics[f"plasticity/probe_accuracy/{layer}"] = linear_probe_accuracy(
                    layer_features[:split], labels[:split], layer_features[split:], labels[split:]
                )
            if layer in entropies:
                metrics[f"plasticity/attention_entropy/{layer}"] = entropies[layer] / len(labels)
        return metrics

    @torch.no_grad()
    def _lm_loss(self, model, dataset: Dataset) -> float:
        losses = [
            model(
                input_ids=ids, attention_mask=mask, labels=torch.tensor(rows["labels"], device=ids.device)
            ).loss.item()
            for rows, ids, mask in _batches(dataset, self.batch_size, model.device)
        ]
        return sum(losses) / len(losses)

    def measure(self, model) -> dict[str, float]:
        """All the metrics on ``model`` now (eval mode, eager attention), restoring its mode after.

        Every rank of an FSDP2-sharded model calls this (the ``Trainer`` calls callbacks on every rank): the
        weights are gathered whole for their metrics, so each rank computes one process's.
        """
        was_training, implementation = model.training, model.config._attn_implementation
        model.eval()
        model.set_attn_implementation("eager")  # attention probabilities are only returned by eager
        try:
            metrics = self._probe_and_attention(model)
            attended = [key.rpartition("attention_entropy/")[2] for key in metrics if "attention_entropy/" in key]
            with unsharded(model):  # the weight metrics read whole matrices (forward passes gather by themselves)
                metrics |= _query_key_metrics(model, attended)
                weights = weight_statistics(model)
            if self.loss_datasets is not None:
                train, validation = self.loss_datasets
                metrics["plasticity/loss_gap"] = self._lm_loss(model, validation) - self._lm_loss(model, train)
            metrics |= {f"plasticity/{name}": value for name, value in weights.items()}
        finally:
            model.set_attn_implementation(implementation)
            model.train(was_training)
        return metrics

    def _record(self, state, model) -> dict[str, float]:
        metrics = self.measure(model)
        self.history.append({"step": state.global_step, **metrics})
        if self.output_file is not None and state.is_world_process_zero:
            self.output_file.parent.mkdir(parents=True, exist_ok=True)
            self.output_file.write_text(json.dumps(self.history, indent=2))
        return metrics

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0:  # the starting point, in `history` and the JSON file
            self._record(state, model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0:
            self._pending = self._record(state, model)
            control.should_log = True

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if not self.history or self.history[-1]["step"] != state.global_step:  # the end point, always measured
            self._record(state, model)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self._pending:
            add_to_logs(state, logs, self._pending)
            self._pending = {}
