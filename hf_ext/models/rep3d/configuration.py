"""Rep3DConfig: the encoder's stages, the mask mode of its large kernels, the decoder and the loss."""

from dataclasses import field

from transformers import PreTrainedConfig

from hf_ext._validation import check_count, check_finite_fields, check_list

from .conv import MASK_MODES, check_kernel_size

STAGE_FIELDS = ("hidden_sizes", "depths", "kernel_sizes")


# Not @strict like transformers' own configs: its type check would refuse a NaN before `check_finite_fields`
# could name the field with the house message.
class Rep3DConfig(PreTrainedConfig):
    """A plain 4-stage encoder of large-kernel blocks and a light top-down decoder, for 3D segmentation.

    ``num_labels`` (of ``PreTrainedConfig``) is the number of classes, background included.
    """

    model_type = "rep3d"

    num_channels: int = field(default=1, metadata={"help": "Channels of the input volumes."})
    hidden_sizes: list[int] = field(
        default_factory=lambda: [16, 32, 64, 128], metadata={"help": "Channels of each encoder stage."}
    )
    depths: list[int] = field(default_factory=lambda: [1, 1, 2, 1], metadata={"help": "Blocks in each stage."})
    kernel_sizes: list[int] = field(
        default_factory=lambda: [21, 21, 21, 21],
        metadata={"help": "Odd kernel size of each stage's depthwise convolution (3 for a small-kernel baseline)."},
    )
    mask_mode: str = field(
        default="learned",
        metadata={"help": f"Kernel mask, one of {list(MASK_MODES)}: Rep3D, the fixed prior 1/(1+d), or none."},
    )
    modulation_hidden_size: int = field(default=8, metadata={"help": "Hidden channels of the modulation net."})
    mlp_ratio: int = field(default=2, metadata={"help": "Expansion of each block's pointwise MLP."})
    stem_stride: int = field(default=2, metadata={"help": "Stride (and kernel) of the patchifying stem."})
    decoder_hidden_size: int = field(default=32, metadata={"help": "Channels of the top-down decoder."})
    dice_weight: float = field(default=1.0, metadata={"help": "Loss = cross-entropy + dice_weight * (1 - soft Dice)."})

    def __post_init__(self, **kwargs):
        check_finite_fields(self)
        for name in STAGE_FIELDS:
            values = getattr(self, name)
            check_list("Rep3DConfig", name, values, int)
            if not values or min(values) < 1:
                raise ValueError(f"Rep3DConfig: `{name}` must be a non-empty list of integers >= 1, got {values}")
            setattr(self, name, list(values))
        lengths = {name: len(getattr(self, name)) for name in STAGE_FIELDS}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"Rep3DConfig: {', '.join(STAGE_FIELDS)} must have one entry per stage, got {lengths}")
        for index, kernel_size in enumerate(self.kernel_sizes):
            check_kernel_size("Rep3DConfig", f"kernel_sizes[{index}]", kernel_size)
        if self.mask_mode not in MASK_MODES:
            raise ValueError(f"Rep3DConfig: `mask_mode` must be one of {list(MASK_MODES)}, got {self.mask_mode!r}")
        for name in ("num_channels", "modulation_hidden_size", "mlp_ratio", "stem_stride", "decoder_hidden_size"):
            check_count("Rep3DConfig", name, getattr(self, name), least=1)
        if self.dice_weight < 0:
            raise ValueError(f"Rep3DConfig: `dice_weight` must be >= 0, got {self.dice_weight}")
        super().__post_init__(**kwargs)
        if self.num_labels < 2:
            raise ValueError(f"Rep3DConfig: `num_labels` must be >= 2 (background and a class), got {self.num_labels}")

    @property
    def stride_product(self) -> int:
        """How much the encoder shrinks each side: the stem's stride times 2 per later stage."""
        return self.stem_stride * 2 ** (len(self.hidden_sizes) - 1)
