"""Rep3DForSegmentation: a plain encoder of large-kernel Rep3D blocks and a light top-down decoder."""

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.modeling_outputs import SemanticSegmenterOutput

from .configuration import Rep3DConfig
from .conv import Rep3DConv
from .loss import check_labels, dice_ce_loss


class Rep3DBlock(nn.Module):
    """``x + MLP(norm(Rep3DConv(x)))``: a large-kernel depthwise mixer and a pointwise MLP, with a residual."""

    def __init__(self, channels: int, kernel_size: int, config: Rep3DConfig):
        super().__init__()
        self.mixer = Rep3DConv(channels, kernel_size, config.mask_mode, config.modulation_hidden_size)
        self.norm = nn.GroupNorm(1, channels)
        self.expand = nn.Conv3d(channels, config.mlp_ratio * channels, 1)
        self.project = nn.Conv3d(config.mlp_ratio * channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.project(F.gelu(self.expand(self.norm(self.mixer(x)))))


class Rep3DStage(nn.Module):
    """A patchifying convolution of stride ``stride`` (normalised first, except on the raw input) and its blocks."""

    def __init__(self, in_channels: int, channels: int, depth: int, kernel_size: int, stride: int, config, first: bool):
        super().__init__()
        self.downsample = nn.Sequential(
            nn.Identity() if first else nn.GroupNorm(1, in_channels),
            nn.Conv3d(in_channels, channels, stride, stride=stride),
        )
        self.blocks = nn.Sequential(*(Rep3DBlock(channels, kernel_size, config) for _ in range(depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.downsample(x))


class Rep3DPreTrainedModel(PreTrainedModel):
    """The base ``from_pretrained`` needs: the config class and how missing weights are initialised."""

    config_class = Rep3DConfig
    config: Rep3DConfig
    base_model_prefix = "rep3d"
    main_input_name = "pixel_values"
    input_modalities = ("image",)

    @torch.no_grad()
    def _init_weights(self, module):
        """PyTorch's default initialisation, except the modulation net's last layer, which starts at zero (M = P)."""
        if isinstance(module, nn.Conv3d):
            if getattr(module, "zero_init", False):
                nn.init.zeros_(module.weight)
                nn.init.zeros_(module.bias)
            else:
                module.reset_parameters()
        elif isinstance(module, nn.GroupNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)


class Rep3DForSegmentation(Rep3DPreTrainedModel):
    """Per-voxel class logits at the input's resolution; the loss (cross-entropy + Dice) when ``labels`` are given.

    Each side of the input volume must be at least ``config.stride_product`` voxels; sides need not be
    multiples of it (the decoder interpolates to each skip's size).
    """

    def __init__(self, config: Rep3DConfig):
        super().__init__(config)
        channels = [config.num_channels, *config.hidden_sizes]
        strides = [config.stem_stride] + [2] * (len(config.hidden_sizes) - 1)
        self.stages = nn.ModuleList(
            Rep3DStage(
                channels[i], channels[i + 1], config.depths[i], config.kernel_sizes[i], strides[i], config, i == 0
            )
            for i in range(len(config.hidden_sizes))
        )
        self.laterals = nn.ModuleList(nn.Conv3d(c, config.decoder_hidden_size, 1) for c in config.hidden_sizes)
        self.head = nn.Sequential(
            nn.GroupNorm(1, config.decoder_hidden_size),
            nn.GELU(),
            nn.Conv3d(config.decoder_hidden_size, config.num_labels, 1),
        )
        self.post_init()

    def _check_inputs(self, pixel_values: torch.Tensor, labels: torch.Tensor | None) -> None:
        expected = f"(batch, {self.config.num_channels}, D, H, W)"
        if pixel_values.dim() != 5 or pixel_values.shape[1] != self.config.num_channels:
            raise ValueError(f"`pixel_values` must have shape {expected}, got {tuple(pixel_values.shape)}")
        small = [side for side in pixel_values.shape[2:] if side < self.config.stride_product]
        if small:
            raise ValueError(
                f"`pixel_values` sides must be at least the encoder's stride product {self.config.stride_product} "
                f"(stem_stride {self.config.stem_stride} x 2 per later stage), got {tuple(pixel_values.shape[2:])}"
            )
        if labels is not None:
            expected = pixel_values.shape[:1] + pixel_values.shape[2:]
            if labels.shape != expected:
                raise ValueError(
                    f"`labels` must have shape (batch, D, H, W) = {tuple(expected)}, got {tuple(labels.shape)}"
                )
            check_labels(labels, self.config.num_labels)

    def deploy(self) -> "Rep3DForSegmentation":
        """Fold every mask into its kernel (plain depthwise convolutions, same outputs); the config says so."""
        for module in self.modules():
            if isinstance(module, Rep3DConv):
                module.deploy()
        self.config.mask_mode = "none"
        return self

    def forward(
        self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None, **kwargs
    ) -> SemanticSegmenterOutput:
        self._check_inputs(pixel_values, labels)
        features, x = [], pixel_values
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        y = self.laterals[-1](features[-1])
        for lateral, feature in zip(self.laterals[-2::-1], features[-2::-1], strict=True):
            y = lateral(feature) + F.interpolate(y, size=feature.shape[2:], mode="trilinear")
        logits = F.interpolate(self.head(y), size=pixel_values.shape[2:], mode="trilinear")
        loss = None if labels is None else dice_ce_loss(logits, labels.long(), self.config.dice_weight)
        return SemanticSegmenterOutput(loss=loss, logits=logits)
