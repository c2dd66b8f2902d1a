import numpy as np

from hf_ext.companion.combinatorial.cam import barabasi_albert, erdos_renyi, rb_graph


def test_generators_are_deterministic_by_seed_and_differ_across_seeds():
    for make in (lambda s: erdos_renyi(50, 0.1, s), lambda s: barabasi_albert(50, 3, s), lambda s: rb_graph(8, 4, s)):
        assert np.array_equal(make(0).edges, make(0).edges)
        assert not np.array_equal(make(0).edges, make(1).edges)


def test_generator_shapes():
    er = erdos_renyi(200, 0.1, 0)
    assert abs(len(er.edges) / (200 * 199 / 2) - 0.1) < 0.01
    ba = barabasi_albert(100, 3, 0)
    assert len(ba.edges) == 3 * 97 and ba.degrees.min() >= 3
    rb = rb_graph(10, 5, 0)
    assert rb.num_nodes == 50
    cliques = {(i // 5, j // 5) for i, j in rb.edges.tolist() if i // 5 == j // 5}
    assert len(cliques) == 10  # every variable's values form a clique: an MIS takes at most one per variable
