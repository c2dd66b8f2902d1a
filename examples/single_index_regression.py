"""Learn a single-index model phi(<w, x>), direction and link, from a start negatively correlated with the truth."""

import numpy as np
import torch
from sklearn.model_selection import cross_val_score

from hf_ext.companion.single_index import SingleIndexRegressor, direction_with_overlap, gaussian_single_index

torch.set_num_threads(1)  # fits this small run faster on one thread

# x ~ N(0, I_64), y = (h2 + h3)(<w*, x>) / sqrt(2) + 0.1 noise: information exponent 2
X, y, w_star = gaussian_single_index(n=3000, d=64, link="he2+he3", noise=0.1, seed=0)
w_init = direction_with_overlap(w_star, -0.3, seed=1)

model = SingleIndexRegressor(max_degree=6, learning_rate=0.5, random_state=0)
model.fit(X, y, w_init=w_init, w_star=w_star)  # w_star only records the overlap <w_t, w*>
print(f"overlap {model.overlap_history_[0]:+.2f} -> {model.overlap_history_[-1]:+.3f} in {model.n_iter_} iterations")
print(f"link: degree {model.degree_}, ridge {model.ridge_:g}, Hermite coefficients {np.round(model.hermite_coefs_, 2)}")

scores = cross_val_score(SingleIndexRegressor(random_state=0), X, y, cv=3)
print(f"R^2 by 3-fold cross-validation: {scores.mean():.3f}")
