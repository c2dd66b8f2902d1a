"""``ZOTrainer``: a ``transformers.Trainer`` that fine-tunes with forward passes only."""

import functools
import logging
import math
from collections.abc import Sized

import torch
from accelerate.utils import reduce
from torch import nn
from transformers import Trainer

from .._validation import check_finite_fields
from .config import AGZOConfig, ZOConfig
from .estimator import estimate_projected_gradients
from .optimizer import ZOOptimizer
from .perturbation import ZOPerturbation, derive_seed

logger = logging.getLogger(__name__)


class ZOTrainer(Trainer):
    """Zeroth-order fine-tuning (AGZO or MeZO) with the Trainer's data, schedule, logging and checkpoints.

        trainer = ZOTrainer(model, args, train_dataset=train, zo_config=AGZOConfig(rank=8))
        trainer.train()

    Each step runs the perturbed forwards under ``torch.no_grad()`` in eval mode (dropout off)
    and never calls ``backward``; the learning rate comes from the Trainer's scheduler.

    - Gradient accumulation: every micro-batch of a step uses the same perturbations; their
      projected gradients are averaged, so the estimate is that of the whole accumulated batch.
    - ``max_grad_norm`` must be 0: there is no gradient vector to clip.
    - Weight decay is ``zo_config.weight_decay``; ``args.weight_decay`` must stay 0.
    - Multi-process (``accelerate launch``): the model is not wrapped in DDP. Every process uses
      the same seeds and averages its losses with the others (one scalar per forward); AGZO also
      sums each layer's range-finder sketch across processes so all use one subspace.
    - A NaN or inf loss skips the step (counted in ``zo/skipped_steps``); parameters stay exactly
      as they were, and the logged ``loss`` of that logging window (and the run's ``train_loss``)
      is NaN, where the Trainer's ``logging_nan_inf_filter`` would show a running mean.
    """

    def __init__(self, model=None, args=None, *trainer_args, zo_config: ZOConfig | None = None, **kwargs):
        zo_config = AGZOConfig() if zo_config is None else zo_config
        if not isinstance(zo_config, ZOConfig):
            raise TypeError(
                f"ZOTrainer: `zo_config` must be an AGZOConfig or MeZOConfig, got {type(zo_config).__name__}"
            )
        optimizers = kwargs.get("optimizers", (None, None))
        if optimizers[0] is not None or kwargs.get("optimizer_cls_and_kwargs") is not None:
            raise ValueError(
                "ZOTrainer: the optimizer is the zeroth-order update; pass only a scheduler in `optimizers`"
            )
        super().__init__(model, args, *trainer_args, **kwargs)
        self._check_args()
        self.zo_config = zo_config
        distributed = self.accelerator.num_processes > 1
        # accelerate's module-level `reduce` (what Accelerator.reduce calls), so the optimizer pickles.
        self.perturbation = ZOPerturbation(
            self.model, zo_config, reduce_sum=functools.partial(reduce, reduction="sum") if distributed else None
        )
        self._reduce_mean = functools.partial(reduce, reduction="mean") if distributed else None
        # Nothing is backpropagated, so accelerate only places (and casts) the model: no DDP wrapper.
        self.accelerator.prepare_model = functools.partial(self.accelerator.prepare_model, evaluation_mode=True)
        self._step_of_last_micro_batch: int | None = None
        self._window = self._empty_window()
        self._skipped_steps = 0

    @staticmethod
    def _empty_window() -> dict[str, float]:
        """Projected-gradient statistics accumulated between two training logs."""
        return {"abs_grad_sum": 0.0, "abs_grad_max": 0.0, "num_grads": 0, "forwards": 0, "skipped": 0}

    def _check_args(self) -> None:
        # A NaN learning rate gives finite losses and NaN weights: nothing would skip those steps.
        check_finite_fields(self.args)
        if isinstance(self.train_dataset, Sized) and len(self.train_dataset) == 0:  # torch's sampler names no dataset
            raise ValueError("ZOTrainer: `train_dataset` is empty; pass the examples to train on")
        if self.args.max_grad_norm:
            raise ValueError(
                f"ZOTrainer: `max_grad_norm` must be 0 (zeroth-order steps compute no gradient to clip), "
                f"got {self.args.max_grad_norm}"
            )
        if self.args.weight_decay:
            raise ValueError(
                f"ZOTrainer: set weight decay in `zo_config.weight_decay`; `args.weight_decay` must be 0, "
                f"got {self.args.weight_decay}"
            )
        if self.args.n_gpu > 1:
            raise ValueError("ZOTrainer: nn.DataParallel over several GPUs is not supported; use `accelerate launch`")

    def create_optimizer(self, model: nn.Module | None = None) -> torch.optim.Optimizer:
        if self.optimizer is None:
            decay_names = set(self.get_decay_parameter_names(self.model))
            self.optimizer = ZOOptimizer(
                self.perturbation, self.args.learning_rate, self.zo_config.weight_decay, decay_names, self.args.seed
            )
        return self.optimizer

    @property
    def zo_optimizer(self) -> ZOOptimizer:
        optimizer = self.optimizer
        return getattr(optimizer, "optimizer", optimizer)  # unwrap accelerate's AcceleratedOptimizer

    def training_step(self, model: nn.Module, inputs: dict, num_items_in_batch=None) -> torch.Tensor:
        model.eval()
        inputs = self._prepare_inputs(inputs)
        step = self.state.global_step
        first_micro_batch = step != self._step_of_last_micro_batch
        self._step_of_last_micro_batch = step
        refresh = (
            first_micro_batch
            and isinstance(self.zo_config, AGZOConfig)
            and step % self.zo_config.subspace_refresh_interval == 0
        )
        with self.compute_loss_context_manager():
            estimate = estimate_projected_gradients(
                self.perturbation,
                lambda: self.compute_loss(model, dict(inputs)),
                step_seed=derive_seed(self.args.seed, step),
                refresh_subspaces=refresh,
                row_mask=inputs.get("attention_mask"),
                reduce_mean=self._reduce_mean,
            )
        self._window["forwards"] += estimate.forward_passes
        accumulation = self.current_gradient_accumulation_steps
        if not estimate.finite:
            self._window["skipped"] += 1
            self._skipped_steps += 1
            logger.warning("ZOTrainer: non-finite loss at step %d; the step is skipped", step)
            self.zo_optimizer.skip_step()
            return torch.tensor(math.nan, device=self.args.device)
        self.zo_optimizer.accumulate(estimate.seeds, estimate.projected_grads, 1 / (len(estimate.seeds) * accumulation))
        for g in estimate.projected_grads:
            self._window["abs_grad_sum"] += abs(g)
            self._window["abs_grad_max"] = max(self._window["abs_grad_max"], abs(g))
            self._window["num_grads"] += 1
        return torch.tensor(estimate.loss / accumulation, device=self.args.device)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        logs.pop("grad_norm", None)  # the Trainer reports 0.0: there is no gradient
        if "loss" in logs:
            window = self._window
            if window["skipped"]:
                logs["loss"] = math.nan
            if window["num_grads"]:
                logs["zo/projected_grad_abs_mean"] = window["abs_grad_sum"] / window["num_grads"]
                logs["zo/projected_grad_abs_max"] = window["abs_grad_max"]
            logs["zo/forward_passes"] = window["forwards"]
            logs["zo/skipped_steps"] = window["skipped"]
            self._window = self._empty_window()
        if "train_loss" in logs and self._skipped_steps:
            logs["train_loss"] = math.nan
        super().log(logs, start_time)
