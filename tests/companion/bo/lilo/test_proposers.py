import random

import torch

from hf_ext.companion.bo.lilo import fit_preference_model, select_pairs

# Five outcomes whose true utility is their first coordinate: 4 > 3 > 2 > 1 > 0 (by index order below).
OUTCOMES = torch.tensor([[0.1, 0.5], [0.3, 0.2], [0.5, 0.9], [0.7, 0.4], [0.9, 0.6]], dtype=torch.float64)


def _true_comparisons():
    return [(j, i) for i in range(5) for j in range(i + 1, 5)]  # (winner, loser): the higher index wins


def test_pairwise_gp_fitted_on_known_preferences_ranks_the_outcomes():
    model = fit_preference_model(OUTCOMES, _true_comparisons())
    with torch.no_grad():
        utility = model.posterior(OUTCOMES).mean.squeeze(-1)
    assert utility.argsort().tolist() == [0, 1, 2, 3, 4]
    assert model.comparisons.shape == (10, 2)


def test_eubo_picks_the_pairs_whose_better_option_is_best():
    model = fit_preference_model(OUTCOMES, [(4, 0), (3, 1), (4, 1), (3, 0)])
    chosen = select_pairs(model, OUTCOMES, labelled={(0, 4)}, k=2, rng=random.Random(0))
    assert len(chosen) == 2 and (0, 4) not in chosen
    assert all(4 in pair or 3 in pair for pair in chosen)  # the pairs that contain a likely best option
    with torch.no_grad():  # and they are the top-EUBO ones, by brute force
        mean = model.posterior(OUTCOMES).mean.squeeze(-1)
    assert max(mean[list(pair)].max() for pair in chosen) == mean.max()


def test_without_a_model_pairs_are_random_but_seeded_and_never_repeat_a_label():
    first = select_pairs(None, OUTCOMES, labelled={(0, 1)}, k=3, rng=random.Random(5))
    assert first == select_pairs(None, OUTCOMES, labelled={(0, 1)}, k=3, rng=random.Random(5))
    assert len(set(first)) == 3 and (0, 1) not in first
    assert len(select_pairs(None, OUTCOMES[:3], labelled={(0, 1), (0, 2)}, k=5, rng=random.Random(0))) == 1
