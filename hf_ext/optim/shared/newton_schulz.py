"""Newton-Schulz orthogonalization: ``G = U S V^T -> ~U V^T`` with matrix products only (no SVD).

The one copy in hf_ext: Scion's spectral LMO and anything else that orthogonalizes call
:func:`newton_schulz`. Each step applies the odd polynomial ``p(X) = a X + b (X X^T) X + c (X X^T)^2 X``,
which acts on every singular value alone, after scaling ``G`` by its Frobenius norm so that all
singular values start in ``(0, 1]``.

- :data:`QUINTIC` (Muon's coefficients, 5 steps) pushes singular values into about ``[0.7, 1.2]``
  fast: cheap and good enough for an optimizer's update.
- :data:`CUBIC` (``1.5 X - 0.5 X X^T X``) converges to exactly ``U V^T``, slowly for tiny singular
  values: for tests and for measuring norms.
"""

import torch

QUINTIC = (3.4445, -4.7750, 2.0315)
CUBIC = (1.5, -0.5, 0.0)


def newton_schulz(
    matrix: torch.Tensor,
    steps: int = 5,
    coefficients: tuple[float, float, float] = QUINTIC,
    eps: float = 1e-7,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Approximate ``U V^T`` of a 2-D ``matrix`` in ``dtype`` (default: the matrix's own); same shape and dtype out.

    ``torch.optim.Muon`` runs the same iteration in bfloat16 only; pass ``dtype=torch.bfloat16`` to match it.
    """
    if matrix.dim() != 2:
        raise ValueError(f"newton_schulz: `matrix` must be 2-D, got shape {tuple(matrix.shape)}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"newton_schulz: `steps` must be a positive integer, got {steps!r}")
    a, b, c = coefficients
    x = matrix.to(dtype or matrix.dtype)
    wide = x.size(0) <= x.size(1)
    x = x if wide else x.T  # work on the side whose Gram matrix is smaller
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x if wide else x.T).to(matrix.dtype)
