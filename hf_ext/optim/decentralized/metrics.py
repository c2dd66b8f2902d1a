"""Decentralized SGD's health in the Trainer's logs: consensus distance, spectral gap, loss at the average.

A small consensus distance with a good averaged loss says the workers agree and that their average
is a good model; the spectral gap of the topology says how fast gossip pulls them together.
"""

import torch
from transformers import TrainerCallback

from ..._trainer_logs import add_to_logs
from ..._validation import check_finite
from .optimizer import find_decentralized


class DecentralizedMetricsCallback(TrainerCallback):
    """Every ``every`` steps, adds to the Trainer's logs (on every process; the values are global):

    - ``dsgd/consensus_distance``: ``(1/n) sum_i ||x_i - x_bar||^2``;
    - ``dsgd/spectral_gap``: the topology's per-round gap (:meth:`Topology.spectral_gap`);
    - ``dsgd/bytes_sent_per_step``: gossip bytes this process sent per step since the last entry;
    - ``dsgd/averaged_loss``: the loss of the averaged model ``x_bar`` on ``loss_inputs`` (a batch of model
      inputs with ``labels``), when given.

    Args:
        every: steps between measurements (each costs two all-reduces of the parameters).
        loss_inputs: the fixed batch for ``dsgd/averaged_loss``; ``None`` leaves that metric out.
    """

    def __init__(self, every: int = 10, loss_inputs: dict[str, torch.Tensor] | None = None):
        check_finite("DecentralizedMetricsCallback", "every", every)
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"DecentralizedMetricsCallback: `every` must be an integer >= 1, got {every!r}")
        if loss_inputs is not None and "labels" not in loss_inputs:
            raise ValueError("DecentralizedMetricsCallback: `loss_inputs` must hold `labels` to give a loss")
        self.every, self.loss_inputs = every, loss_inputs
        self._pending: dict[str, float] = {}
        self._bytes_at_last, self._step_at_last = 0, 0

    @torch.no_grad()
    def _averaged_loss(self, model, optimizer) -> float:
        was_training = model.training
        model.eval()
        inputs = {name: value.to(model.device) for name, value in self.loss_inputs.items()}
        try:
            with optimizer.averaged_parameters():
                return float(model(**inputs).loss)
        finally:
            model.train(was_training)

    def measure(self, model, optimizer, step: int) -> dict[str, float]:
        """The metrics now (collective: every process calls it)."""
        sent = optimizer.communicator.bytes_sent
        metrics = {
            "dsgd/consensus_distance": optimizer.consensus_distance(),
            "dsgd/spectral_gap": optimizer.topology.spectral_gap(),
            "dsgd/bytes_sent_per_step": (sent - self._bytes_at_last) / max(1, step - self._step_at_last),
        }
        self._bytes_at_last, self._step_at_last = sent, step
        if self.loss_inputs is not None:
            metrics["dsgd/averaged_loss"] = self._averaged_loss(model, optimizer)
        return metrics

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        decentralized = find_decentralized(optimizer)
        if decentralized is None:
            raise ValueError("DecentralizedMetricsCallback: the Trainer's optimizer is not a DecentralizedSGD")
        if state.global_step % self.every == 0:
            self._pending = self.measure(model, decentralized, state.global_step)
            control.should_log = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self._pending:
            add_to_logs(state, logs, self._pending)
            self._pending = {}
