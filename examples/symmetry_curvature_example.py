"""SymmetryCurvature: precondition each layer by its gradient second moment averaged over the layer's symmetries.

The group is chosen per layer: permutations of each hidden matrix's output units by default, the
diagonal (Adam-like) estimate for vectors, embeddings and the head, and any group by name pattern.
With the orthogonal group on the rows and the identity on the columns, one step is Muon's U V^T.
"""

import torch
from transformers import Trainer, TrainingArguments

from hf_ext.data import stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.optim import SymmetryCurvature, SymmetryGroup, symmetry_param_groups

tokenizer = stdlib_bpe_tokenizer(512)
model = llama_from_scratch(tokenizer, hidden_size=32, num_layers=2, num_heads=2, max_positions=32)
blocks = stdlib_corpus(tokenizer, block_size=32, max_files=8)["train"]

groups = symmetry_param_groups(
    model,
    hidden="permutation",  # rows (output units) of every hidden matrix
    overrides={"*.mlp.down_proj.weight": ("identity", "permutation")},  # its input units are the MLP's hidden units
)
optimizer = SymmetryCurvature(groups, lr=3e-3, betas=(0.9, 0.95), damping=1e-6)
args = TrainingArguments(
    output_dir="outputs/symmetry_curvature_example",
    max_steps=20,
    per_device_train_batch_size=8,
    lr_scheduler_type="constant",
    logging_steps=10,
    report_to="none",
)
trainer = Trainer(model=model, args=args, train_dataset=blocks, optimizers=(optimizer, None))
result = trainer.train()

# The estimate behind one step, on one gradient: the orthogonal group on the rows gives S = I kron G^T G / out.
g = torch.randn(16, 8, dtype=torch.float64)
group = SymmetryGroup("orthogonal", "identity")
step = group.precondition(group.second_moment(g), g, damping=1e-12)
u, _, vh = torch.linalg.svd(g, full_matrices=False)
print(f"training loss after {result.global_step} steps: {result.training_loss:.3f}")
print(f"one-gradient step / sqrt(out) vs U V^T: max difference {(step / 4 - u @ vh).abs().max():.1e}")
print(f"numbers stored for a 16 x 8 layer: {group.storage(16, 8)} (full second moment: {128 * 129 // 2})")
