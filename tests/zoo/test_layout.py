"""hf_ext.models.layout reads each zoo architecture's parameters as the linear maps they are."""

import pytest
import torch
from torch import nn
from zoo_architectures import ARCHITECTURES, build

from hf_ext.models.layout import ParamLayout, model_layout


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_matrix_view_is_the_map_d_in_to_d_out_and_goes_back_to_the_stored_tensor(architecture):
    model, _ = build(architecture)
    for name, layout in model_layout(model).items():
        param = model.get_parameter(name)
        stack = layout.matrices(param)
        assert stack.shape == (layout.num_matrices, *layout.matrix_shape)
        assert torch.equal(layout.from_matrices(stack), param)


def test_gpt2_conv1d_weights_are_transposed_hidden_matrices():
    model, batch = build("gpt2")
    layout = model_layout(model)["transformer.h.0.mlp.c_fc.weight"]
    module = model.transformer.h[0].mlp.c_fc
    assert (layout.role, layout.transposed, layout.matrix_shape) == (
        "hidden",
        True,
        (module.nf, module.weight.shape[0]),
    )
    x = torch.randn(3, module.weight.shape[0])
    torch.testing.assert_close(module(x), x @ layout.matrices(module.weight)[0].T + module.bias)


@pytest.mark.parametrize("architecture", ["mixtral", "qwen2_moe", "qwen3_moe"])
def test_expert_tensors_are_stacks_of_matrices_and_the_router_a_matrix(architecture):
    model, _ = build(architecture)
    layouts = model_layout(model)
    experts = model.model.layers[0].mlp.experts
    gate_up = layouts["model.layers.0.mlp.experts.gate_up_proj"]
    assert (gate_up.role, gate_up.stacked, gate_up.num_matrices) == ("hidden", True, experts.num_experts)
    assert gate_up.matrix_shape == (2 * experts.intermediate_dim, experts.hidden_dim)
    router = layouts["model.layers.0.mlp.gate.weight"]
    assert (router.role, router.stacked) == ("hidden", False)


def test_experts_stored_transposed_are_read_transposed():
    class Experts(nn.Module):
        is_transposed = True

        def __init__(self):
            super().__init__()
            self.down_proj = nn.Parameter(torch.randn(3, 5, 7))  # (experts, in, out)

    layout = model_layout(Experts())["down_proj"]
    assert (layout.transposed, layout.matrix_shape) == (True, (7, 5))


def test_heads_embeddings_and_vectors_come_from_the_model_structure():
    bert, _ = build("bert")
    layouts = model_layout(bert)
    assert layouts["classifier.weight"].role == "head"  # get_output_embeddings() is None for a classifier
    assert layouts["bert.pooler.dense.weight"].role == "hidden"
    assert layouts["bert.embeddings.word_embeddings.weight"].role == "embedding"
    assert layouts["classifier.bias"].role == "vector"
    gpt2, _ = build("gpt2")
    assert model_layout(gpt2)["transformer.wte.weight"].role == "head"  # tied: the head's geometry


def test_peft_adapters_are_marked_and_the_frozen_base_left_out():
    model, _ = build("lora_qwen2")
    layouts = model_layout(model)
    assert layouts and all(layout.adapter for layout in layouts.values())
    every = model_layout(model, trainable_only=False)
    base = every["base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"]
    assert (base.adapter, base.role) == (False, "hidden")


def test_a_vector_is_one_row():
    layout = ParamLayout("bias", "vector", (5,))
    assert layout.matrix_shape == (1, 5) and layout.matrices(torch.arange(5.0)).shape == (1, 1, 5)


def test_a_parametrized_conv1d_weight_is_read_as_the_conv1d_it_belongs_to():
    from torch.nn.utils import parametrize

    class Identity(nn.Module):
        def forward(self, weight):
            return weight

    model, _ = build("gpt2")
    parametrize.register_parametrization(model.transformer.h[0].mlp.c_fc, "weight", Identity())
    layout = model_layout(model)["transformer.h.0.mlp.c_fc.parametrizations.weight.original"]
    assert (layout.role, layout.transposed) == ("hidden", True)


def test_stacked_expert_biases_are_vectors():
    class Experts(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_up_proj = nn.Parameter(torch.randn(3, 8, 4))
            self.gate_up_proj_bias = nn.Parameter(torch.randn(3, 8))

    layouts = model_layout(Experts())
    assert (layouts["gate_up_proj"].role, layouts["gate_up_proj_bias"].role) == ("hidden", "vector")
@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        (ParamLayout("linear", "hidden", (5, 7)), [1, 2]),
        (ParamLayout("conv1d", "hidden", (7, 5), transposed=True), [2, 1]),
        (ParamLayout("kernel", "hidden", (5, 3, 2)), [1, 2, 2]),
        (ParamLayout("experts", "hidden", (4, 5, 7), stacked=True), [0, 1, 2]),
        (ParamLayout("experts_t", "hidden", (4, 7, 5), transposed=True, stacked=True), [0, 2, 1]),
        (ParamLayout("bias", "vector", (5,)), [2]),
    ],
)
def test_matrix_axis_follows_each_stored_axis_into_the_matrices_view(layout, expected):
    """The view's axis ``k`` has the stored axis' length (or a multiple of it, for a flattened kernel)."""
    assert [layout.matrix_axis(dim) for dim in range(len(layout.shape))] == expected
    stack = layout.matrices(torch.zeros(layout.shape))
    for dim, axis in enumerate(expected):
        assert stack.shape[axis] % layout.shape[dim] == 0
