import numpy as np
import pytest

from hf_ext.companion.combinatorial.cam import (
    Graph,
    barabasi_albert,
    erdos_renyi,
    local_search_maxcut,
    local_search_mis,
)
from hf_ext.companion.evaluation.combinatorial.cam import (
    cut_value,
    exact_maxcut,
    exact_mis,
    greedy_maxcut,
    greedy_mis,
    iterated_local_search_mis,
    multistart_local_search,
)


def independent(graph, chosen):
    return not any(chosen[i] and chosen[j] for i, j in graph.edges.tolist())


def test_mis_references_on_a_star_and_a_random_graph():
    star = Graph(5, np.array([[0, 1], [0, 2], [0, 3], [0, 4]]))
    assert greedy_mis(star).tolist() == [False, True, True, True, True]
    # 2-improvement turns the center {0} into two leaves and then adds the free ones
    start = np.array([True, False, False, False, False])
    assert local_search_mis(star, start).sum() == 4
    graph = erdos_renyi(40, 0.2, 0)
    exact, optimal = exact_mis(graph, time_limit=30)
    greedy = greedy_mis(graph)
    search = local_search_mis(graph, greedy)
    assert optimal and all(independent(graph, s) for s in (exact, greedy, search))
    assert greedy.sum() <= search.sum() <= exact.sum()


def test_iterated_local_search_reaches_the_exact_mis_where_2_improvement_stops_short():
    graph = erdos_renyi(60, 0.15, 1)
    greedy, exact = greedy_mis(graph), exact_mis(graph, time_limit=30)[0]
    assert local_search_mis(graph, greedy).sum() == 17 and exact.sum() == 20
    found = iterated_local_search_mis(graph, greedy, max_iterations=300, seed=0)
    assert independent(graph, found) and found.sum() == exact.sum()
    # no perturbation: free insertions and (1, 2)-swaps alone, as local_search_mis; the star's center gives way
    star = Graph(5, np.array([[0, 1], [0, 2], [0, 3], [0, 4]]))
    assert iterated_local_search_mis(star, np.eye(5, dtype=bool)[0], max_iterations=0).tolist() == [0, 1, 1, 1, 1]


@pytest.mark.parametrize(
    "start, time_limit, message",
    [(np.ones(5, bool), 1.0, "`start` must be an independent set of 5 booleans"),
     (np.zeros(4, bool), 1.0, "`start` must be an independent set of 5 booleans"),
     (np.zeros(5, bool), 0.0, "`time_limit` must be > 0"),
     (np.zeros(5, bool), float("nan"), "`time_limit` must be a finite number")],
)
def test_iterated_local_search_refuses_bad_input_by_name(start, time_limit, message):
    star = Graph(5, np.array([[0, 1], [0, 2], [0, 3], [0, 4]]))
    with pytest.raises(ValueError, match=f"iterated_local_search_mis: {message}"):
        iterated_local_search_mis(star, start, time_limit=time_limit)


def test_maxcut_references_on_a_triangle_and_a_ba_graph():
    triangle = Graph(3, np.array([[0, 1], [1, 2], [0, 2]]))
    side, optimal = exact_maxcut(triangle)
    assert optimal and cut_value(triangle, side) == 2
    graph = barabasi_albert(20, 2, 0)
    exact, optimal = exact_maxcut(graph, time_limit=30)
    greedy = greedy_maxcut(graph)
    assert optimal and cut_value(graph, greedy) <= cut_value(graph, local_search_maxcut(graph, greedy))
    assert cut_value(graph, local_search_maxcut(graph, greedy)) <= cut_value(graph, exact)


@pytest.mark.parametrize("problem", ["mis", "maxcut"])
def test_multistart_local_search_keeps_the_best_start(problem):
    graph = erdos_renyi(60, 0.15, 1)
    value = (lambda chosen: chosen.sum()) if problem == "mis" else (lambda side: cut_value(graph, side))
    once, many = (multistart_local_search(problem, graph, starts, seed=3) for starts in (1, 16))
    assert value(once) <= value(many)  # the first of the 16 starts is the single one
    if problem == "mis":  # a maximal independent set where 2-improvement from greedy stops at 17 of the exact 20
        assert independent(graph, many) and all(
            any(many[u] for u in graph.neighbours()[v]) for v in np.flatnonzero(~many)
        )
        assert value(many) > 17


def test_empty_graph_references():
    empty = Graph(0, np.zeros((0, 2)))
    assert greedy_mis(empty).size == 0 and exact_mis(empty)[0].size == 0 and exact_mis(empty)[1]
    assert exact_maxcut(empty)[0].size == 0 and exact_maxcut(empty)[1]


STAR = Graph(5, np.array([[0, 1], [0, 2], [0, 3], [0, 4]]))


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"problem": "tsp"}, ValueError, "`problem` must be 'mis' or 'maxcut', got 'tsp'"),
        ({"starts": 0}, ValueError, "`starts` must be an integer >= 1, got 0"),
        ({"starts": 2.0}, TypeError, "`starts` must be an integer >= 1, got 2.0"),  # was range(2.0) in a generator
        ({"starts": True}, TypeError, "`starts` must be an integer >= 1, got True"),  # was one start
        ({"starts": None}, TypeError, "`starts` must be an integer >= 1, got None"),
        ({"seed": -1}, ValueError, "`seed` must be an integer >= 0, got -1"),  # was numpy's "expected non-negative"
        ({"seed": 1.5}, TypeError, "`seed` must be an integer >= 0, got 1.5"),
        ({"seed": None}, TypeError, "`seed` must be an integer >= 0, got None"),  # drew starts no rerun reproduces
        ({"graph": np.ones((5, 5))}, TypeError, r"`graph` must be a hf_ext.companion.combinatorial.cam.Graph"),
    ],
)
def test_multistart_local_search_refuses_bad_arguments_by_name(arguments, error, message):
    settings = {"problem": "mis", "graph": STAR, "starts": 2, "seed": 0} | arguments
    with pytest.raises(error, match=f"multistart_local_search: {message}"):
        multistart_local_search(**settings)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"time_limit": "1"}, TypeError, "`time_limit` must be a number, got '1'"),
        ({"time_limit": None}, TypeError, "`time_limit` must be a number, got None"),
        ({"time_limit": True}, TypeError, "`time_limit` must be a number, got True"),  # was one second
        ({"time_limit": -1}, ValueError, "`time_limit` must be > 0 seconds, got -1"),
        ({"max_iterations": 1.5}, TypeError, "`max_iterations` must be an integer >= 0, got 1.5"),  # was taken
        ({"max_iterations": True}, TypeError, "`max_iterations` must be an integer >= 0, got True"),
        ({"max_iterations": -1}, ValueError, "`max_iterations` must be an integer >= 0, got -1"),
        ({"seed": -1}, ValueError, "`seed` must be an integer >= 0, got -1"),
        ({"seed": "3"}, TypeError, "`seed` must be an integer >= 0, got '3'"),
        ({"seed": None}, TypeError, "`seed` must be an integer >= 0, got None"),
        ({"graph": "star"}, TypeError, r"`graph` must be a hf_ext\.companion\.combinatorial\.cam\.Graph .*'star'"),
    ],
)
def test_iterated_local_search_refuses_bad_arguments_by_name(arguments, error, message):
    settings = {"graph": STAR, "start": np.zeros(5, bool), "time_limit": 1.0, "max_iterations": 3, "seed": 0}
    with pytest.raises(error, match=f"iterated_local_search_mis: {message}"):
        iterated_local_search_mis(**settings | arguments)


def test_a_networkx_graph_is_refused_with_the_way_to_ours():
    networkx = pytest.importorskip("networkx")
    with pytest.raises(TypeError, match=r"`graph` must be a .*Graph\(num_nodes, edges\).*got .*networkx"):
        multistart_local_search("mis", networkx.path_graph(4), 2)
