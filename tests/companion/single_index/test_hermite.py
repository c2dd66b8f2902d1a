import math

import numpy as np
import pytest
import torch
from numpy.polynomial.hermite_e import hermegauss, hermeval

from hf_ext.companion.single_index import (
    hermite_coefficients,
    hermite_derivative,
    hermite_features,
    information_exponent,
    link_coefficients,
)


def test_normalised_hermite_polynomials_are_orthonormal_under_the_standard_gaussian():
    z, weights = hermegauss(40)  # exact for polynomials of degree < 80
    basis = hermite_features(torch.from_numpy(z), 10).numpy()
    gram = (basis * (weights / math.sqrt(2 * math.pi))[:, None]).T @ basis
    np.testing.assert_allclose(gram, np.eye(11), atol=1e-10)


def test_features_are_numpys_probabilists_hermite_polynomials_over_sqrt_factorial():
    z = np.linspace(-4, 4, 17)
    features = hermite_features(torch.from_numpy(z), 6).numpy()
    for j in range(7):
        expected = hermeval(z, np.eye(7)[j]) / math.sqrt(math.factorial(j))
        np.testing.assert_allclose(features[:, j], expected, rtol=1e-12, atol=1e-12)


def test_derivative_coefficients_match_a_finite_difference():
    coefs = torch.tensor([0.3, -1.0, 0.5, 2.0, -0.7], dtype=torch.float64)
    z, eps = torch.linspace(-3, 3, 13, dtype=torch.float64), 1e-6
    numeric = (hermite_features(z + eps, 4) @ coefs - hermite_features(z - eps, 4) @ coefs) / (2 * eps)
    torch.testing.assert_close(hermite_features(z, 4) @ hermite_derivative(coefs), numeric, rtol=1e-7, atol=1e-7)


def test_quadrature_recovers_a_polynomials_coefficients_and_the_overlap_law():
    # z^3 = He_3 + 3 He_1 = sqrt(6) h_3 + 3 h_1
    np.testing.assert_allclose(hermite_coefficients(lambda z: z**3, 5), [0, 3, 0, math.sqrt(6), 0, 0], atol=1e-12)
    # E[h_3(<w, x>) h_3(<w*, x>)] = m^3, sampled
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400_000, 2))
    m = 0.6
    z, z_star = x[:, 0], m * x[:, 0] + math.sqrt(1 - m**2) * x[:, 1]
    h = hermite_features(torch.from_numpy(np.stack([z, z_star])), 3).numpy()
    assert (h[0, :, 3] * h[1, :, 3]).mean() == pytest.approx(m**3, abs=0.01)


@pytest.mark.parametrize(("link", "exponent"), [("he1", 1), ("he2", 2), ("he3", 3), ("he4", 4), ("he2+he3", 2)])
def test_information_exponent_is_the_first_nonzero_coefficient(link, exponent):
    coefs = link_coefficients(link, 6)
    assert information_exponent(coefs) == exponent
    assert np.sum(coefs**2) == pytest.approx(1.0)


def test_relu_link_is_standardised_and_has_no_third_coefficient():
    coefs = link_coefficients("relu", 6)
    assert information_exponent(coefs) == 1 and coefs[0] == pytest.approx(0, abs=5e-3)  # quadrature of a kink
    assert coefs[3] == pytest.approx(0, abs=1e-9) and 0.98 < np.sum(coefs**2) < 1  # the rest is past degree 6
    assert information_exponent([1.0, 0.0]) is None


def test_bad_names_and_degrees_are_refused():
    with pytest.raises(ValueError, match=r"`name` must be one of \['he1'"):
        link_coefficients("he5", 6)
    with pytest.raises(ValueError, match="has degree 4 > `degree` 2"):
        link_coefficients("he4", 2)
    with pytest.raises(ValueError, match="`degree` must be >= 0"):
        hermite_features(torch.zeros(3), -1)
