"""A drop-in ``nn.Linear`` whose weight moves from dense to 1-bit as its mix ``lambda`` goes 0 -> 1.

The effective weight is ``W_t = (1 - lambda) W + lambda B(W)`` with ``B(W) = diag(a) sign(W) diag(b)``:
dual scaling by a learnable per-output vector ``a`` and per-input vector ``b``. The backward pass
differentiates that same mix: the dense part exactly, the sign through a straight-through
estimator weighted by ``lambda``. So at ``lambda = 0`` the layer is exactly the dense one (forward
and gradients) and at ``lambda = 1`` exactly the binary one.

Clipping choice (``ste_clip``): the estimator treats ``a_i b_j sign(W_ij)`` as
``a_i b_j hardtanh(W_ij / (ste_clip a_i b_j))`` scaled back, i.e. the gradient reaches ``W_ij``
only where ``|W_ij| <= ste_clip * a_i * b_j``: a weight already well beyond the magnitude its
binary value represents stops being pushed (the usual hardtanh STE of binary networks, measured
in units of the layer's own scale). ``ste_clip=None`` passes the gradient everywhere.

Every function here takes one matrix ``(out, in)`` with scales ``(out,)``, ``(in,)``, or a stack of them
``(experts, out, in)`` with scales ``(experts, out)``, ``(experts, in)``: a mixture-of-experts tensor is
binarized batched, each expert exactly as it would be alone. Weights that are not an ``nn.Linear``'s (GPT-2's
``Conv1D``, expert stacks, a router's raw matrix) are binarized in place by :class:`ProgressiveBinaryWeight`, a
``torch.nn.utils.parametrize`` parametrization, so that the module's own forward computes with the mixed weight.
"""

import torch
from torch import nn
from torch.nn import functional as F

from .._validation import check_count, check_finite, check_number

INITS = ("svid", "mean_abs")


def binary_signs(weight: torch.Tensor) -> torch.Tensor:
    """``sign(W)`` with zero mapped to +1, so that every entry is exactly one bit.

    ``sign(sign(W) + 1/2)``: float passes only, ~14x faster on CPU than ``torch.where`` or a bool cast.
    """
    return torch.sign(weight).add_(0.5).sign_()


def scale_signs(signs: torch.Tensor, row_scale: torch.Tensor, col_scale: torch.Tensor) -> torch.Tensor:
    """``diag(a) S diag(b)`` (of each matrix of a stack): the binary weight from its signs ``S``."""
    return row_scale[..., :, None] * signs * col_scale[..., None, :]


def binary_weight(weight: torch.Tensor, row_scale: torch.Tensor, col_scale: torch.Tensor) -> torch.Tensor:
    """``B(W) = diag(a) sign(W) diag(b)`` (of each matrix of a stack)."""
    return scale_signs(binary_signs(weight), row_scale, col_scale)


def rank_one_scales(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Binary-aware init: ``a``, ``b`` with ``a b^T`` the best rank-1 approximation of ``|W|``.

    ``|W|`` is non-negative, so its leading singular vectors can be taken non-negative
    (Perron-Frobenius); ``a = sqrt(s) u`` and ``b = sqrt(s) v`` split the singular value evenly.
    """
    magnitude = weight.detach().abs().float()
    left, singular, right = torch.linalg.svd(magnitude, full_matrices=False)  # batched over a stack's experts
    root = singular[..., :1].sqrt()
    row_scale, col_scale = left[..., :, 0].abs() * root, right[..., 0, :].abs() * root
    return row_scale.to(weight.dtype), col_scale.to(weight.dtype)


def mean_abs_scales(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One-shot baseline: ``a`` the per-row mean of ``|W|``, ``b`` all ones."""
    row_scale = weight.detach().abs().float().mean(dim=-1)
    col_shape = weight.shape[:-2] + weight.shape[-1:]
    return row_scale.to(weight.dtype), torch.ones(col_shape, dtype=weight.dtype, device=weight.device)


def relative_binary_error(weight: torch.Tensor, row_scale: torch.Tensor, col_scale: torch.Tensor) -> float:
    """``||W - B(W)||_F / ||W||_F``: how much the binary approximation loses."""
    weight = weight.detach().float()
    approximation = binary_weight(weight, row_scale.detach().float(), col_scale.detach().float())
    return ((weight - approximation).norm() / weight.norm().clamp_min(torch.finfo(torch.float32).tiny)).item()


class MixedBinaryWeight(torch.autograd.Function):
    """``(1 - lambda) W + lambda diag(a) sign(W) diag(b)``, with the straight-through backward above.

    Saves only ``W``, ``a``, ``b`` (the signs are recomputed in backward), not the mixed weight. At
    ``lambda = 1`` (every step after the ramp) the dense term is skipped, forward and backward: a third fewer
    passes over the weights, with the same result (``0 * x + y == y``, up to the sign of a zero gradient).
    """

    @staticmethod
    def forward(ctx, weight, row_scale, col_scale, mix, ste_clip):
        ctx.save_for_backward(weight, row_scale, col_scale, mix)
        ctx.ste_clip = ste_clip
        binary = binary_weight(weight, row_scale, col_scale)
        return binary if mix.item() == 1 else (1 - mix) * weight + mix * binary

    @staticmethod
    def backward(ctx, grad):
        weight, row_scale, col_scale, mix = ctx.saved_tensors
        signed = grad * binary_signs(weight)
        grad_sign_path = grad
        if ctx.ste_clip is not None:
            margin = ctx.ste_clip * (row_scale[..., :, None] * col_scale[..., None, :]) - weight.abs()
            grad_sign_path = grad * margin.sign_().add_(1).clamp_(max=1)  # 1 where |W| <= clip a_i b_j, else 0
        grad_weight = grad_sign_path if mix.item() == 1 else (1 - mix) * grad + mix * grad_sign_path
        grad_row = mix * (signed @ col_scale[..., None])[..., 0]  # bit for bit signed @ col_scale on one matrix
        grad_col = mix * (row_scale[..., None, :] @ signed)[..., 0, :]
        return grad_weight, grad_row, grad_col, None, None


def _check_ste_clip(owner: str, ste_clip: float | None) -> None:
    check_number(owner, "ste_clip", ste_clip, allow_none=True)
    check_finite(owner, "ste_clip", ste_clip)
    if ste_clip is not None and not ste_clip > 0:
        raise ValueError(f"{owner}: `ste_clip` must be > 0 or None, got {ste_clip}")


def _initial_scales(owner: str, matrices: torch.Tensor, trainable: bool, init: str):
    """``(row_scale, col_scale, init_error)`` of ``matrices`` from ``init``.

    The scales train only if the weight does: binarizing a frozen base (a PEFT model's) keeps it frozen.
    """
    if init not in INITS:
        raise ValueError(f"{owner}: `init` must be one of {list(INITS)}, got {init!r}")
    scales = rank_one_scales(matrices) if init == "svid" else mean_abs_scales(matrices)
    row_scale, col_scale = (nn.Parameter(scale, requires_grad=trainable) for scale in scales)
    return row_scale, col_scale, relative_binary_error(matrices, *scales)


class ProgressiveBinaryLinear(nn.Linear):
    """``nn.Linear`` with learnable dual scales ``row_scale`` (a) and ``col_scale`` (b) and a mix ``lambda``.

    ``mix`` is a buffer, so it is saved and restored with the model's ``state_dict`` (and with
    ``Trainer`` checkpoints); :class:`ProgressiveBinarizationCallback` sets it from the step.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        ste_clip: float | None = 1.0,
        device=None,
        dtype=None,
    ):
        for name, size in (("in_features", in_features), ("out_features", out_features)):
            check_count("ProgressiveBinaryLinear", name, size)  # nn.Linear's message names neither
        _check_ste_clip("ProgressiveBinaryLinear", ste_clip)
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.ste_clip = ste_clip
        self.row_scale = nn.Parameter(torch.ones(out_features, device=device, dtype=dtype))
        self.col_scale = nn.Parameter(torch.ones(in_features, device=device, dtype=dtype))
        self.register_buffer("mix", torch.zeros((), device=device, dtype=torch.float32))
        self.init_error = float("nan")

    @classmethod
    def from_linear(cls, linear: nn.Linear, init: str = "svid", ste_clip: float | None = 1.0):
        """Wrap ``linear``'s own weight and bias (shared, not copied), scales from ``init``, mix 0.

        The scales require gradients as ``linear.weight`` does.
        """
        weight = linear.weight
        with torch.device("meta"):
            layer = cls(linear.in_features, linear.out_features, linear.bias is not None, ste_clip, dtype=weight.dtype)
        layer.weight, layer.bias = linear.weight, linear.bias
        layer.row_scale, layer.col_scale, layer.init_error = _initial_scales(
            cls.__name__, weight, weight.requires_grad, init
        )
        layer.mix = torch.zeros((), device=weight.device, dtype=torch.float32)
        return layer

    def effective_weight(self) -> torch.Tensor:
        """The weight this layer multiplies by: dense at mix 0, binary at mix 1."""
        return MixedBinaryWeight.apply(self.weight, self.row_scale, self.col_scale, self.mix, self.ste_clip)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.effective_weight(), self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mix={self.mix.item():.3f}, ste_clip={self.ste_clip}"


class ProgressiveBinaryWeight(nn.Module):
    """The parametrization that binarizes, progressively and in place, a weight that is not an ``nn.Linear``'s.

    ``torch.nn.utils.parametrize.register_parametrization(module, name, ProgressiveBinaryWeight(weight, ...))``
    makes ``module.<name>`` the mixed weight, so the module's own forward computes with it, whatever it is:
    GPT-2's ``Conv1D`` (``transposed``: stored ``(in, out)``), a mixture-of-experts stack ``(experts, out, in)``
    (scales per expert and output unit ``(experts, out)``, per expert and input ``(experts, in)``), a router's
    raw matrix. The latent weight stays the module's (``parametrizations.<name>.original``); the scales and
    ``mix`` are :class:`ProgressiveBinaryLinear`'s, of the map ``in -> out`` whatever the stored orientation.
    """

    def __init__(
        self, weight: torch.Tensor, transposed: bool = False, init: str = "svid", ste_clip: float | None = 1.0
    ):
        super().__init__()
        owner = type(self).__name__
        _check_ste_clip(owner, ste_clip)
        if weight.dim() not in (2, 3):
            raise ValueError(
                f"{owner}: `weight` must be a matrix or a stack of matrices (experts, ...), got shape "
                f"{tuple(weight.shape)}"
            )
        self.transposed, self.ste_clip = transposed, ste_clip
        self.row_scale, self.col_scale, self.init_error = _initial_scales(
            owner, self.matrices(weight.detach()), weight.requires_grad, init
        )
        self.register_buffer("mix", torch.zeros((), device=weight.device, dtype=torch.float32))

    def matrices(self, weight: torch.Tensor) -> torch.Tensor:
        """The stored ``weight`` as its ``(..., out, in)`` maps, a view (and back: the transpose is its own inverse)."""
        return weight.mT if self.transposed else weight

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        mixed = MixedBinaryWeight.apply(self.matrices(weight), self.row_scale, self.col_scale, self.mix, self.ste_clip)
        return self.matrices(mixed)

    def extra_repr(self) -> str:
        return f"transposed={self.transposed}, mix={self.mix.item():.3f}, ste_clip={self.ste_clip}"
