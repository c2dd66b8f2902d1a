"""Triton kernels with a plain-torch reference: `seeded_perturb_` adds seeded noise in place, and undoes it.

The same seed gives the same noise on every call, so a perturbation is undone without storing
it (how MeZO and AGZO perturb weights). On CUDA the Triton kernel runs, elsewhere the reference.
"""

import torch

from hf_ext.kernels import seeded_perturb_

param = torch.randn(256, 128)
original = param.clone()

seeded_perturb_(param, seed=1234, scale=1e-3)  # param += 1e-3 * z(1234), z drawn inside the kernel
moved = (param - original).abs().max().item()
seeded_perturb_(param, seed=1234, scale=-1e-3)  # exactly the same z: undoes it
print(f"perturbed by up to {moved:.1e}, restored to within {(param - original).abs().max().item():.1e}")
