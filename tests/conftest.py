import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402  (torch does not import Triton)

if not torch.cuda.is_available():
    # Triton reads this once, at its first import: run kernels on CPU tensors in the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")
