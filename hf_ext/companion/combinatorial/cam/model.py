"""The network: a light message-passing GNN giving each node's flip logit from state, time and degree.

Plain torch (a sparse matrix product per layer): PyTorch Geometric would be one more dependency for three layers.
"""

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from hf_ext._files import open_safetensors, read_json

from .graphs import GraphBatch


class FlipGNN(nn.Module):
    """Per-node flip logits ``(B, N)`` for ``B`` states ``x`` at times ``t`` in [0, 1]."""

    def __init__(self, hidden: int = 32, layers: int = 3):
        super().__init__()
        for name, value in (("hidden", hidden), ("layers", layers)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"FlipGNN: `{name}` must be an integer >= 1, got {value!r}")
        self.hidden, self.num_layers = hidden, layers
        self.embed = nn.Linear(4, hidden)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.Linear(2 * hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden)) for _ in range(layers)
        )
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)  # starts flipping with probability 1/2 everywhere: the uniform chain

    def forward(self, batch: GraphBatch, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        b, n = x.shape
        degree = torch.log1p(batch.degrees).expand(b, n)
        features = torch.stack([x, 2 * x - 1, t[:, None].expand(b, n), degree], -1)
        h = self.embed(features)
        scale = 1 / batch.degrees.clamp(min=1)[None, :, None]
        for layer in self.layers:
            flat = h.transpose(0, 1).reshape(n, b * self.hidden)
            mean = torch.sparse.mm(batch.adjacency, flat).reshape(n, b, self.hidden).transpose(0, 1)
            h = h + layer(torch.cat([h, mean * scale], -1))
        return self.head(h).squeeze(-1)

    def save_pretrained(self, directory: str | Path) -> None:
        """``config.json`` and ``model.safetensors`` in ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps({"hidden": self.hidden, "layers": self.num_layers}))
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(directory / "model.safetensors"))

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> "FlipGNN":
        directory = Path(directory)
        config = read_json(directory / "config.json", "FlipGNN")
        model = cls(**config)
        with open_safetensors(directory / "model.safetensors", "FlipGNN") as f:
            model.load_state_dict({k: f.get_tensor(k) for k in f.keys()})
        return model
