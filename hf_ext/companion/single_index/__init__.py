"""Single-index models ``f(x) = phi(<w, x>)``: a direction on the sphere and a link in a Hermite RKHS, learned jointly.

Needs the ``[sklearn]`` extra (``pip install hf-ext[sklearn]``): :class:`SingleIndexRegressor` is a
scikit-learn estimator with a torch core. The baseline it is judged against is in
:mod:`hf_ext.companion.evaluation.single_index`.
"""

from .data import LINKS, direction_with_overlap, evaluate_link, gaussian_single_index, link_coefficients
from .estimator import NonGaussianInputWarning, SingleIndexRegressor, warn_if_not_gaussian
from .hermite import hermite_coefficients, hermite_derivative, hermite_features, information_exponent

__all__ = [
    "LINKS",
    "NonGaussianInputWarning",
    "SingleIndexRegressor",
    "direction_with_overlap",
    "evaluate_link",
    "gaussian_single_index",
    "hermite_coefficients",
    "hermite_derivative",
    "hermite_features",
    "information_exponent",
    "link_coefficients",
    "warn_if_not_gaussian",
]
