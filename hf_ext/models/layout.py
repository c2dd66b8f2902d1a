"""How each parameter of a model maps to linear maps: its role, and its view as a stack of ``(d_out, d_in)`` matrices.

Matrix methods (spectral steps, symmetry groups, binarization scales, activation subspaces, weight metrics)
read a weight as the linear map ``d_in -> d_out``. transformers stores that map in several ways, and reading
the tensor as it is stored is silently wrong on most of them:

- ``nn.Linear``: ``(out, in)``, the map as is;
- GPT-2's ``Conv1D``: ``(in, out)``, the transpose;
- ``nn.Embedding``: ``(vocab, dim)``, the transpose of the map from a one-hot token to its vector;
- mixture-of-experts tensors (transformers 5): ``(experts, out, in)``, one matrix per expert, or
  ``(experts, in, out)`` where the experts module sets ``is_transposed``;
- convolution kernels: ``(out, in, *kernel)``, one matrix ``(out, in * prod(kernel))``.

:func:`model_layout` names each trainable parameter's :class:`ParamLayout`: its role (``hidden`` matrices,
``embedding``, ``head`` for the output embeddings and classification heads, ``vector`` for biases and norm
gains) and :meth:`ParamLayout.matrices`, the ``(experts, d_out, d_in)`` view a method acts on batched
(``experts`` is 1 for a plain matrix), with :meth:`ParamLayout.from_matrices` back to the stored shape.
"""

from dataclasses import dataclass

import torch
from torch import nn

ROLES = ("hidden", "embedding", "head", "vector")
HEAD_MODULES = ("classifier", "score", "qa_outputs")  # transformers' classification and span heads
_CONVOLUTIONS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def is_conv1d(module: nn.Module) -> bool:
    """transformers' ``Conv1D`` (GPT-2 and its descendants): a linear layer whose weight is stored ``(in, out)``.

    Read from the class hierarchy, so a ``Conv1D`` that torch's parametrizations or FSDP2 have re-classed
    (``ParametrizedConv1D``, ``FSDPConv1D``) still is one.
    """
    return hasattr(module, "nf") and any(cls.__name__ == "Conv1D" for cls in type(module).__mro__)


@dataclass(frozen=True)
class ParamLayout:
    """One parameter's role and how its stored tensor reads as ``(experts, d_out, d_in)`` matrices.

    ``transposed``: each stored matrix is ``(d_in, d_out)``; ``stacked``: the leading axis indexes experts;
    ``adapter``: a PEFT adapter weight (``lora_A``, ``lora_B``, ...), never quantized.
    """

    name: str
    role: str
    shape: tuple[int, ...]
    transposed: bool = False
    stacked: bool = False
    adapter: bool = False

    @property
    def is_matrix(self) -> bool:
        return self.role != "vector"

    @property
    def num_matrices(self) -> int:
        return self.shape[0] if self.stacked else 1

    @property
    def matrix_shape(self) -> tuple[int, int]:
        """``(d_out, d_in)`` of each matrix (a vector is one row)."""
        stored = self.matrices(torch.empty(self.shape, device="meta")).shape
        return stored[1], stored[2]

    def matrices(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (shaped like the parameter) as ``(experts, d_out, d_in)``: a view where the stride allows."""
        if self.stacked:
            stack = tensor
        elif tensor.dim() < 2:
            stack = tensor.reshape(1, 1, -1)
        else:
            stack = tensor.reshape(1, tensor.shape[0], -1)
        return stack.transpose(-2, -1) if self.transposed else stack

    def matrix_axis(self, dim: int) -> int:
        """The axis of :meth:`matrices`' view that the stored tensor's axis ``dim`` becomes: 0 experts, 1 ``d_out``,
        2 ``d_in`` (a kernel's trailing axes are flattened into ``d_in``). Tells which axis a row split (FSDP2's
        ``Shard(0)``) cuts: the experts (each shard holds whole matrices) or each matrix."""
        if self.stacked:
            axis = dim
        elif len(self.shape) < 2:
            axis = 2
        else:
            axis = min(dim, 1) + 1
        return 3 - axis if self.transposed and axis else axis

    def from_matrices(self, stack: torch.Tensor) -> torch.Tensor:
        """The inverse of :meth:`matrices`: ``(experts, d_out, d_in)`` back to the parameter's stored shape."""
        if self.transposed:
            stack = stack.transpose(-2, -1)
        return stack.reshape(self.shape)


def _adapter_parameter_names(model: nn.Module) -> set[str]:
    """Names of PEFT adapter parameters: those under a tuner layer's ``adapter_layer_names`` attributes."""
    names = set()
    for module_name, module in model.named_modules():
        for attribute in getattr(module, "adapter_layer_names", ()):
            container = getattr(module, attribute, None)
            if isinstance(container, nn.Module):
                prefix = ".".join(part for part in (module_name, attribute) if part)
                names.update(f"{prefix}.{name}" for name, _ in container.named_parameters())
    return names


def _head_weight_ids(model: nn.Module) -> set[int]:
    """The output embeddings' weight and the last linear layer of each classification head."""
    heads = set()
    output = getattr(model, "get_output_embeddings", lambda: None)()
    if output is not None and getattr(output, "weight", None) is not None:
        heads.add(id(output.weight))
    for name, module in model.named_modules():
        if name.rpartition(".")[2] in HEAD_MODULES:
            linears = [m for _, m in _base_linears(module)]
            if linears:  # the last one gives the logits (RoBERTa's head has a hidden `dense` before it)
                logits = linears[-1].out_features
                heads.update(id(m.weight) for m in linears if m.out_features == logits)
    return heads


def _base_linears(module: nn.Module) -> list[tuple[str, nn.Linear]]:
    """The ``nn.Linear`` layers under ``module``, PEFT adapters left out."""
    adapters = _adapter_parameter_names(module)
    return [
        (name, m) for name, m in module.named_modules() if isinstance(m, nn.Linear) and f"{name}.weight" not in adapters
    ]


def model_layout(model: nn.Module, trainable_only: bool = True) -> dict[str, ParamLayout]:
    """Every parameter of ``model`` (each tied tensor once, under its first name) with its :class:`ParamLayout`.

    A weight tied to both the input embeddings and the output head is the ``head``. ``trainable_only`` leaves
    out parameters that do not require gradients (a PEFT model's frozen base).
    """
    owners = {}
    for module in model.modules():
        for param_name, param in module.named_parameters(recurse=False):
            owners.setdefault(id(param), (module, param_name))
        for tensor_name, parametrizations in getattr(module, "parametrizations", {}).items():
            for param in parametrizations.parameters(recurse=False):  # the `original` a parametrization reads
                owners[id(param)] = (module, tensor_name)
    heads = _head_weight_ids(model)
    adapters = _adapter_parameter_names(model)
    layouts = {}
    for name, param in model.named_parameters():
        if trainable_only and not param.requires_grad:
            continue
        module, param_name = owners[id(param)]
        layouts[name] = _layout(name, param, module, param_name, heads, name in adapters)
    return layouts


def _layout(name, param, module, param_name, heads, adapter) -> ParamLayout:
    shape = tuple(param.shape)
    if param.dim() < 2 or param_name.endswith("bias"):  # experts' stacked biases (E, out) are vectors too
        return ParamLayout(name, "vector", shape, adapter=adapter)
    if id(param) in heads:
        return ParamLayout(name, "head", shape, adapter=adapter)
    if isinstance(module, nn.Embedding) and param_name == "weight":
        return ParamLayout(name, "embedding", shape, transposed=True, adapter=adapter)
    if is_conv1d(module) and param_name == "weight":
        return ParamLayout(name, "hidden", shape, transposed=True, adapter=adapter)
    if param.dim() == 3 and not isinstance(module, _CONVOLUTIONS):
        transposed = bool(getattr(module, "is_transposed", False))
        return ParamLayout(name, "hidden", shape, transposed=transposed, stacked=True, adapter=adapter)
    return ParamLayout(name, "hidden", shape, adapter=adapter)
