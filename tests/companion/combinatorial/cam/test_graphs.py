import numpy as np
import pytest

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


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: erdos_renyi(10, 1.5, 0), r"erdos_renyi: `p` must be a probability in \[0, 1\], got 1.5"),
        (lambda: erdos_renyi(10, -0.1, 0), r"erdos_renyi: `p` must be a probability in \[0, 1\], got -0.1"),
        (lambda: erdos_renyi(10, float("nan"), 0), "erdos_renyi: `p` must be a finite number, got nan"),
        (lambda: erdos_renyi(10, float("inf"), 0), "erdos_renyi: `p` must be a finite number, got inf"),
        (lambda: barabasi_albert(5, 0, 0), r"barabasi_albert: `m` must be an integer in 1..4, got 0"),
        (lambda: barabasi_albert(5, 5, 0), r"barabasi_albert: `m` must be an integer in 1..4, got 5"),
        (lambda: rb_graph(1, 3, 0), "rb_graph: `num_vars` must be an integer >= 2, got 1"),
        (lambda: rb_graph(4, 3, 0, p=1.5), r"rb_graph: `p` must be a probability in \[0, 1\], got 1.5"),
        (lambda: rb_graph(4, 3, 0, r=float("nan")), "rb_graph: `r` must be a finite number, got nan"),
    ],
)
def test_generators_refuse_bad_parameters_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(("make", "second"), [(erdos_renyi, 0.1), (barabasi_albert, 3), (rb_graph, 3)])
@pytest.mark.parametrize(
    ("seed", "error"), [("a", TypeError), (-1, ValueError), (1.5, TypeError), (None, TypeError), (True, TypeError)]
)
def test_generators_refuse_a_seed_that_is_not_an_integer_at_least_0(make, second, seed, error):
    """Issue 72: ``erdos_renyi(10, 0.1, "a")`` failed inside numpy's SeedSequence, naming no argument, and a None
    seed drew a graph no rerun could reproduce."""
    with pytest.raises(error, match=rf"{make.__name__}: `seed` must be an integer >= 0, got {seed!r}"):
        make(10, second, seed)


def test_generators_refuse_a_probability_that_is_not_a_number():
    with pytest.raises(TypeError, match=r"erdos_renyi: `p` must be a number, got '0.1' \(str\)"):
        erdos_renyi(10, "0.1", 0)
    with pytest.raises(TypeError, match=r"rb_graph: `r` must be a number, got '0.8' \(str\)"):
        rb_graph(4, 3, 0, r="0.8")
