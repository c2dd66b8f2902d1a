"""Weight-space symmetry groups of a layer, their commutants, and the gradient second moment averaged over them.

A weight ``W`` (out x in) and its gradient ``G`` are acted on by ``G -> A G B^T``: ``A`` from the group on
the rows (output units), ``B`` from the group on the columns (input units); on ``v = vec(G)`` (row-major)
that is ``(A kron B) v``. If ``L(A W B^T) = L(W)`` then ``grad(A W B^T) = A G B^T``, so the orbit average

    R2(v v^T) = E_{A,B}[(A kron B) v v^T (A kron B)^T]

is a curvature estimate from one gradient, with no sampling: it is the orthogonal (Frobenius) projection
of ``v v^T`` onto the commutant (the matrices commuting with every ``A kron B``), which is the tensor
product of the two sides' commutants:

    group on d units     its commutant                  numbers stored
    identity             all symmetric d x d            d (d + 1) / 2
    scaling              diagonal (per-unit scale/sign)  d
    permutation          span{I, 11^T}                  2
    signed_permutation   span{I}                        1
    orthogonal           span{I}                        1

Larger group, smaller commutant: less to store and invert, a coarser estimate. The commutants other
than the identity's are spanned by orthogonal projectors ``P_k`` (scaling: ``e_i e_i^T``; permutation:
``11^T/d`` and ``I - 11^T/d``; scalar: ``I``), so ``R2 = sum_k P_k kron M_k`` with
``M_k = R_cols(G^T P_k G) / rank(P_k)``, and any function of it, ``S^(-1/2)`` included, acts block by
block: ``f(S) v = sum_k P_k G f(M_k)``. Each side keeps its commutant element compactly (a dense matrix,
a diagonal, or eigenvalues); nothing of size ``(out in)^2`` is built except by :meth:`SymmetryGroup.dense`.
The positive per-unit scalings are not compact: ``scaling`` averages over the sign flips, whose
commutant (the diagonal matrices) is the scalings' too.
"""

import torch

from ..shared.inverse_root import eigenvalue_inverse_root, inverse_root


class Side:
    """A group acting on ``d`` units and its commutant; compact elements carry optional leading batch dims."""

    name = ""
    commutative = True  # its commutant is spanned by orthogonal projectors (all but the identity's)

    def storage(self, d: int) -> int:
        raise NotImplementedError

    def min_units(self) -> int:
        return 1

    def sample(self, d: int, generator: torch.Generator) -> torch.Tensor:
        """A random group element as a ``d x d`` orthogonal matrix (tests: invariance, Monte-Carlo averages)."""
        raise NotImplementedError

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Frobenius projection of dense ``(..., d, d)`` matrices onto the commutant."""
        raise NotImplementedError

    def basis(self, d: int) -> list[torch.Tensor]:
        raise NotImplementedError

    def outer_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The compact projection of ``x_i x_i^T`` for each row ``x_i`` of ``x`` (..., r, d): batch dims (..., r)."""
        raise NotImplementedError

    def gram(self, x: torch.Tensor) -> torch.Tensor:
        """The compact projection of ``x^T x`` (the sum of the rows' outer products), for each matrix of ``x``."""
        return self.outer_rows(x).sum(x.dim() - 2)

    def power(self, element: torch.Tensor, p: float, damping: float | torch.Tensor) -> torch.Tensor:
        """``(E + damping I)^(-1/p)``, compact; the commutative forms hold eigenvalues. A tensor ``damping`` holds
        one value per leading batch index of ``element`` (one per matrix)."""
        return eigenvalue_inverse_root(element, p, _per_matrix(damping, element.dim()))

    def apply(self, element: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``E`` applied to each row of ``v`` (..., r, d); ``E`` (..., r or 1, *element) is batched with the rows or
        broadcast over them."""
        raise NotImplementedError

    def dense(self, element: torch.Tensor, d: int) -> torch.Tensor:
        raise NotImplementedError


class Identity(Side):
    name, commutative = "identity", False

    def storage(self, d):
        return d * (d + 1) // 2

    def sample(self, d, generator):
        return torch.eye(d, dtype=torch.float64)

    def project(self, x):
        return x

    def basis(self, d):
        return [_unit(d, i, j) + _unit(d, j, i) * (i != j) for i in range(d) for j in range(i, d)]

    def outer_rows(self, x):
        return x.unsqueeze(-1) * x.unsqueeze(-2)

    def gram(self, x):
        return x.mT @ x

    def power(self, element, p, damping):
        return inverse_root(element, p, _per_matrix(damping, element.dim() - 1))  # against the eigenvalues

    def apply(self, element, v):
        if element.shape[-3] == 1:  # one matrix for every row: one product (broadcast, matmul copied it per row)
            return v @ element.squeeze(-3).mT
        return (element @ v.unsqueeze(-1)).squeeze(-1)

    def dense(self, element, d):
        return element


class Scaling(Side):
    name = "scaling"

    def storage(self, d):
        return d

    def sample(self, d, generator):
        return torch.diag(_signs(d, generator))

    def project(self, x):
        return torch.diag_embed(x.diagonal(dim1=-2, dim2=-1))

    def basis(self, d):
        return [_unit(d, i, i) for i in range(d)]

    def outer_rows(self, x):
        return x * x

    def apply(self, element, v):
        return element * v

    def dense(self, element, d):
        return torch.diag(element)


class Scalar(Side):
    """Signed permutations and orthogonal matrices act irreducibly: their commutant is the multiples of I."""

    def __init__(self, name: str):
        self.name = name

    def storage(self, d):
        return 1

    def sample(self, d, generator):
        if self.name == "signed_permutation":
            return torch.diag(_signs(d, generator))[torch.randperm(d, generator=generator)]
        q, r = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
        return (q * torch.sign(r.diagonal())).contiguous()  # Haar-distributed

    def project(self, x):
        d = x.shape[-1]
        trace = x.diagonal(dim1=-2, dim2=-1).sum(-1)
        return (trace / d)[..., None, None] * torch.eye(d, dtype=x.dtype, device=x.device)

    def basis(self, d):
        return [torch.eye(d, dtype=torch.float64)]

    def outer_rows(self, x):
        return (x * x).sum(-1) / x.shape[-1]

    def apply(self, element, v):
        return element.unsqueeze(-1) * v

    def dense(self, element, d):
        return element * torch.eye(d, dtype=element.dtype, device=element.device)


class Permutation(Side):
    """Commutant ``a (I - 11^T/d) + b 11^T/d``, kept as its eigenvalues ``(a, b)``: on the mean's complement, on it."""

    name = "permutation"

    def storage(self, d):
        return 2

    def min_units(self):
        return 2

    def sample(self, d, generator):
        return torch.eye(d, dtype=torch.float64)[torch.randperm(d, generator=generator)]

    def project(self, x):
        d = x.shape[-1]
        ones = torch.full((d, d), 1.0 / d, dtype=x.dtype, device=x.device)
        along = x.sum((-2, -1)) / d
        across = (x.diagonal(dim1=-2, dim2=-1).sum(-1) - along) / (d - 1)
        return (
            across[..., None, None] * (torch.eye(d, dtype=x.dtype, device=x.device) - ones)
            + along[..., None, None] * ones
        )

    def basis(self, d):
        return [torch.eye(d, dtype=torch.float64), torch.ones(d, d, dtype=torch.float64)]

    def outer_rows(self, x):
        d = x.shape[-1]
        along = x.sum(-1).square() / d
        return torch.stack(((x.square().sum(-1) - along) / (d - 1), along), dim=-1)

    def apply(self, element, v):
        mean = v.mean(-1, keepdim=True)
        return element[..., 0:1] * (v - mean) + element[..., 1:2] * mean

    def dense(self, element, d):
        ones = torch.full((d, d), 1.0 / d, dtype=element.dtype, device=element.device)
        return element[0] * (torch.eye(d, dtype=element.dtype, device=element.device) - ones) + element[1] * ones


SIDES = {
    "identity": Identity(),
    "scaling": Scaling(),
    "permutation": Permutation(),
    "signed_permutation": Scalar("signed_permutation"),
    "orthogonal": Scalar("orthogonal"),
}


def _per_matrix(damping: float | torch.Tensor, rank: int) -> float | torch.Tensor:
    """A damping per matrix (a tensor of the leading batch dims) shaped to broadcast against a ``rank``-dim tensor."""
    if not isinstance(damping, torch.Tensor):
        return damping
    return damping.reshape(*damping.shape, *(1,) * (rank - damping.dim()))


def _unit(d: int, i: int, j: int) -> torch.Tensor:
    unit = torch.zeros(d, d, dtype=torch.float64)
    unit[i, j] = 1.0
    return unit


def _signs(d: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 2, (d,), generator=generator).double() * 2 - 1


class SymmetryGroup:
    """The group ``rows x cols`` acting on ``(out, in)`` matrices: the projection ``R2`` and ``f(R2)`` applied.

    ``S`` (what :meth:`second_moment` returns and :meth:`precondition` takes) is the stack of the ``M_k``
    on the commutative side: ``(K, *element)``. When the rows' group is the identity, the roles of rows
    and columns swap (``G`` is handled transposed); the identity on both sides is refused. A gradient
    ``(..., out, in)`` with leading batch dims (the experts of a mixture-of-experts tensor) is that many
    matrices, each with its own ``S``, ``(..., K, *element)``, and its own damping, all in one batched call.
    """

    def __init__(self, rows: str, cols: str = "identity"):
        for side, name in (("rows", rows), ("cols", cols)):
            if name not in SIDES:
                raise ValueError(f"SymmetryGroup: `{side}` must be one of {list(SIDES)}, got {name!r}")
        if rows == cols == "identity":
            raise ValueError(
                "SymmetryGroup: the identity on both sides keeps the full (out*in)^2 second moment; "
                "pick a group on the rows or the columns"
            )
        self.rows, self.cols = SIDES[rows], SIDES[cols]
        self.transposed = not self.rows.commutative
        self.outer, self.inner = (self.cols, self.rows) if self.transposed else (self.rows, self.cols)

    @property
    def elementwise(self) -> bool:
        """Whether ``S`` is diagonal (the scaling group on both sides: Adam's estimate), each entry preconditioned
        on its own, so that a shard of the gradient is stepped without the rest of the matrix."""
        return isinstance(self.rows, Scaling) and isinstance(self.cols, Scaling)

    def __repr__(self) -> str:
        return f"SymmetryGroup({self.rows.name!r}, {self.cols.name!r})"

    def check(self, name: str, shape: tuple[int, ...], matrices: tuple[int, int, int]) -> None:
        """Raise ``ValueError`` naming the parameter, its shape and the group if the group cannot act on its
        ``matrices`` (``(count, out, in)``: how the parameter reads as matrices)."""
        count, rows, cols = matrices
        read_as = f"a {rows} x {cols} matrix" if count == 1 else f"{count} matrices of {rows} x {cols}"
        for side, units in ((self.rows, rows), (self.cols, cols)):
            if units < side.min_units():
                raise ValueError(
                    f"SymmetryCurvature: parameter {name!r} of shape {tuple(shape)} ({read_as}) "
                    f"does not fit the group {self!r}: {side.name!r} needs at least {side.min_units()} units, "
                    f"got {units}"
                )

    def storage(self, rows: int, cols: int) -> int:
        """Numbers in the commutant: what the estimate of a ``rows x cols`` layer stores."""
        return self.rows.storage(rows) * self.cols.storage(cols)

    def _oriented(self, g: torch.Tensor) -> torch.Tensor:
        return g.mT if self.transposed else g

    def second_moment(self, g: torch.Tensor) -> torch.Tensor:
        """``R2(vec(g) vec(g)^T)`` for a gradient ``g`` (..., out, in), as the stacked compact ``M_k``."""
        g, inner, k = self._oriented(g), self.inner, g.dim() - 2  # k: the axis of the M_k, after the batch dims
        rows = g.shape[-2]
        if isinstance(self.outer, Scalar):
            return (inner.gram(g) / rows).unsqueeze(k)
        if isinstance(self.outer, Scaling):
            return inner.outer_rows(g)
        mean = g.mean(-2, keepdim=True)  # permutation: the rows' mean and its complement
        return torch.stack((inner.gram(g - mean) / (rows - 1), rows * inner.gram(mean)), dim=k)

    def precondition(
        self, moment: torch.Tensor, g: torch.Tensor, p: float = 2, damping: float | torch.Tensor = 0.0
    ) -> torch.Tensor:
        """``(S + damping I)^(-1/p) vec(g)`` reshaped to ``g``'s shape, blockwise over the ``P_k`` (``damping``: a
        number, or a tensor of ``g``'s batch dims, one per matrix)."""
        root = self.inner.power(moment, p, damping)
        g, inner, k = self._oriented(g), self.inner, g.dim() - 2
        if isinstance(self.outer, Scaling):  # one block per row: the roots line up with the rows
            out = inner.apply(root, g)
        elif isinstance(self.outer, Scalar):  # narrow keeps the M_k axis as a rows axis of 1, broadcast over rows
            out = inner.apply(root.narrow(k, 0, 1), g)
        else:
            mean = g.mean(-2, keepdim=True)
            out = inner.apply(root.narrow(k, 0, 1), g - mean) + inner.apply(root.narrow(k, 1, 1), mean)
        return self._oriented(out)

    def dense(self, moment: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
        """The ``(rows cols) x (rows cols)`` matrix of ``S`` in row-major ``vec`` order (tests and small layers)."""
        m, n = (cols, rows) if self.transposed else (rows, cols)
        blocks = [self.inner.dense(element, n) for element in moment]
        if isinstance(self.outer, Scaling):
            full = torch.block_diag(*blocks)
        else:
            ones = torch.full((m, m), 1.0 / m, dtype=moment.dtype, device=moment.device)
            eye = torch.eye(m, dtype=moment.dtype, device=moment.device)
            projectors = [eye] if isinstance(self.outer, Scalar) else [eye - ones, ones]
            full = sum(torch.kron(p, block) for p, block in zip(projectors, blocks, strict=True))
        if self.transposed:
            full = full.reshape(m, n, m, n).permute(1, 0, 3, 2).reshape(m * n, m * n)
        return full


GROUPS = tuple(SIDES)
