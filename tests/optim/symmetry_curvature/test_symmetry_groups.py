import itertools

import pytest
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from hf_ext.optim.shared.inverse_root import inverse_root
from hf_ext.optim.symmetry_curvature.groups import GROUPS, SIDES, SymmetryGroup

PAIRS = [(r, c) for r in GROUPS for c in GROUPS if (r, c) != ("identity", "identity")]
M, N = 3, 4


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def project_dense(group, matrix, rows, cols):
    """The reference: each side's dense projection applied to the (rows, cols, rows, cols) tensor."""
    t = matrix.reshape(rows, cols, rows, cols)
    t = group.rows.project(t.permute(1, 3, 0, 2)).permute(2, 0, 3, 1)
    t = group.cols.project(t.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)
    return t.reshape(rows * cols, rows * cols)


def _haar(count, d, generator):
    q, r = torch.linalg.qr(torch.randn(count, d, d, generator=generator, dtype=torch.float64))
    return q * torch.sign(r.diagonal(dim1=-2, dim2=-1)).unsqueeze(-2)


def _all_elements(name, d):
    """Every element of the finite groups on d units (orthogonal: None, it is averaged by Monte Carlo)."""
    eye = torch.eye(d, dtype=torch.float64)
    perms = [eye[list(p)] for p in itertools.permutations(range(d))]
    signs = [torch.diag(torch.tensor(s, dtype=torch.float64)) for s in itertools.product((-1.0, 1.0), repeat=d)]
    return {
        "identity": [eye],
        "scaling": signs,
        "permutation": perms,
        "signed_permutation": [s @ p for s in signs for p in perms],
        "orthogonal": None,
    }[name]


@pytest.mark.parametrize(("rows", "cols"), PAIRS)
def test_second_moment_is_the_projection_and_the_group_average(rows, cols):
    m, n = 2, 3  # small enough to enumerate the signed permutations
    group, g = SymmetryGroup(rows, cols), _randn(m, n)
    v = g.reshape(-1)
    dense = group.dense(group.second_moment(g), m, n)
    torch.testing.assert_close(dense, project_dense(group, torch.outer(v, v), m, n))
    elements = [_all_elements(rows, m), _all_elements(cols, n)]
    generator = torch.Generator().manual_seed(1)
    samples = 2000 if None in elements else None
    if samples:  # Monte Carlo: Haar samples on an orthogonal side, uniform draws from a finite one
        sides = [
            _haar(samples, d, generator)
            if e is None
            else torch.stack(e)[torch.randint(len(e), (samples,), generator=generator)]
            for e, d in zip(elements, (m, n), strict=True)
        ]
    else:
        pairs = list(itertools.product(*elements))
        sides = [torch.stack([a for a, _ in pairs]), torch.stack([b for _, b in pairs])]
    kron = (sides[0][:, :, None, :, None] * sides[1][:, None, :, None, :]).reshape(-1, m * n, m * n)
    average = (kron @ torch.outer(v, v) @ kron.mT).mean(0)
    torch.testing.assert_close(dense, average, atol=0.03 * v.square().sum() if samples else 1e-10, rtol=0)


@pytest.mark.parametrize(("rows", "cols"), PAIRS)
def test_the_estimate_is_invariant_psd_and_its_projection_idempotent(rows, cols):
    group, g = SymmetryGroup(rows, cols), _randn(M, N, seed=2)
    dense = group.dense(group.second_moment(g), M, N)
    generator = torch.Generator().manual_seed(3)
    for _ in range(5):
        k = torch.kron(group.rows.sample(M, generator), group.cols.sample(N, generator))
        torch.testing.assert_close(k @ dense @ k.T, dense)
    assert torch.linalg.eigvalsh(dense).min() > -1e-10
    torch.testing.assert_close(project_dense(group, dense, M, N), dense)
    other = _randn(M * N, M * N, seed=4)
    once = project_dense(group, other, M, N)
    torch.testing.assert_close(project_dense(group, once, M, N), once)


@pytest.mark.parametrize("name", GROUPS)
def test_each_commutant_basis_commutes_with_the_group_and_has_the_stated_size(name):
    side, d = SIDES[name], 4
    basis = side.basis(d)
    assert len(basis) == side.storage(d)
    assert torch.linalg.matrix_rank(torch.stack([b.reshape(-1) for b in basis])) == len(basis)
    generator = torch.Generator().manual_seed(5)
    for _ in range(5):
        a = side.sample(d, generator)
        for b in basis:
            torch.testing.assert_close(a @ b, b @ a)
        torch.testing.assert_close(side.project(basis[-1]), basis[-1])


def test_permutation_of_rows_gives_the_diagonal_and_off_diagonal_row_means():
    g = _randn(M, N, seed=6)
    group = SymmetryGroup("permutation", "identity")
    a = sum(torch.outer(g[i], g[i]) for i in range(M)) / M
    b = sum(torch.outer(g[i], g[j]) for i in range(M) for j in range(M) if i != j) / (M * (M - 1))
    ones = torch.ones(M, M, dtype=torch.float64)
    expected = torch.kron(torch.eye(M, dtype=torch.float64), a - b) + torch.kron(ones, b)
    torch.testing.assert_close(group.dense(group.second_moment(g), M, N), expected)


@pytest.mark.parametrize("rows", ["signed_permutation", "orthogonal"])
def test_signed_permutations_and_rotations_keep_only_the_rows_second_moment(rows):
    g = _randn(M, N, seed=7)
    expected = torch.kron(torch.eye(M, dtype=torch.float64), g.T @ g / M)
    group = SymmetryGroup(rows, "identity")
    torch.testing.assert_close(group.dense(group.second_moment(g), M, N), expected)


def test_two_sided_orthogonal_is_a_multiple_of_the_identity_and_its_step_is_normalised_sgd():
    g = _randn(M, N, seed=8)
    group = SymmetryGroup("orthogonal", "orthogonal")
    moment = group.second_moment(g)
    scale = g.square().sum() / (M * N)
    torch.testing.assert_close(group.dense(moment, M, N), scale * torch.eye(M * N, dtype=torch.float64))
    torch.testing.assert_close(group.precondition(moment, g), g / scale.sqrt())


def test_scaling_on_both_sides_is_adam_without_momentum():
    g = _randn(M, N, seed=9)
    group = SymmetryGroup("scaling", "scaling")
    step = group.precondition(group.second_moment(g), g, damping=1e-8)
    torch.testing.assert_close(step, g / (g.square() + 1e-8).sqrt())


@pytest.mark.parametrize(("rows", "cols"), PAIRS)
@pytest.mark.parametrize("p", [2, 4])
def test_precondition_is_the_dense_inverse_root(rows, cols, p):
    group = SymmetryGroup(rows, cols)
    moment = sum(group.second_moment(_randn(M, N, seed=s)) for s in range(3))
    g = _randn(M, N, seed=10)
    expected = inverse_root(group.dense(moment, M, N), p, damping=1e-3) @ g.reshape(-1)
    torch.testing.assert_close(group.precondition(moment, g, p=p, damping=1e-3), expected.reshape(M, N))


def test_storage_shrinks_as_the_group_grows():
    order = ["identity", "scaling", "permutation", "signed_permutation"]
    sizes = [SymmetryGroup(r, "identity" if r != "identity" else "orthogonal").storage(8, 8) for r in order]
    assert sizes[1:] == sorted(sizes[1:], reverse=True) and sizes == [36, 288, 72, 36]


@pytest.mark.parametrize(
    ("rows", "cols", "message"),
    [("identity", "identity", "identity on both sides"), ("rotation", "identity", "`rows` must be one of")],
)
def test_bad_groups_are_refused(rows, cols, message):
    with pytest.raises(ValueError, match=message):
        SymmetryGroup(rows, cols)


def test_a_permutation_needs_two_units():
    with pytest.raises(ValueError, match=r"'layer.bias' of shape \(5,\) \(a 1 x 5 matrix\).*'permutation' needs"):
        SymmetryGroup("permutation", "identity").check("layer.bias", (5,), (1, 1, 5))
    with pytest.raises(ValueError, match=r"'experts' of shape \(3, 1, 4\) \(3 matrices of 1 x 4\).*'permutation'"):
        SymmetryGroup("permutation", "identity").check("experts", (3, 1, 4), (3, 1, 4))


@pytest.mark.parametrize(("rows", "cols"), PAIRS)
def test_a_batch_of_matrices_is_each_matrix_alone(rows, cols):
    """Experts: ``S`` of a ``(E, out, in)`` gradient is each expert's ``S`` stacked, and its root, with one damping
    per expert, acts on each expert as that expert's alone (one batched call, no loop over experts)."""
    group, g = SymmetryGroup(rows, cols), _randn(3, M, N, seed=4)
    moment = group.second_moment(g)
    alone = [group.second_moment(matrix) for matrix in g]
    torch.testing.assert_close(moment, torch.stack(alone))
    damping = torch.tensor([1e-3, 1e-1, 1.0], dtype=torch.float64)
    step = group.precondition(moment, g, damping=damping)
    expected = [group.precondition(s, matrix, damping=d.item()) for s, matrix, d in zip(alone, g, damping, strict=True)]
    torch.testing.assert_close(step, torch.stack(expected))


class _LargestResult(TorchDispatchMode):
    """The most elements of any tensor an operation returns inside it."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.largest = max([self.largest, *(t.numel() for t in pytree.tree_leaves(out) if torch.is_tensor(t))])
        return out


@pytest.mark.parametrize("rows", ["permutation", "orthogonal"])
def test_a_root_shared_by_every_row_is_applied_without_a_copy_per_row(rows):
    """``S^(-1/2)`` of a group whose rows share one ``d_in x d_in`` root is one product: the old broadcast
    matrix-vector product copied the root once per row (out x in^2 numbers: 5.4 GB for SmolLM2's down_proj), and
    matches applying it row by row."""
    group, g = SymmetryGroup(rows, "identity"), _randn(2, 64, 16, seed=7)
    moment = group.second_moment(g)
    with _LargestResult() as mode:
        step = group.precondition(moment, g, damping=1e-3)
    assert mode.largest <= max(g.numel(), moment.numel())
    root = SIDES["identity"].power(moment, 2, 1e-3)
    if rows == "permutation":
        mean = g.mean(-2, keepdim=True)
        rowwise = [(root[:, 0] @ (g - mean)[:, i, :, None]).squeeze(-1) for i in range(64)]
        expected = torch.stack(rowwise, dim=1) + (root[:, 1] @ mean.mT).mT
    else:
        expected = torch.stack([(root[:, 0] @ g[:, i, :, None]).squeeze(-1) for i in range(64)], dim=1)
    torch.testing.assert_close(step, expected)
