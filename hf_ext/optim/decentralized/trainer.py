"""A ``Trainer`` for decentralized SGD: the model is not wrapped in DDP, and the workers' average is saved.

Under ``torchrun``/``accelerate launch`` with several processes, accelerate wraps the model in
``DistributedDataParallel`` (always, on ``MULTI_CPU``), whose backward all-reduces every gradient:
decentralized SGD would silently become DDP plus a gossip round that changes nothing. Nothing in
``TrainingArguments`` or accelerate's configs turns that off, so this subclass has accelerate prepare
the model as it does for evaluation (mixed precision and ``torch.compile`` if configured, no DDP). Data
is still sharded across processes and logged losses are still averaged over them.
"""

import functools

from transformers import Trainer

from .optimizer import find_decentralized


class DecentralizedTrainer(Trainer):
    """``Trainer`` whose processes each keep their own weights, mixed only by a :class:`DecentralizedSGD`.

    Pass the optimizer as usual (``optimizers=(DecentralizedSGD(...), None)`` or
    ``optimizer_cls_and_kwargs=(DecentralizedSGDFactory, {...})``); any other optimizer is refused on
    more than one process, where the replicas would drift apart. ``save_model`` (also each checkpoint's)
    writes the exact average ``x_bar`` of the workers' models and leaves every worker its own weights:
    call it on every process, as accelerate scripts do.
    """

    def create_accelerator_and_postprocess(self):
        super().create_accelerator_and_postprocess()
        self.accelerator.prepare_model = functools.partial(self.accelerator.prepare_model, evaluation_mode=True)

    def create_optimizer(self, model=None):
        optimizer = super().create_optimizer(model)
        if self.accelerator.num_processes > 1 and find_decentralized(optimizer) is None:
            raise ValueError(
                "DecentralizedTrainer: the optimizer must be a DecentralizedSGD on more than one process (the model "
                f"is not wrapped in DDP, so nothing else keeps the replicas together), got {type(optimizer).__name__}"
            )
        return optimizer

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        optimizer = find_decentralized(self.optimizer)
        if optimizer is None:
            return super().save_model(output_dir, _internal_call)
        with optimizer.averaged_parameters():
            super().save_model(output_dir, _internal_call)
