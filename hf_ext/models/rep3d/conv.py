"""Rep3D's large-kernel depthwise convolution: the kernel's updates re-weighted by a receptive-biased mask.

A structurally re-parameterised block (a large kernel plus parallel small ones) trains like one
kernel whose positions have different learning rates, larger near the centre. Rep3D makes that
explicit with a mask over the kernel positions, computed in every forward pass:

    P = 1 / (1 + d)          d: Euclidean distance (voxels) of a kernel position from the centre
    M = P + f(P)             f: a small convolutional net on P, one output channel per kernel channel
    y = conv3d(x, W * M)     depthwise, padding k // 2 (the output keeps the input's shape)

Autograd then gives ``grad_W = M * grad_(W*M)``: the mask scales each position's gradient, and
``f``'s parameters receive gradients and train with the optimizer. ``deploy()`` folds ``M`` into
``W`` once training is over: a plain depthwise convolution with the same outputs.
"""

import torch
from torch import nn
from torch.nn import functional as F

from hf_ext._validation import check_finite

MASK_MODES = ("learned", "prior", "none")


def distance_prior(kernel_size: int) -> torch.Tensor:
    """``P = 1 / (1 + d)`` over the positions of a ``kernel_size``^3 kernel: 1 at the centre, ~1/(1 + k/2) at faces."""
    offsets = torch.arange(kernel_size, dtype=torch.float32) - kernel_size // 2
    squared = offsets[:, None, None] ** 2 + offsets[None, :, None] ** 2 + offsets[None, None, :] ** 2
    return 1 / (1 + squared.sqrt())


class ModulationNet(nn.Module):
    """``f(P)``: two 3x3x3 convolutions over the prior, one output channel per kernel channel.

    Its last convolution starts at zero (``zero_init``), so that ``M = P`` at initialisation and
    Rep3D starts from the fixed-prior mask and learns how to depart from it.
    """

    def __init__(self, channels: int, hidden_size: int = 8):
        super().__init__()
        self.hidden = nn.Conv3d(1, hidden_size, 3, padding=1)
        self.out = nn.Conv3d(hidden_size, channels, 3, padding=1)
        self.out.zero_init = True
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.hidden.reset_parameters()
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, prior: torch.Tensor) -> torch.Tensor:
        """(k, k, k) prior -> (channels, 1, k, k, k), the shape of a depthwise kernel."""
        return self.out(F.gelu(self.hidden(prior[None, None])))[0].unsqueeze(1)


def _check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Rep3DConv: `{name}` must be an integer >= 1, got {value!r}")


def check_kernel_size(owner: str, name: str, kernel_size) -> None:
    """Refuse, naming ``owner``'s ``name``, a kernel size that is not an odd integer >= 1: padding k // 2 keeps a
    volume's shape only for an odd k. Rep3D's one check of a kernel size, wherever it is set."""
    if isinstance(kernel_size, bool) or not isinstance(kernel_size, int) or kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(
            f"{owner}: `{name}` must be an odd integer >= 1 (padding k // 2 keeps the shape), got {kernel_size!r}"
        )


class Rep3DConv(nn.Module):
    """Depthwise ``Conv3d`` with a large odd kernel whose effective weight is ``W * M`` (see the module docstring).

    ``mask="learned"`` is Rep3D (``M = P + f(P)``), ``"prior"`` the fixed mask ``M = P`` and ``"none"``
    a plain depthwise convolution (``M = 1``), the baselines it is compared with.
    """

    def __init__(
        self,
        channels: int,
        kernel_size: int = 21,
        mask: str = "learned",
        modulation_hidden_size: int = 8,
        bias: bool = True,
    ):
        super().__init__()
        _check_positive_int("channels", channels)
        check_finite("Rep3DConv", "kernel_size", kernel_size)
        check_kernel_size("Rep3DConv", "kernel_size", kernel_size)
        if mask not in MASK_MODES:
            raise ValueError(f"Rep3DConv: `mask` must be one of {list(MASK_MODES)}, got {mask!r}")
        _check_positive_int("modulation_hidden_size", modulation_hidden_size)
        self.mask_mode = mask
        self.conv = nn.Conv3d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels, bias=bias)
        if mask != "none":
            self.register_buffer("prior", distance_prior(kernel_size))
        if mask == "learned":
            self.modulation = ModulationNet(channels, modulation_hidden_size)

    def mask(self) -> torch.Tensor:
        """``M``, shaped like the kernel ``(channels, 1, k, k, k)``; ones for ``mask="none"``."""
        weight = self.conv.weight
        if self.mask_mode == "none":
            return torch.ones_like(weight)
        prior = self.prior.to(weight.dtype).expand_as(weight)
        return prior + self.modulation(self.prior.to(weight.dtype)) if self.mask_mode == "learned" else prior

    def effective_weight(self) -> torch.Tensor:
        """``W * M``, the kernel the convolution applies."""
        return self.conv.weight if self.mask_mode == "none" else self.conv.weight * self.mask()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # channels-last: oneDNN's depthwise 3D convolution, 2-9x faster forward+backward on CPU than the default
        # layout (measured at 16^3 and 8^3, kernels 7 and 13); torch.compile gave 0.7-1.0x, so it is not used.
        x = x.contiguous(memory_format=torch.channels_last_3d)
        if self.mask_mode == "none":
            return self.conv(x)
        return F.conv3d(x, self.effective_weight(), self.conv.bias, padding=self.conv.padding, groups=self.conv.groups)

    @torch.no_grad()
    def deploy(self) -> "Rep3DConv":
        """Fold ``M`` into ``W`` and drop the prior and the modulation net: a plain depthwise conv, same outputs."""
        if self.mask_mode != "none":
            self.conv.weight.copy_(self.effective_weight())
            del self.prior
            if self.mask_mode == "learned":
                del self.modulation
            self.mask_mode = "none"
        return self

    def extra_repr(self) -> str:
        return f"mask={self.mask_mode!r}"
