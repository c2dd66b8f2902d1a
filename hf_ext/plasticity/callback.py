"""``PlasticityCallback``: log probe accuracy, attention statistics, loss gap and weight statistics while training."""

import json
from pathlib import Path

import torch
from datasets import Dataset
from transformers import TrainerCallback

from .._sharded import unsharded
from .._trainer_logs import add_to_logs
from .._validation import check_finite
from .metrics import attention_entropy, linear_probe_accuracy, query_key_norms, weight_statistics


def _batches(dataset: Dataset, batch_size: int, device):
    for start in range(0, len(dataset), batch_size):
        rows = dataset[start : start + batch_size]
        ids = torch.tensor(rows["input_ids"], device=device)
        mask = torch.tensor(rows["attention_mask"], device=device) if "attention_mask" in rows else torch.ones_like(ids)
        yield rows, ids, mask


def _attention_modules(model) -> list:
    return [m for m in model.modules() if (hasattr(m, "q_proj") and hasattr(m, "k_proj")) or hasattr(m, "query")]


class PlasticityCallback(TrainerCallback):
    """Every ``every`` steps, at the start and at the end, measures how plastic the model still is.

    Logs ``plasticity/probe_accuracy/layer_{i}`` (linear probe on mean-pooled hidden states of each
    layer, fit on the first ``1 - probe_test_fraction`` of ``probe_dataset``, scored on the rest),
    ``plasticity/attention_entropy/layer_{i}``, ``plasticity/qk_spectral_norm/layer_{i}`` and
    ``.../qk_frobenius_norm/layer_{i}``, ``plasticity/loss_gap`` (validation minus train LM loss, when
    ``loss_datasets=(train, validation)`` is given), ``plasticity/weight_norm`` and
    ``plasticity/effective_rank_mean``. They go into the Trainer's logs and to ``output_file`` (JSON);
    ``history[-1]`` is always the trained model.

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
        missing = [column for column in ("input_ids", "label") if column not in probe_dataset.column_names]
        if missing:
            raise ValueError(
                f"PlasticityCallback: `probe_dataset` needs columns {missing} (has {probe_dataset.column_names})"
            )
        if len(set(probe_dataset["label"])) < 2:
            raise ValueError("PlasticityCallback: `probe_dataset` must have at least two distinct labels")
        for name, value in (("every", every), ("batch_size", batch_size)):
            check_finite("PlasticityCallback", name, value)
            if value < 1:
                raise ValueError(f"PlasticityCallback: `{name}` must be >= 1, got {value}")
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
        features, entropies, labels = None, None, []
        for rows, ids, mask in _batches(self.probe_dataset, self.batch_size, model.device):
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
            weights = mask[..., None].float()
            pooled = [(h.float() * weights).sum(1) / weights.sum(1) for h in out.hidden_states[1:]]
            batch_entropy = [attention_entropy(a, mask) * len(ids) for a in out.attentions]
            features = pooled if features is None else [torch.cat(pair) for pair in zip(features, pooled, strict=True)]
            entropies = (
                batch_entropy if entropies is None else [a + b for a, b in zip(entropies, batch_entropy, strict=True)]
            )
            labels.extend(rows["label"])
        labels = torch.tensor(labels)
        split = round(len(labels) * (1 - self.probe_test_fraction))
        metrics = {}
        for layer, (layer_features, entropy) in enumerate(zip(features, entropies, strict=True)):
            accuracy = linear_probe_accuracy(
                layer_features[:split].cpu(), labels[:split], layer_features[split:].cpu(), labels[split:]
            )
            metrics[f"plasticity/probe_accuracy/layer_{layer}"] = accuracy
            metrics[f"plasticity/attention_entropy/layer_{layer}"] = entropy / len(labels)
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
            with unsharded(model):  # the weight metrics read whole matrices (forward passes gather by themselves)
                for layer, attention in enumerate(_attention_modules(model)):
                    for name, value in query_key_norms(attention).items():
                        metrics[f"plasticity/{name}/layer_{layer}"] = value
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
