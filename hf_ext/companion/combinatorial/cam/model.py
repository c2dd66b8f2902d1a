"""The network: a light message-passing GNN giving each node's flip logit from state, time and degree.

Plain torch (a sparse matrix product per layer): PyTorch Geometric would be one more dependency for three layers.
"""

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from hf_ext._files import open_safetensors, read_json
from hf_ext._validation import check_count

from .config import check_aggregation
from .graphs import GraphBatch
from .problems import check_problem


def standardize_per_graph(values: torch.Tensor, batch: GraphBatch, eps: float = 1e-5) -> torch.Tensor:
    """``values`` (``(B, N, F)``) less their mean over each graph's nodes, over its standard deviation: graphs of
    a batch do not see each other."""
    b, _, f = values.shape
    graph_of = batch.graph_of
    nodes = torch.bincount(graph_of, minlength=batch.num_graphs).clamp(min=1).float()[None, :, None]
    mean = values.new_zeros(b, batch.num_graphs, f).index_add_(1, graph_of, values) / nodes
    centred = values - mean[:, graph_of]
    variance = values.new_zeros(b, batch.num_graphs, f).index_add_(1, graph_of, centred**2) / nodes
    return centred / (variance[:, graph_of] + eps).sqrt()


class FlipGNN(nn.Module):
    """Per-node flip logits ``(B, N)`` for ``B`` states ``x`` at times ``t`` in [0, 1].

    ``problem``: the problem the network is built and trained for (set by ``initial_model`` and ``train``; saved with
    it), which ``solve`` and ``train`` hold it to; ``None`` (a bare network, an older checkpoint) is held to none.
    """

    def __init__(self, hidden: int = 32, layers: int = 3, aggregation: str = "mean", problem: str | None = None):
        super().__init__()
        check_count("FlipGNN", "hidden", hidden, 1)
        check_count("FlipGNN", "layers", layers, 1)
        check_aggregation("FlipGNN", aggregation)
        if problem is not None:
            check_problem("FlipGNN", problem)
        self.hidden, self.num_layers, self.aggregation, self.problem = hidden, layers, aggregation, problem
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
        for layer in self.layers:
            h = h + layer(torch.cat([h, self.neighbours(batch, h)], -1))
        return self.head(h).squeeze(-1)

    def neighbours(self, batch: GraphBatch, h: torch.Tensor) -> torch.Tensor:
        """The message each node gets from its neighbours' features ``h`` (``(B, N, hidden)``), by ``aggregation``:
        ``mean``, or ``normalized``: their sum over the square root of the degree, standardised over each graph's
        nodes (per state and feature). On dense graphs one set neighbour moves the mean of about a hundred by 1/100,
        a scale the layers barely see; standardised, it moves the message by about its spread (docs/results/cam.md,
        *Dense graphs*)."""
        b, n, _ = h.shape
        flat = h.transpose(0, 1).reshape(n, b * self.hidden)
        total = torch.sparse.mm(batch.adjacency, flat).reshape(n, b, self.hidden).transpose(0, 1)
        degrees = batch.degrees.clamp(min=1)[None, :, None]
        if self.aggregation == "mean":
            return total * (1 / degrees)  # the reciprocal, as before this option: the mean path's numbers to the bit
        return standardize_per_graph(total / degrees.sqrt(), batch)

    def save_pretrained(self, directory: str | Path) -> None:
        """``config.json`` and ``model.safetensors`` in ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = {"hidden": self.hidden, "layers": self.num_layers, "aggregation": self.aggregation}
        config |= {"problem": self.problem} if self.problem is not None else {}
        (directory / "config.json").write_text(json.dumps(config))
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(directory / "model.safetensors"))

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> "FlipGNN":
        directory = Path(directory)
        config = read_json(directory / "config.json", "FlipGNN")
        model = cls(**config)
        with open_safetensors(directory / "model.safetensors", "FlipGNN") as f:
            model.load_state_dict({k: f.get_tensor(k) for k in f.keys()})
        return model


def check_trained_for(owner: str, model: nn.Module, problem: str) -> None:
    """Refuse ``model`` when it was trained for another problem than ``problem``: its flip logits would follow the
    other problem's energy, and a solution decoded from them looks like any other."""
    trained_for = getattr(model, "problem", None)
    if trained_for is not None and trained_for != problem:
        raise ValueError(
            f"{owner}: the model was trained for {trained_for!r}, not {problem!r}; train one for {problem!r} "
            f"(CAMConfig(problem={problem!r}))"
        )
