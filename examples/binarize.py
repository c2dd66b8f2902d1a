"""Progressive 1-bit binarization: distil SmolLM2 into a binary student whose weights move to 1 bit.

Decoder linear layers become `ProgressiveBinaryLinear`s; the callback raises their mix
`lambda` from 0 (dense) to 1 (binary) over the first `end` steps while the student distils the
full-precision teacher on standard-library source. The finished model is saved packed, 8
weights per byte. Runs 2 steps on a CPU; for a real run train longer (the
`binarize_progressive` recipe: 100 steps of 4 blocks of 128 tokens, `end=50`).
"""

import copy

from hf_ext.data import stdlib_corpus
from hf_ext.models import load_smollm2
from hf_ext.quant import (
    LogitDistillationConfig,
    LogitDistillationTrainer,
    PackedBinaryLinear,
    ProgressiveBinarizationCallback,
    binarize_model,
    load_packed,
    save_packed,
)

teacher, tokenizer = load_smollm2()
student = copy.deepcopy(teacher)
blocks = stdlib_corpus(tokenizer, block_size=64, max_files=8)["train"]

# {layer: ||W - B(W)|| / ||W||}. Here the 30 MLP down-projections; without `target_modules`, every
# nn.Linear but lm_head (210 layers, about a minute of rank-1 initialisation on 2 CPU cores).
init_errors = binarize_model(student, target_modules=["mlp.down_proj"])
trainer = LogitDistillationTrainer(
    student,
    teacher,
    LogitDistillationConfig(
        output_dir="outputs/binarize", max_steps=2, per_device_train_batch_size=2, report_to="none"
    ),
    train_dataset=blocks,
    callbacks=[ProgressiveBinarizationCallback(end=1)],
)
trainer.train()
sizes = save_packed(student, "outputs/binarize/packed")  # 1 bit per weight + scales
packed = load_packed("outputs/binarize/packed")  # multiplies straight from the bits
print(
    f"binarized {len(init_errors)} layers, reloaded "
    f"{sum(isinstance(m, PackedBinaryLinear) for m in packed.modules())} packed ones at "
    f"{sizes['packed_linear_bytes'] / sizes['fp16_linear_bytes']:.3f} of their fp16 size"
)
