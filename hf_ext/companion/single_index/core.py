"""The torch core of ``SingleIndexRegressor``: kernel ridge for the link, Riemannian steps for the direction.

The link lives in the RKHS of ``k(s, t) = sum_{j <= J} lambda_j h_j(s) h_j(t)`` with ``lambda_j = (1 + j)^-decay``
and ``h_j`` the normalised Hermite polynomials, orthonormal under the N(0, 1) law of ``z = <w, x>``. That
space is the span of ``h_0..h_J`` with ``||phi||^2 = sum_j c_j^2 / lambda_j``, so kernel ridge regression on
``z_i`` is a ridge regression on the Hermite features with penalty ``ridge * c_j^2 / lambda_j``: a
``(J+1) x (J+1)`` solve instead of an ``n x n`` one. Each iteration

    phi:  c <- c + link_step * (c_KRR(w) - c)            (J = the largest degree, ridge chosen on validation rows)
    w:    g = (1/n) sum_i (phi(z_i) - y_i) phi'(z_i) x_i,   w <- normalise(w - lr / max(1, kappa) (I - w w^T) g)

with ``kappa = mean(phi'(z_i)^2)``, the loss's curvature along the sphere near the optimum: without that cap
a steep link oscillates around ``w*`` (he2 + he3 at lr 0.5 reached ``|m| = 0.9998`` and fell back to 0.995),
while early on, where ``phi`` is still small, the step is ``lr`` itself. ``link_step / lr`` is the ratio of
the link's time scale to the direction's (``link_step = 1``: the link is refitted exactly at every step,
alternating minimisation). The truncation degree is chosen by validation only
for the final link: while the overlap ``m`` is small, a coefficient ``c_k m^k`` is below the noise and a
validated degree drops it, which stalls the direction (an exponent-4 link from ``m = -0.3`` at d = 128 stayed
at ``|m| = 0.64`` with the degree chosen at each step, and passed 0.9 with the largest degree).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .hermite import hermite_derivative, hermite_features


def rkhs_weights(degree: int, decay: float, dtype=torch.float64) -> Tensor:
    """The kernel's eigenvalues ``lambda_j = (1 + j)^-decay`` for ``j <= degree``: higher degrees cost more norm."""
    return (1.0 + torch.arange(degree + 1, dtype=dtype)) ** -decay


def kernel_ridge(features: Tensor, y: Tensor, ridge: float, weights: Tensor) -> Tensor:
    """Hermite coefficients minimising ``mean((features @ c - y)^2) + ridge * sum(c^2 / weights)``."""
    gram = features.T @ features / len(y) + ridge * torch.diag(1 / weights)
    return torch.linalg.solve(gram, features.T @ y / len(y))


@dataclass
class LinkFit:
    """A fitted link: its coefficients (padded with zeros to the largest candidate degree), degree and ridge."""

    coefs: Tensor
    degree: int
    ridge: float


def select_link(
    z_fit: Tensor, y_fit: Tensor, z_val: Tensor, y_val: Tensor, degrees: Sequence[int], ridges: Sequence[float], decay
) -> LinkFit:
    """Kernel ridge of ``y`` on ``z = <w, x>`` for every (degree, ridge), kept by the lowest validation error."""
    top = max(degrees)
    f_fit, f_val = hermite_features(z_fit, top), hermite_features(z_val, top)
    best = None
    for degree in degrees:
        weights = rkhs_weights(degree, decay, z_fit.dtype)
        for ridge in ridges:
            coefs = kernel_ridge(f_fit[:, : degree + 1], y_fit, ridge, weights)
            error = (f_val[:, : degree + 1] @ coefs - y_val).square().mean().item()
            if best is None or error < best[0]:
                best = (error, coefs, degree, ridge)
    _, coefs, degree, ridge = best
    return LinkFit(torch.cat([coefs, coefs.new_zeros(top - degree)]), degree, ridge)


def riemannian_gradient(w: Tensor, X: Tensor, y: Tensor, coefs: Tensor) -> tuple[Tensor, float, float]:
    """``(I - w w^T) grad_w`` of the half mean squared error of ``phi(<w, x>)``, that loss, and ``mean(phi'(z)^2)``.

    The last is the loss's curvature along the sphere at the optimum (``sum_j j c_j^2`` under the Gaussian).
    """
    features = hermite_features(X @ w, len(coefs) - 1)
    residual = features @ coefs - y
    slope = features @ hermite_derivative(coefs)
    grad = X.T @ (residual * slope) / len(y)
    return grad - (w @ grad) * w, 0.5 * residual.square().mean().item(), slope.square().mean().item()


@dataclass
class SingleIndexPath:
    """Where :func:`alternating_fit` ended and how it got there (one row per iteration, the start included)."""

    direction: Tensor
    link: LinkFit
    coef_history: Tensor
    loss_history: list[float]
    overlap_history: list[float] | None
    n_iter: int


def alternating_fit(
    X_fit: Tensor,
    y_fit: Tensor,
    X_val: Tensor,
    y_val: Tensor,
    w0: Tensor,
    *,
    degrees: Sequence[int],
    ridges: Sequence[float],
    kernel_decay: float,
    learning_rate: float,
    link_step: float,
    max_iter: int,
    tol: float,
    fixed_link: Tensor | None = None,
    w_star: Tensor | None = None,
) -> SingleIndexPath:
    """Alternate link and direction updates from ``w0`` (unit norm) until ``max_iter`` or a gradient norm below ``tol``.

    With ``fixed_link`` (Hermite coefficients) only ``w`` is learned: the oracle that knows the true link,
    or a method with a wrong one. The final link is refitted exactly at the final direction.
    """
    w = w0 / w0.norm()
    link = LinkFit(X_fit.new_zeros(max(degrees) + 1), max(degrees), min(ridges))
    if fixed_link is not None:
        link = LinkFit(fixed_link, len(fixed_link) - 1, 0.0)
    history, losses = [link.coefs.clone()], []
    overlaps = None if w_star is None else [(w @ w_star).item()]
    for _ in range(max_iter):
        if fixed_link is None:
            target = select_link(X_fit @ w, y_fit, X_val @ w, y_val, [max(degrees)], ridges, kernel_decay)
            link = LinkFit(link.coefs + link_step * (target.coefs - link.coefs), target.degree, target.ridge)
        grad, loss, curvature = riemannian_gradient(w, X_fit, y_fit, link.coefs)
        w = w - learning_rate / max(1.0, curvature) * grad
        w = w / w.norm()
        history.append(link.coefs.clone())
        losses.append(loss)
        if overlaps is not None:
            overlaps.append((w @ w_star).item())
        if grad.norm().item() < tol:
            break
    if fixed_link is None:
        link = select_link(X_fit @ w, y_fit, X_val @ w, y_val, degrees, ridges, kernel_decay)
    return SingleIndexPath(w, link, torch.stack(history), losses, overlaps, len(losses))
