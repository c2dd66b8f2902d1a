"""Rep3DModel, the encoder of large-kernel Rep3D blocks, and Rep3DForSegmentation, it and a light top-down decoder."""

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithNoAttention, SemanticSegmenterOutput
from transformers.utils import can_return_tuple

from .configuration import Rep3DConfig
from .conv import Rep3DConv
from .loss import check_labels, dice_ce_loss


class Rep3DBlock(GradientCheckpointingLayer):
    """``x + MLP(norm(Rep3DConv(x)))``: a large-kernel depthwise mixer and a pointwise MLP, with a residual.

    The unit of activation checkpointing: under ``activation_checkpointing_enable()`` its activations are
    recomputed in the backward pass instead of kept.
    """

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
    supports_gradient_checkpointing = True
    _no_split_modules = ["Rep3DBlock"]

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

    def deploy(self):
        """Fold every mask into its kernel (plain depthwise convolutions, same outputs); the config says so."""
        for module in self.modules():
            if isinstance(module, Rep3DConv):
                module.deploy()
        self.config.mask_mode = "none"
        return self


class Rep3DModel(Rep3DPreTrainedModel):
    """The encoder: stages of Rep3D blocks, each halving the volume (the first by ``stem_stride``).

    ``last_hidden_state`` is the last stage's output; ``hidden_states`` (with ``output_hidden_states``) every
    stage's output, finest first, as the decoder of :class:`Rep3DForSegmentation` uses them. Each side of the
    input volume must be at least ``config.stride_product`` voxels; sides need not be multiples of it.
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
        self.post_init()

    def _check_pixel_values(self, pixel_values: torch.Tensor) -> None:
        expected = f"(batch, {self.config.num_channels}, D, H, W)"
        if pixel_values.dim() != 5 or pixel_values.shape[1] != self.config.num_channels:
            raise ValueError(f"`pixel_values` must have shape {expected}, got {tuple(pixel_values.shape)}")
        small = [side for side in pixel_values.shape[2:] if side < self.config.stride_product]
        if small:
            raise ValueError(
                f"`pixel_values` sides must be at least the encoder's stride product {self.config.stride_product} "
                f"(stem_stride {self.config.stem_stride} x 2 per later stage), got {tuple(pixel_values.shape[2:])}"
            )

    @can_return_tuple
    def forward(
        self, pixel_values: torch.Tensor, output_hidden_states: bool | None = None
    ) -> BaseModelOutputWithNoAttention:
        """``return_dict=False`` (or ``config.return_dict=False``) returns the output's non-None fields as a tuple."""
        self._check_pixel_values(pixel_values)
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        hidden_states, x = (), pixel_values
        for stage in self.stages:
            x = stage(x)
            hidden_states += (x,)
        return BaseModelOutputWithNoAttention(
            last_hidden_state=x, hidden_states=hidden_states if output_hidden_states else None
        )


class Rep3DForSegmentation(Rep3DPreTrainedModel):
    """Per-voxel class logits at the input's resolution; the loss (cross-entropy + Dice) when ``labels`` are given.

    The encoder is :class:`Rep3DModel` (``self.rep3d``), so ``Rep3DModel.from_pretrained`` (or ``AutoModel``)
    loads the encoder of a segmentation checkpoint. The decoder (``laterals``, ``head``) adds 1x1 projections of
    every stage top-down with trilinear upsampling; it stays at the top level, where it was before the encoder
    moved into ``Rep3DModel``, so that older checkpoints load unchanged (transformers prefixes their encoder keys
    ``stages.*`` with ``rep3d.``).
    """

    # The Dice term pools the whole batch per class: the loss is a batch mean that the Trainer cannot re-normalise
    # by `num_items_in_batch`, so the Trainer passes none and scales the loss for gradient accumulation itself.
    accepts_loss_kwargs = False

    def __init__(self, config: Rep3DConfig):
        super().__init__(config)
        self.rep3d = Rep3DModel(config)
        self.laterals = nn.ModuleList(nn.Conv3d(c, config.decoder_hidden_size, 1) for c in config.hidden_sizes)
        self.head = nn.Sequential(
            nn.GroupNorm(1, config.decoder_hidden_size),
            nn.GELU(),
            nn.Conv3d(config.decoder_hidden_size, config.num_labels, 1),
        )
        self.post_init()

    def decode(self, hidden_states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The encoder's stage outputs (finest first) -> class logits at the first stage's resolution."""
        y = self.laterals[-1](hidden_states[-1])
        for lateral, feature in zip(self.laterals[-2::-1], hidden_states[-2::-1], strict=True):
            y = lateral(feature) + F.interpolate(y, size=feature.shape[2:], mode="trilinear")
        return self.head(y)

    def _check_labels(self, pixel_values: torch.Tensor, labels: torch.Tensor) -> None:
        expected = pixel_values.shape[:1] + pixel_values.shape[2:]
        if labels.shape != expected:
            raise ValueError(
                f"`labels` must have shape (batch, D, H, W) = {tuple(expected)}, got {tuple(labels.shape)}"
            )
        check_labels(labels, self.config.num_labels)

    @can_return_tuple
    def forward(
        self,
        pixel_values: torch.Tensor,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
    ) -> SemanticSegmenterOutput:
        """``hidden_states`` are the encoder's (one per stage); ``return_dict=False`` returns a tuple, loss first."""
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        encoder = self.rep3d(pixel_values, output_hidden_states=True, return_dict=True)
        if labels is not None:
            self._check_labels(pixel_values, labels)
        logits = F.interpolate(self.decode(encoder.hidden_states), size=pixel_values.shape[2:], mode="trilinear")
        loss = None if labels is None else dice_ce_loss(logits, labels.long(), self.config.dice_weight)
        return SemanticSegmenterOutput(
            loss=loss, logits=logits, hidden_states=encoder.hidden_states if output_hidden_states else None
        )
