import numpy as np
import pytest

from hf_ext.companion.combinatorial.set_cover import SetCoverInstance, grow_neighbourhood, instability


def test_instability_counts_bit_flips_across_the_trajectory():
    trajectory = np.array(
        [
            [0.9, 0.1, 0.2, 0.6],
            [0.9, 0.8, 0.3, 0.4],
            [0.95, 0.2, 0.1, 0.7],
            [0.99, 0.9, 0.45, 0.3],
        ]
    )
    score = instability(trajectory)
    # flips over the 3 transitions: column 0 none, column 1 three, column 2 none, column 3 three
    assert np.round(score, 2).tolist() == [0.0, 1.0, 0.0, 1.0]
    # ties broken by distance from a confident bit: column 2 (about 0.25 from 0.5) above column 0 (about 0.45)
    assert score[2] > score[0] and score[3] > score[1]


def test_instability_refuses_a_single_step_or_non_probabilities():
    with pytest.raises(ValueError, match="timesteps >= 2"):
        instability(np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        instability(np.array([[0.0, 1.5], [0.0, 0.0]]))


def test_neighbourhood_grows_connected_from_the_most_unstable_region():
    # a path of columns 0-1-2-3-4 through rows: column j covers rows j and j + 1; column 5 is isolated on row 6
    matrix = np.zeros((7, 6), dtype=int)
    for j in range(5):
        matrix[j, j] = matrix[j + 1, j] = 1
    matrix[6, 5] = 1
    instance = SetCoverInstance(np.ones(6), matrix)
    scores = np.array([0.0, 0.1, 0.9, 0.2, 0.8, 1.0])
    taken = grow_neighbourhood(instance, scores, 3, start=2)
    assert taken.tolist() == [2, 3, 4]  # 3 beats 1, then 4 (0.8) beats 1; column 5 is not connected
