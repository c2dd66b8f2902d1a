"""hf-ext: 2026 optimization methods as drop-ins for the Hugging Face training stack."""

__version__ = "0.1.0"
