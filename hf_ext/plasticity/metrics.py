"""What a model's weights and representations say about its plasticity, measured without training it.

Weight decay during pretraining is reported to make representations more linearly separable,
to regularize attention matrices, and to keep weights small and well spread. These functions
measure each of those on a transformers model: linear-probe accuracy of hidden states, the
norms of every head's ``W_Q W_K^T``, attention entropy, and weight norms and effective ranks.
"""

import math
from collections.abc import Iterator

import torch
from torch import nn
from torch.nn import functional as F

from ..models.layout import model_layout

SEPARATE_QUERY_KEY = (("q_proj", "k_proj"), ("query", "key"), ("q", "k"))  # Llama and most; BERT; T5
# Fused projections and how they stack their output rows: "consecutive" is all query heads, then the key heads, then
# the value heads (GPT-2's Conv1D `c_attn`, Phi-3's `qkv_proj`); "per_group" is, for each key head in turn, its query
# heads, that key head and its value head (GPT-NeoX's `query_key_value`, read as its forward views it).
FUSED_QUERY_KEY_VALUE = {"c_attn": "consecutive", "qkv_proj": "consecutive", "query_key_value": "per_group"}


def effective_rank(matrix: torch.Tensor) -> float:
    """``exp`` of the entropy of the normalised singular values (Roy & Vetterli): 1 .. min(shape)."""
    if matrix.dim() != 2:
        raise ValueError(f"effective_rank: `matrix` must be 2-D, got shape {tuple(matrix.shape)}")
    return _effective_ranks(matrix[None]).item()


def _effective_ranks(stack: torch.Tensor) -> torch.Tensor:
    """:func:`effective_rank` of each matrix of a ``(matrices, rows, columns)`` stack, in one batched SVD."""
    singular = torch.linalg.svdvals(stack.detach().float())
    total = singular.sum(-1, keepdim=True)
    p = singular / total
    entropy = -(p * p.log()).nan_to_num().sum(-1)  # 0 log 0 = 0
    return torch.where(total[:, 0] > 0, entropy.exp(), 0.0)


def _is_tuner_layer(module: nn.Module) -> bool:
    """A PEFT tuner layer (LoRA and the others): it wraps a base layer and holds adapters beside it."""
    return hasattr(module, "adapter_layer_names") and hasattr(module, "get_base_layer")


def _merged_weight(layer: nn.Module, name: str) -> torch.Tensor:
    """The weight a PEFT tuner layer's forward applies: its base weight plus each active, unmerged adapter's delta.

    ``peft``'s ``get_delta_weight`` gives the delta in the base weight's stored layout (a Conv1D's transposed); an
    adapter whose effect is not a sum of deltas (DoRA and the other LoRA variants, IA3) is refused, naming ``name``.
    """
    base = layer.get_base_layer().weight
    if layer.merged or layer.disable_adapters:  # the forward runs the base layer alone
        return base
    held = [getattr(layer, container) for container in layer.adapter_layer_names]
    adapters = [a for a in layer.active_adapters if any(a in adapters for adapters in held)]
    variants = set(getattr(layer, "lora_variant", {})) & set(adapters)
    if adapters and (variants or not hasattr(layer, "get_delta_weight")):
        raise ValueError(
            f"{name} ({type(layer).__name__}) has adapters {adapters} whose merged weight is not base + delta; "
            "merge them (`merge_and_unload()`) before measuring its weights"
        )
    return base + sum(layer.get_delta_weight(adapter) for adapter in adapters)


def _hidden_matrices(model: nn.Module) -> Iterator[torch.Tensor]:
    """Each hidden weight of ``model`` as the ``(experts, d_out, d_in)`` stack its forward applies.

    Roles come from :func:`~hf_ext.models.layout.model_layout`: embeddings, output and classification heads,
    norms and biases are left out, and a PEFT layer's base weight is read with its adapters merged in.
    """
    tuners = {id(m.get_base_layer().weight): (name, m) for name, m in model.named_modules() if _is_tuner_layer(m)}
    for name, layout in model_layout(model, trainable_only=False).items():
        if layout.role != "hidden" or layout.adapter:
            continue
        weight = model.get_parameter(name)
        if id(weight) in tuners:
            layer_name, layer = tuners[id(weight)]
            weight = _merged_weight(layer, layer_name)
        yield layout.matrices(weight.detach().float())


def weight_statistics(model: nn.Module) -> dict[str, float]:
    """Frobenius norm of all hidden weight matrices together, and their mean effective rank.

    Embeddings, heads, norms and biases are left out (roles from ``model_layout``); each expert of a mixture-of-
    experts tensor counts as one matrix (its singular values taken batched over the experts), and a PEFT model's
    weights are read merged with their adapters.
    """
    stacks = list(_hidden_matrices(model))
    if not stacks:
        raise ValueError("weight_statistics: the model has no hidden weight matrix (embeddings and heads excluded)")
    norm = math.sqrt(sum(stack.pow(2).sum().item() for stack in stacks))
    ranks = torch.cat([_effective_ranks(stack) for stack in stacks])
    return {"weight_norm": norm, "effective_rank_mean": ranks.mean().item()}


def _projection_matrix(projection: nn.Module, name: str) -> torch.Tensor:
    """The ``(d_out, d_in)`` map a projection applies: a Conv1D's weight read transposed, PEFT adapters merged in."""
    if _is_tuner_layer(projection):
        base, weight = projection.get_base_layer(), _merged_weight(projection, name)
    else:
        base, weight = projection, projection.weight
    return model_layout(base, trainable_only=False)["weight"].matrices(weight.detach().float())[0]


def _query_key_heads(attention: nn.Module, config) -> tuple[torch.Tensor, torch.Tensor]:
    """``W_Q`` as ``(heads, head_dim, hidden)`` and ``W_K`` as ``(key heads, head_dim, hidden)`` of one attention."""
    kind = type(attention).__name__
    heads = config.num_attention_heads
    key_heads = getattr(config, "num_key_value_heads", None) or heads
    separate = next((pair for pair in SEPARATE_QUERY_KEY if all(hasattr(attention, n) for n in pair)), None)
    fused = next((name for name in FUSED_QUERY_KEY_VALUE if hasattr(attention, name)), None)
    if separate is not None:
        query, key = (_projection_matrix(getattr(attention, name), f"{kind}.{name}") for name in separate)
        head_dim = query.shape[0] // heads
        where, rows = "/".join(separate), f"{query.shape[0]} + {key.shape[0]}"
        fits = (query.shape[0], key.shape[0]) == (heads * head_dim, key_heads * head_dim)
    elif fused is not None:
        weight = _projection_matrix(getattr(attention, fused), f"{kind}.{fused}")
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        where, rows = fused, str(weight.shape[0])
        fits = weight.shape[0] == (heads + 2 * key_heads) * head_dim
    else:
        raise ValueError(
            f"query_key_norms: {kind} has no query/key projections (separate "
            f"{['/'.join(pair) for pair in SEPARATE_QUERY_KEY]} or fused {list(FUSED_QUERY_KEY_VALUE)})"
        )
    if not fits or heads % key_heads:
        raise ValueError(
            f"query_key_norms: {kind}.{where} has {rows} output rows, which do not fit the "
            f"config's {heads} query heads and {key_heads} key heads of dim {head_dim}"
        )
    if separate is None:
        query, key = _split_fused(weight, FUSED_QUERY_KEY_VALUE[fused], heads, key_heads, head_dim)
    return query.reshape(heads, head_dim, -1), key.reshape(key_heads, head_dim, -1)


def _split_fused(weight, layout, heads, key_heads, head_dim) -> tuple[torch.Tensor, torch.Tensor]:
    """The query and key rows of a fused ``(q, k, v)`` projection's ``(d_out, hidden)`` map stacked as ``layout``."""
    query_rows, key_rows = heads * head_dim, key_heads * head_dim
    if layout == "consecutive":
        return weight[:query_rows], weight[query_rows : query_rows + key_rows]
    groups = weight.reshape(key_heads, heads // key_heads + 2, head_dim, -1)
    return groups[:, :-2].reshape(query_rows, -1), groups[:, -2].reshape(key_rows, -1)


def query_key_norms(attention: nn.Module, config=None) -> dict[str, float]:
    """Mean spectral and Frobenius norm over heads of ``W_Q^h (W_K^h)^T`` (hidden x hidden) of one layer.

    Separate projections (``q_proj``/``k_proj``, ``query``/``key``, T5's ``q``/``k``) are read as they are; fused ones
    (GPT-2's Conv1D ``c_attn``, Phi-3's ``qkv_proj``, GPT-NeoX's ``query_key_value``) are split by ``config``'s head
    layout (``num_attention_heads``, ``num_key_value_heads``, ``head_dim``; default ``attention.config``). Key heads
    are shared by their groups of query heads; PEFT adapters are merged in; biases are ignored. An attention whose
    projections are none of these, or do not fit the head layout, is refused naming its class.
    """
    queries, keys = _query_key_heads(attention, config if config is not None else attention.config)
    keys = keys.repeat_interleave(queries.shape[0] // keys.shape[0], dim=0)
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
