"""What a model's weights and representations say about its plasticity, measured without training it.

Weight decay during pretraining is reported to make representations more linearly separable,
to regularize attention matrices, and to keep weights small and well spread. These functions
measure each of those on a transformers model: linear-probe accuracy of hidden states, the
norms of every head's ``W_Q W_K^T``, attention entropy, and weight norms and effective ranks.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


def effective_rank(matrix: torch.Tensor) -> float:
    """``exp`` of the entropy of the normalised singular values (Roy & Vetterli): 1 .. min(shape)."""
    singular = torch.linalg.svdvals(matrix.detach().float())
    total = singular.sum()
    if total == 0:
        return 0.0
    p = singular / total
    p = p[p > 0]
    return math.exp(-(p * p.log()).sum().item())


def weight_statistics(model: nn.Module) -> dict[str, float]:
    """Frobenius norm of all weight matrices together, and their mean effective rank."""
    matrices = [p for name, p in model.named_parameters() if p.dim() == 2 and "embed" not in name]
    if not matrices:
        raise ValueError("weight_statistics: the model has no 2-D weight matrix outside the embeddings")
    norm = math.sqrt(sum(p.detach().float().pow(2).sum().item() for p in matrices))
    ranks = [effective_rank(p) for p in matrices]
    return {"weight_norm": norm, "effective_rank_mean": sum(ranks) / len(ranks)}


def query_key_norms(attention: nn.Module) -> dict[str, float]:
    """Mean spectral and Frobenius norm over heads of ``W_Q^h (W_K^h)^T`` (hidden x hidden) of one layer.

    Works with Llama-style attention (``q_proj``/``k_proj``, grouped key heads) and BERT-style
    (``query``/``key``); biases are ignored.
    """
    query = getattr(attention, "q_proj", None) or getattr(attention, "query", None)
    key = getattr(attention, "k_proj", None) or getattr(attention, "key", None)
    if query is None or key is None:
        raise ValueError(f"query_key_norms: {type(attention).__name__} has no q_proj/k_proj or query/key")
    config = attention.config
    num_heads = config.num_attention_heads
    num_key_heads = getattr(config, "num_key_value_heads", None) or num_heads
    head_dim = query.weight.shape[0] // num_heads
    queries = query.weight.detach().float().view(num_heads, head_dim, -1)
    keys = key.weight.detach().float().view(num_key_heads, head_dim, -1)
    keys = keys.repeat_interleave(num_heads // num_key_heads, dim=0)
    products = queries.transpose(1, 2) @ keys  # (heads, hidden, hidden)
    spectral = torch.linalg.matrix_norm(products, ord=2)
    frobenius = torch.linalg.matrix_norm(products)
    return {"qk_spectral_norm": spectral.mean().item(), "qk_frobenius_norm": frobenius.mean().item()}


def attention_entropy(attentions: torch.Tensor, attention_mask: torch.Tensor | None = None) -> float:
    """Mean entropy (nats) of the attention rows of one layer, ``attentions`` (batch, heads, query, key).

    Padded query positions (``attention_mask`` 0) do not count.
    """
    probabilities = attentions.float().clamp_min(1e-12)
    entropy = -(attentions.float() * probabilities.log()).sum(-1)  # (batch, heads, query)
    if attention_mask is None:
        return entropy.mean().item()
    weights = attention_mask[:, None, :].to(entropy.dtype).expand_as(entropy)
    return ((entropy * weights).sum() / weights.sum()).item()


def linear_probe_accuracy(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    test_features: torch.Tensor,
    test_labels: torch.Tensor,
    l2: float = 1e-3,
    max_iter: int = 200,
) -> float:
    """Test accuracy of a multinomial logistic regression fit on the train split (standardised features).

    An L2-regularised linear classifier fit to convergence with L-BFGS: how linearly separable
    the classes are in these features. Not scikit-learn's ``LogisticRegression`` (the same model with
    ``solver="lbfgs"``): scikit-learn is no dependency of hf-ext, and the probe runs inside training
    callbacks on the hidden states as torch tensors.
    """
    if len(train_features) != len(train_labels) or len(test_features) != len(test_labels):
        raise ValueError("linear_probe_accuracy: features and labels must have the same number of rows")
    if len(train_labels) == 0 or len(test_labels) == 0:
        raise ValueError("linear_probe_accuracy: both splits need at least one example")
    mean, std = train_features.mean(0), train_features.std(0).clamp_min(1e-6)
    train_x, test_x = (train_features.float() - mean) / std, (test_features.float() - mean) / std
    num_classes = int(max(train_labels.max(), test_labels.max())) + 1
    weight = torch.zeros(train_x.shape[1], num_classes, requires_grad=True)
    bias = torch.zeros(num_classes, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(train_x @ weight + bias, train_labels) + l2 * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    with torch.no_grad():
        return (test_x @ weight + bias).argmax(-1).eq(test_labels).float().mean().item()
