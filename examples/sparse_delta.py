"""Sparse delta checkpoints of an fp32 fine-tune: exact (every moved bit) vs bf16-visible.

Ten plain-SGD steps on a tiny Llama with fp32 weights move nearly every entry bitwise, so an
exact delta is as large as a full checkpoint; the bf16-visible delta stores only the entries
whose bf16 value changed and restores the bf16 model bit-exactly. Seconds on a CPU.
"""

import tempfile
from pathlib import Path

import torch

from hf_ext.models import tiny_causal_lm
from hf_ext.rl import apply_sparse_delta, save_sparse_delta

model, tokenizer = tiny_causal_lm(seed=0)
base = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
batch = tokenizer("12 + 30 = 42", return_tensors="pt")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
for _ in range(10):
    model(**batch, labels=batch["input_ids"]).loss.backward()
    optimizer.step()
    optimizer.zero_grad()

out = Path(tempfile.mkdtemp())
exact = save_sparse_delta(model, base, out / "exact.safetensors", warn=False)  # default mode="exact"
visible = save_sparse_delta(model, base, out / "visible.safetensors", mode="visible", dtype=torch.bfloat16)
restored = apply_sparse_delta(tiny_causal_lm(seed=0)[0], out / "visible.safetensors")  # cast to bf16, then patched
assert all(torch.equal(restored.state_dict()[k], v.to(torch.bfloat16)) for k, v in model.state_dict().items())
print(
    f"exact delta: {exact['changed'] / exact['total']:.1%} of the entries, {exact['bytes'] / exact['full_bytes']:.2f} "
    f"of a full fp32 checkpoint; bf16-visible delta: {visible['changed'] / visible['total']:.1%} of the entries, "
    f"{visible['bytes'] / exact['full_bytes']:.3f} of it; the bf16 model restored bit-exactly"
)
