"""mlip.so3 against its definitions and against e3nn (float64)."""

import math

import pytest
import torch

from mlip.so3 import (
    S2Grid,
    edge_rotation,
    grid_points,
    m_primary_order,
    num_truncated_coefficients,
    product_resolution,
    spherical_harmonics,
    wigner_D,
)
from mlip.testing.rotations import random_rotations, rotation_about_y

o3 = pytest.importorskip("e3nn.o3", reason="e3nn (a test dependency: pip install -e '.[test]') is missing")

LMAX = 6
DTYPE = torch.float64


@pytest.fixture(autouse=True)
def float64_default():
    """e3nn builds some constants in the default dtype: make that float64 for the comparisons."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


# Directions that break Euler-angle formulas: the poles ±y and the other axes.
AXES = torch.tensor([[0, 1, 0], [0, -1, 0], [1, 0, 0], [-1, 0, 0], [0, 0, 1], [0, 0, -1]], dtype=DTYPE)


def block(D, l):
    return D[..., l * l : (l + 1) ** 2, l * l : (l + 1) ** 2]


# ------------------------------------------------------------------------------ spherical harmonics
@pytest.mark.parametrize("normalization", ["component", "norm", "integral"])
def test_spherical_harmonics_match_e3nn(normalization):
    x = torch.cat([torch.randn(200, 3, generator=torch.Generator().manual_seed(0), dtype=DTYPE), AXES * 2.5])
    mine = spherical_harmonics(LMAX, x, normalization=normalization)
    ref = o3.spherical_harmonics(list(range(LMAX + 1)), x, normalize=True, normalization=normalization)
    assert (mine - ref).abs().max() < 1e-12


def test_unnormalised_spherical_harmonics_are_homogeneous_polynomials():
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(1), dtype=DTYPE)
    mine = spherical_harmonics(LMAX, x, normalize=False)
    ref = o3.spherical_harmonics(list(range(LMAX + 1)), x, normalize=False, normalization="component")
    assert ((mine - ref).abs() / (1 + ref.abs())).max() < 1e-12
    # l = 1 is (x, y, z)·√3 in component normalisation.
    assert torch.allclose(mine[:, 1:4], math.sqrt(3) * x, atol=1e-14)


def test_spherical_harmonics_are_orthonormal_on_the_grid():
    points, weights = grid_points(*product_resolution(4))  # exact to degree 12 ≥ 2·6
    y = spherical_harmonics(LMAX, points)
    gram = (y * weights[:, None]).T @ y / (4 * math.pi)
    assert (gram - torch.eye(gram.shape[0], dtype=DTYPE)).abs().max() < 1e-12


# ------------------------------------------------------------------------------ Wigner-D
def test_wigner_matches_e3nn():
    R = torch.cat([random_rotations(40), edge_rotation(AXES), torch.eye(3, dtype=DTYPE)[None],
                   rotation_about_y(math.pi)[None]])
    D = wigner_D(R, LMAX)
    for l in range(LMAX + 1):
        ref = o3.wigner_D(l, *o3.matrix_to_angles(R))
        assert (block(D, l) - ref).abs().max() < 1e-10, f"l={l}"
    # Off-diagonal blocks are exactly zero and l = 1 is the rotation matrix itself.
    mask = torch.block_diag(*[torch.ones(2 * l + 1, 2 * l + 1) for l in range(LMAX + 1)]).to(DTYPE)
    assert (D * (1 - mask)).abs().max() == 0
    assert (block(D, 1) - R).abs().max() < 1e-13


def test_wigner_is_a_representation():
    R1, R2 = random_rotations(30, seed=1), random_rotations(30, seed=2)
    D1, D2, D12 = wigner_D(R1, LMAX), wigner_D(R2, LMAX), wigner_D(R1 @ R2, LMAX)
    assert (D12 - D1 @ D2).abs().max() < 1e-12
    eye = torch.eye(D1.shape[-1], dtype=DTYPE)
    assert (D1 @ D1.transpose(-1, -2) - eye).abs().max() < 1e-12
    assert (wigner_D(R1.transpose(-1, -2), LMAX) - D1.transpose(-1, -2)).abs().max() < 1e-12


def test_wigner_rotates_spherical_harmonics():
    """The defining property Y(R r) = D(R) Y(r)."""
    R = random_rotations(20, seed=3)
    r = torch.randn(20, 3, dtype=DTYPE, generator=torch.Generator().manual_seed(4))
    lhs = spherical_harmonics(LMAX, torch.einsum("eab,eb->ea", R, r))
    rhs = torch.einsum("ekn,en->ek", wigner_D(R, LMAX), spherical_harmonics(LMAX, r))
    assert (lhs - rhs).abs().max() < 1e-12


def test_wigner_rows_subset():
    """Only the requested rows are computed, and they are those rows of the full matrices. Not bit for
    bit: the subset goes through a smaller matrix product, which BLAS may round differently (one unit
    in the last place, 1.1e-16, on some CPUs); a wrong or misplaced row would differ by O(0.1)."""
    R = random_rotations(5)
    rows = m_primary_order(4, 2)
    torch.testing.assert_close(wigner_D(R, 4, rows=rows), wigner_D(R, 4)[:, rows, :], rtol=0, atol=1e-14)


@pytest.mark.parametrize("direction", range(len(AXES)))
def test_gradients_flow_for_axis_aligned_edges(direction):
    """D(R_edge(v)) stays differentiable along the axes (no Euler singularity, no detached poles):
    the m = 0 rows are (up to 1/√(2l+1)) the harmonics Y_l(v̂), a smooth function whose Jacobian must
    match finite differences, and the full rows give a frame-independent scalar with FD gradient."""
    v0 = (AXES[direction] * 1.7).clone()
    rows = m_primary_order(LMAX, 2)
    coeff = torch.randn(LMAX + 1, 2 * LMAX + 1, dtype=DTYPE, generator=torch.Generator().manual_seed(5))

    def m0_rows(v):
        D = wigner_D(edge_rotation(v[None]), LMAX, rows=rows[: LMAX + 1])[0]
        return D

    D = m0_rows(v0)
    y = spherical_harmonics(LMAX, v0[None])[0]
    for l in range(LMAX + 1):
        assert torch.allclose(D[l, l * l : (l + 1) ** 2], y[l * l : (l + 1) ** 2] / math.sqrt(2 * l + 1), atol=1e-13)
    torch.autograd.gradcheck(m0_rows, (v0.clone().requires_grad_(),), eps=1e-6, atol=1e-8)

    def invariant(v):
        # Σ_l ‖P D^l(R(v)) a_l‖² depends on v only through v̂ (the roll about the edge cancels).
        D = wigner_D(edge_rotation(v[None]), LMAX, rows=rows)[0]
        a = torch.cat([coeff[l, : 2 * l + 1] for l in range(LMAX + 1)])
        return ((D @ a) ** 2).sum()

    torch.autograd.gradcheck(invariant, (v0.clone().requires_grad_(),), eps=1e-6, atol=1e-8)


# ------------------------------------------------------------------------------ edge frames
def test_edge_rotation_maps_edge_to_y_and_is_deterministic():
    v = torch.cat([torch.randn(500, 3, dtype=DTYPE, generator=torch.Generator().manual_seed(6)), AXES,
                   AXES + 1e-9, torch.tensor([[1.0, 1.0, 1.0], [1e-3, 5.0, -1e-3]], dtype=DTYPE)])
    R = edge_rotation(v)
    v_hat = v / v.norm(dim=-1, keepdim=True)
    assert (torch.einsum("eab,eb->ea", R, v_hat) - torch.tensor([0.0, 1.0, 0.0], dtype=DTYPE)).abs().max() < 1e-14
    assert (R @ R.transpose(1, 2) - torch.eye(3, dtype=DTYPE)).abs().max() < 1e-14
    assert (torch.linalg.det(R) - 1).abs().max() < 1e-14
    assert torch.equal(edge_rotation(v.clone()), R)  # bit for bit


# ------------------------------------------------------------------------------ S² grids
def grid_product(grid, a, b):
    return grid.from_grid(grid.to_grid(a) * grid.to_grid(b))


def random_features(k, c, seed):
    return torch.randn(k, c, dtype=DTYPE, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("lmax", [1, 2, 3, 4, 6])
def test_grid_product_is_equivariant_at_the_chosen_resolution(lmax):
    R = random_rotations(1, seed=lmax)[0]
    D = wigner_D(R, lmax)
    a, b = random_features((lmax + 1) ** 2, 5, 0), random_features((lmax + 1) ** 2, 5, 1)
    grid = S2Grid(lmax)
    err = (grid_product(grid, D @ a, D @ b) - D @ grid_product(grid, a, b)).abs().max()
    assert err < 1e-10, f"resolution {grid.resolution}: {err:.2e}"
    # One latitude or one azimuth fewer is no longer exact: the test can fail.
    beta, alpha = grid.resolution
    for coarse in [(beta - 1, alpha), (beta, alpha - 1)]:
        low = S2Grid(lmax, resolution=coarse)
        err = (grid_product(low, D @ a, D @ b) - D @ grid_product(low, a, b)).abs().max()
        assert err > 1e-6, f"resolution {coarse} is unexpectedly exact"


@pytest.mark.parametrize("lmax,mmax", [(2, 1), (4, 2), (6, 2)])
def test_truncated_grid_product_is_equivariant_about_the_edge(lmax, mmax):
    """m-truncated features multiplied on the edge grid commute with every rotation about y."""
    rows = m_primary_order(lmax, mmax)
    D = wigner_D(rotation_about_y(0.7345)[None], lmax)[0][rows][:, rows]  # block-diagonal in |m|
    k = num_truncated_coefficients(lmax, mmax)
    a, b = random_features(k, 4, 2), random_features(k, 4, 3)
    grid = S2Grid(lmax, mmax)
    assert grid.resolution[1] == 3 * mmax + 1
    err = (grid_product(grid, D @ a, D @ b) - D @ grid_product(grid, a, b)).abs().max()
    assert err < 1e-10
    low = S2Grid(lmax, mmax, resolution=(grid.resolution[0], 3 * mmax))
    assert (grid_product(low, D @ a, D @ b) - D @ grid_product(low, a, b)).abs().max() > 1e-6


def test_grid_product_is_the_gaunt_product():
    """On an exact grid, the product of Y_1 components projects onto (x·y) = Y_2^{-2}-like terms exactly."""
    grid = S2Grid(2)
    x = torch.randn(300, 3, dtype=DTYPE, generator=torch.Generator().manual_seed(7))
    a = random_features(9, 1, 8)
    b = random_features(9, 1, 9)
    c = grid_product(grid, a, b)
    y = spherical_harmonics(2, x)
    # Projection of f·g onto degrees ≤ 2 agrees with f·g minus its degree-3,4 part: check through
    # the inner products ⟨f·g, Y_k⟩ computed on a much finer grid.
    points, weights = grid_points(20, 40)
    yp = spherical_harmonics(2, points)
    exact = (yp * ((yp @ a) * (yp @ b)) * weights[:, None]).sum(0) / (4 * math.pi)
    assert (c[:, 0] - exact).abs().max() < 1e-12
    assert y.shape == (300, 9)


def test_m_primary_layout():
    assert num_truncated_coefficients(4, 2) == 19 and num_truncated_coefficients(6, 2) == 29
    assert m_primary_order(2, 1).tolist() == [0, 2, 6, 3, 7, 1, 5]
    with pytest.raises(ValueError, match="mmax"):
        m_primary_order(2, 3)
