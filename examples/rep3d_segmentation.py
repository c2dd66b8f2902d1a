"""Rep3D: a large-kernel 3D segmentation model trained by the stock Trainer, then deployed.

`Rep3DForSegmentation` is a `PreTrainedModel`: a plain 4-stage encoder whose depthwise kernels
apply `W * M`, with the mask `M = P + f(P)` computed from the distance prior `P = 1/(1+d)` by a
small modulation net that trains with the optimizer. After training, `deploy()` folds `M` into
`W`: plain depthwise convolutions with the same outputs. Trains a few steps on 32^3 synthetic
organ volumes; for a real run see `recipes/rep3d.py` (80 steps, 3 seeds, 4 variants).
"""

import torch
from transformers import AutoModelForSemanticSegmentation, Trainer, TrainingArguments

from hf_ext.data import volume_segmentation
from hf_ext.data.volumes import class_names
from hf_ext.models.rep3d import DiceMetrics, Rep3DConfig, Rep3DForSegmentation, argmax_logits

data = volume_segmentation(num_train=16, num_validation=4, size=32)  # background, liver, kidney, lesion
config = Rep3DConfig(num_labels=4, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], kernel_sizes=[13, 7, 5, 3])
model = Rep3DForSegmentation(config)
args = TrainingArguments(
    output_dir="outputs/rep3d_example",
    max_steps=6,
    learning_rate=2e-3,
    per_device_train_batch_size=2,
    report_to="none",
    use_cpu=True,
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=data["train"],
    eval_dataset=data["validation"],
    compute_metrics=DiceMetrics(class_names(4)),
    preprocess_logits_for_metrics=argmax_logits,
)
trainer.train()
print({k: round(v, 3) for k, v in trainer.evaluate().items() if "dice" in k})

volume = data["validation"][0]["pixel_values"][None]
model.eval()
with torch.no_grad():
    before = model(pixel_values=volume).logits
    model.deploy()  # W <- W * M; the modulation nets are gone
    after = model(pixel_values=volume).logits
model.save_pretrained("outputs/rep3d_example/deployed")  # reloads as plain depthwise convolutions
print(f"deployed: max |logit change| {(after - before).abs().max():.2e}")
reloaded = AutoModelForSemanticSegmentation.from_pretrained("outputs/rep3d_example/deployed")  # "rep3d" is registered
print(type(reloaded).__name__, [tuple(h.shape) for h in reloaded(volume, output_hidden_states=True).hidden_states])
