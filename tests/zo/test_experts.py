import pytest
import torch
import transformers as tf

from hf_ext.zo.experts import moe_matrices, routed_rows
from hf_ext.zo.subspace import activation_subspace, expert_subspaces


def _projector(basis: torch.Tensor) -> torch.Tensor:
    return basis @ basis.T


def test_each_expert_gets_the_subspace_its_rows_alone_would_get():
    """Expert e's basis, batched over experts, spans what activation_subspace finds on e's rows as a 2-D layer."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(20, 3, generator=generator) @ torch.randn(3, 16, generator=generator)  # rank 3
    routing = torch.randint(0, 3, (20, 2), generator=generator)
    rows, counts = routed_rows(hidden, routing, num_experts=3, row_mask=None, max_rows=64)
    bases = expert_subspaces(rows, counts, rank=3, power_iterations=2, seed=5)
    assert bases.shape == (3, 16, 3)
    for expert in range(3):
        own = hidden[(routing == expert).any(1)]
        assert counts[expert] == len(own) >= 3
        alone = activation_subspace(own, 3, 2, 64, seed=9)
        torch.testing.assert_close(_projector(bases[expert]), _projector(alone), atol=1e-5, rtol=0)


def test_an_expert_with_fewer_rows_than_the_rank_spans_only_them_and_one_without_rows_is_zero():
    generator = torch.Generator().manual_seed(1)
    hidden = torch.randn(3, 8, generator=generator)
    routing = torch.tensor([[0], [0], [2]])  # expert 1 gets no token
    rows, counts = routed_rows(hidden, routing, num_experts=3, row_mask=None, max_rows=64)
    bases = expert_subspaces(rows, counts, rank=4, power_iterations=1, seed=0)
    assert counts.tolist() == [2, 0, 1]
    assert not bases[1].any() and not bases[0][:, 2:].any() and not bases[2][:, 1:].any()
    for expert, own in ((0, hidden[:2]), (2, hidden[2:])):
        span = torch.linalg.svd(own, full_matrices=False).Vh
        used = bases[expert][:, : len(own)]
        torch.testing.assert_close(_projector(used), span.T @ span, atol=1e-5, rtol=0)


def test_routed_rows_keeps_each_experts_tokens_in_order_drops_padding_and_spaces_long_runs_evenly():
    hidden = torch.arange(10.0)[:, None].repeat(1, 2)  # row t holds t
    routing = torch.tensor([[0, 1]] * 9 + [[1, 4]])  # 4: expert parallelism's sentinel, no expert
    mask = torch.ones(10, dtype=torch.bool)
    mask[3] = False
    rows, counts = routed_rows(hidden, routing, num_experts=2, row_mask=mask, max_rows=4)
    assert counts.tolist() == [4, 4]
    expert_0 = [0.0, 1.0, 2.0, 4.0, 5.0, 6.0, 7.0, 8.0]  # tokens routed to expert 0, padding dropped
    spaced = [expert_0[i] for i in torch.linspace(0, 7, 4).round().long()]  # activation_subspace's spacing
    assert rows[0, :, 0].tolist() == spaced
    assert rows[1, :, 0].tolist() == [0.0, 4.0, 6.0, 9.0]
    few, few_counts = routed_rows(hidden[:3], routing[:3], num_experts=3, row_mask=None, max_rows=4)
    assert few_counts.tolist() == [3, 3, 0] and not few[2].any()


TINY = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 32}


@pytest.mark.parametrize(
    "build",
    [
        lambda: tf.MixtralForCausalLM(tf.MixtralConfig(intermediate_size=32, num_local_experts=4, **TINY)),
        lambda: tf.Qwen2MoeForCausalLM(
            tf.Qwen2MoeConfig(num_experts=4, moe_intermediate_size=16, shared_expert_intermediate_size=16, **TINY)
        ),
    ],
    ids=["mixtral", "qwen2_moe"],
)
def test_moe_matrices_are_the_routers_and_the_expert_tensors(build):
    model = build()
    found = moe_matrices(model)
    prefix = "model.layers.0.mlp"
    assert sorted(found) == [f"{prefix}.experts.down_proj", f"{prefix}.experts.gate_up_proj", f"{prefix}.gate.weight"]
    assert found[f"{prefix}.gate.weight"] is model.get_submodule(f"{prefix}.gate")
