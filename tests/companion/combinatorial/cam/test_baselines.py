import numpy as np

from hf_ext.companion.combinatorial.cam import (
    Graph,
    barabasi_albert,
    cut_value,
    erdos_renyi,
    exact_maxcut,
    exact_mis,
    greedy_maxcut,
    greedy_mis,
    local_search_maxcut,
    local_search_mis,
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


def test_maxcut_references_on_a_triangle_and_a_ba_graph():
    triangle = Graph(3, np.array([[0, 1], [1, 2], [0, 2]]))
    side, optimal = exact_maxcut(triangle)
    assert optimal and cut_value(triangle, side) == 2
    graph = barabasi_albert(20, 2, 0)
    exact, optimal = exact_maxcut(graph, time_limit=30)
    greedy = greedy_maxcut(graph)
    assert optimal and cut_value(graph, greedy) <= cut_value(graph, local_search_maxcut(graph, greedy))
    assert cut_value(graph, local_search_maxcut(graph, greedy)) <= cut_value(graph, exact)


def test_empty_graph_references():
    empty = Graph(0, np.zeros((0, 2)))
    assert greedy_mis(empty).size == 0 and exact_mis(empty)[0].size == 0 and exact_mis(empty)[1]
    assert exact_maxcut(empty)[0].size == 0 and exact_maxcut(empty)[1]
