import json

import numpy as np
import pytest
import torch

from hf_ext.companion.combinatorial.cam import CAMConfig, FlipGNN, Graph, batch_graphs, erdos_renyi, initial_model
from hf_ext.companion.combinatorial.cam.model import standardize_per_graph


def logits_of(model, graphs, states, t):
    return model(batch_graphs(graphs), torch.cat(states, 1), t)


@pytest.mark.parametrize("aggregation", ["mean", "normalized"])
def test_a_graph_gets_the_same_logits_alone_and_in_a_batch(aggregation):
    """The normalized messages are standardised per graph: the other graphs of a batch must not shift them."""
    torch.manual_seed(0)
    model = FlipGNN(8, 2, aggregation)
    graphs = [erdos_renyi(30, 0.3, 0), erdos_renyi(12, 0.6, 1), Graph(1, np.zeros((0, 2)))]
    states = [torch.randint(0, 2, (3, g.num_nodes)).float() for g in graphs]
    t = torch.tensor([0.0, 0.5, 0.9])
    together = logits_of(model, graphs, states, t)
    alone = torch.cat([logits_of(model, [g], [x], t) for g, x in zip(graphs, states, strict=True)], 1)
    torch.testing.assert_close(together, alone)


def test_normalized_messages_have_zero_mean_and_unit_spread_over_each_graph():
    batch = batch_graphs([erdos_renyi(40, 0.2, 0), erdos_renyi(25, 0.5, 1)])
    values = torch.randn(2, batch.num_nodes, 3) * torch.tensor([1.0, 5.0, 0.5]) + 7
    standardized = standardize_per_graph(values, batch)
    for start, stop in zip(batch.offsets[:-1], batch.offsets[1:], strict=True):
        part = standardized[:, start:stop]
        torch.testing.assert_close(part.mean(1), torch.zeros(2, 3), atol=1e-4, rtol=0)
        torch.testing.assert_close(part.var(1, unbiased=False), torch.ones(2, 3), atol=1e-3, rtol=0)


def test_normalized_aggregation_puts_a_set_neighbour_on_the_scale_of_one():
    """ER(700, 0.15), 1% of nodes set: a node's mean over its ~100 neighbours moves by about 1/degree when one of
    them is set, a scale the layers barely see at their initialisation; the normalized message moves by more than
    its own spread over the graph."""
    graph = erdos_renyi(700, 0.15, 0)
    batch = batch_graphs([graph])
    x = torch.zeros(1, 700)
    x[0, torch.randperm(700, generator=torch.Generator().manual_seed(0))[:7]] = 1
    set_neighbours = torch.sparse.mm(batch.adjacency, x.T).T[0]
    h = x[..., None]  # the state as the one feature
    gaps = {}
    for aggregation in ("mean", "normalized"):
        message = FlipGNN(1, 1, aggregation).neighbours(batch, h)[0, :, 0]
        gaps[aggregation] = (message[set_neighbours > 0].mean() - message[set_neighbours == 0].mean()).item()
    assert gaps["mean"] < 0.02
    assert gaps["normalized"] > 1.0


@pytest.mark.parametrize(
    ("kwargs", "error"), [({"hidden": 0}, ValueError), ({"hidden": True}, TypeError), ({"layers": True}, TypeError)]
)
def test_a_width_or_depth_that_is_not_an_integer_at_least_one_is_refused(kwargs, error):
    """Issue 72: ``layers=True`` built one layer, ``hidden=True`` failed inside torch naming nothing."""
    name, value = next(iter(kwargs.items()))
    with pytest.raises(error, match=f"FlipGNN: `{name}` must be an integer >= 1, got {value}"):
        FlipGNN(**kwargs)


def test_bad_aggregation_names_the_field():
    with pytest.raises(ValueError, match=r"CAMConfig: `aggregation` must be one of \['mean', 'normalized'\]"):
        CAMConfig(aggregation="sum")
    with pytest.raises(ValueError, match=r"FlipGNN: `aggregation` must be one of"):
        FlipGNN(4, 1, "max")


def test_an_unset_aggregation_is_the_problems_own():
    """MIS's ER graphs have a hundred neighbours a node, which the mean blurs; max-cut's BA graphs have few, and
    there the two were level; a set ``aggregation`` wins."""
    assert initial_model(CAMConfig(problem="mis", hidden=4, layers=1)).aggregation == "normalized"
    assert initial_model(CAMConfig(problem="maxcut", hidden=4, layers=1)).aggregation == "mean"
    assert initial_model(CAMConfig(problem="mis", hidden=4, layers=1, aggregation="mean")).aggregation == "mean"


def test_aggregation_survives_save_and_load_and_an_older_checkpoint_is_mean(tmp_path):
    model = initial_model(CAMConfig(hidden=4, layers=1, aggregation="normalized"))
    model.save_pretrained(tmp_path)
    assert FlipGNN.from_pretrained(tmp_path).aggregation == "normalized"
    (tmp_path / "config.json").write_text(json.dumps({"hidden": 4, "layers": 1}))
    assert FlipGNN.from_pretrained(tmp_path).aggregation == "mean"
