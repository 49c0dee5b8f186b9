"""Dense linear solves sized for one step (jaxcontact/linalg.py): `solve` against LAPACK
(well-conditioned, zero diagonals, tiny pivots, large systems, its gradient, float32), the
convexifying shift and the convexified solve, the Cholesky solve, and the projection of
element matrices onto the positive semi-definite cone.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcontact import linalg

# Dense solves of well-conditioned (cond < ~1e3) systems vs LAPACK.
_SOLVE = 1e-11

_solve_batch = jax.jit(jax.vmap(linalg.solve))


# --- linalg.solve -----------------------------------------------------------------------------
# Each size compiles once: every test of one size calls `_solve_batch` on a batch of the same
# shape (_BATCH systems) to share that compilation.

_BATCH = 3


def _well_conditioned(n, rng):
    return rng.normal(size=(n, n)) + n * np.eye(n)


def _zero_diagonal(n, rng):
    """A well-conditioned matrix with an exactly zero diagonal: elimination without row
    exchanges divides by zero at its first step."""
    for _ in range(20):
        a = _well_conditioned(n, rng)[rng.permutation(n)]
        np.fill_diagonal(a, 0.0)
        if np.linalg.cond(a) < 1e4:
            return a
    raise AssertionError(f"no well-conditioned zero-diagonal matrix found for n={n}")


def _check_solves(a, b, rtol, what):
    x = np.asarray(_solve_batch(jnp.asarray(a), jnp.asarray(b)))
    assert np.all(np.isfinite(x)), f"{what}: non-finite solution"
    for i in range(len(a)):
        np.testing.assert_allclose(x[i], np.linalg.solve(a[i], b[i]), rtol=rtol, atol=rtol,
                                   err_msg=f"{what}, system {i}")
        np.testing.assert_allclose(a[i] @ x[i], b[i], atol=rtol, err_msg=f"{what} residual")


@pytest.mark.parametrize("n", list(range(1, 13)))
def test_solve_matches_numpy_well_conditioned(n):
    rng = np.random.default_rng(100 + n)
    a = np.stack([_well_conditioned(n, rng) for _ in range(_BATCH)])
    _check_solves(a, rng.normal(size=(_BATCH, n)), _SOLVE, f"n={n}")


@pytest.mark.parametrize("n", list(range(2, 13)))
def test_solve_matches_numpy_with_zero_diagonal(n):
    rng = np.random.default_rng(200 + n)
    cyclic = np.roll(np.eye(n), 1, axis=0) * (1.0 + np.arange(n))  # zero diagonal for n > 1
    a = np.stack([_zero_diagonal(n, rng) for _ in range(_BATCH - 1)] + [cyclic])
    assert np.all(np.diagonal(a, axis1=1, axis2=2) == 0.0)
    _check_solves(a, rng.normal(size=(_BATCH, n)), 1e-9, f"zero diagonal, n={n}")


def test_solve_small_pivot_needs_row_exchange():
    # without row exchanges the 1e-20 pivot destroys the answer (x ≈ (0, 1) instead of (1, 1))
    a = np.array([[[1e-20, 1.0], [1.0, 1.0]], [[0.0, 2.0], [3.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])
    b = np.array([[1.0, 2.0], [2.0, 3.0], [5.0, -1.0]])
    _check_solves(a, b, 1e-14, "tiny pivot")


@pytest.mark.parametrize("n", [50, 100])
def test_solve_large_systems(n):
    """Sizes past the small-system elimination (48 or 96 rows, depending on the version) go to
    LAPACK; both paths must solve systems that need row exchanges."""
    rng = np.random.default_rng(300 + n)
    a = _well_conditioned(n, rng)
    a[0, 0] = 0.0
    b = rng.normal(size=n)
    np.testing.assert_allclose(jax.jit(linalg.solve)(jnp.asarray(a), jnp.asarray(b)),
                               np.linalg.solve(a, b), rtol=_SOLVE, atol=_SOLVE)


def test_solve_gradient_wrt_rhs_is_inverse():
    rng = np.random.default_rng(400)
    a = _zero_diagonal(3, rng)
    jac = jax.jit(jax.jacfwd(linalg.solve, argnums=1))(jnp.asarray(a), jnp.zeros(3))
    np.testing.assert_allclose(jac, np.linalg.inv(a), rtol=1e-11, atol=1e-12)


def test_solve_float32():
    rng = np.random.default_rng(500)
    a = np.stack([_well_conditioned(3, rng) for _ in range(_BATCH)])
    b = rng.normal(size=(_BATCH, 3))
    x = _solve_batch(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    assert x.dtype == jnp.float32
    np.testing.assert_allclose(x, np.linalg.solve(a, b[..., None])[..., 0], rtol=1e-4, atol=1e-5)


# --- linalg.convexifying_shift ----------------------------------------------------------------

_shift_batch = jax.jit(jax.vmap(linalg.convexifying_shift))


def _metrics(n, rng):
    """Diagonal metrics spanning the scales of masses and inertias (1e-4 to 1e2)."""
    return 10.0 ** rng.uniform(-4, 2, size=(_BATCH, n))


def test_convexifying_shift_leaves_positive_definite_matrices_alone():
    rng = np.random.default_rng(600)
    q = rng.normal(size=(_BATCH, 6, 6))
    metric = _metrics(6, rng)
    scale = np.sqrt(metric)
    # positive definite in every metric, with entries of very different scales
    a = scale[:, :, None] * (q @ np.swapaxes(q, 1, 2) + 0.1 * np.eye(6)) * scale[:, None, :]
    np.testing.assert_array_equal(_shift_batch(jnp.asarray(a), jnp.asarray(metric)), 0.0)


def test_convexifying_shift_of_a_diagonal_matrix_is_its_absolute_value():
    rng = np.random.default_rng(601)
    values = rng.normal(size=(_BATCH, 6)) * _metrics(6, rng)
    a = np.stack([np.diag(v) for v in values])
    shift = _shift_batch(jnp.asarray(a), jnp.asarray(_metrics(6, rng)))
    np.testing.assert_allclose(values + shift, np.abs(values), rtol=1e-14)


def _symmetric_in_metric(rng):
    """A batch of random symmetric (6, 6) matrices S^1/2 (q + qᵀ) S^1/2 (indefinite), q, and
    their metrics S and S^1/2."""
    q = rng.normal(size=(_BATCH, 6, 6))
    metric = _metrics(6, rng)
    scale = np.sqrt(metric)
    return scale[:, :, None] * (q + np.swapaxes(q, 1, 2)) * scale[:, None, :], q, metric, scale


def test_convexifying_shift_makes_indefinite_matrices_positive_definite():
    a, _, metric, scale = _symmetric_in_metric(np.random.default_rng(602))
    assert np.all(np.linalg.eigvalsh(a).min(axis=1) < 0)
    shift = np.asarray(_shift_batch(jnp.asarray(a), jnp.asarray(metric)))
    assert np.all(shift >= 0)
    modified = a + np.stack([np.diag(s) for s in shift])
    # positive definite in the metric, by a margin well above rounding
    lowest = np.linalg.eigvalsh(modified / scale[:, :, None] / scale[:, None, :]).min(axis=1)
    assert np.all(lowest > 1e-6), lowest


_solve_convexified = jax.jit(jax.vmap(linalg.solve_convexified))


def test_solve_convexified_solves_the_modified_system_or_the_plain_one():
    # weight 1: x solves (a + diag(e)) x = b with the same e as convexifying_shift; weight 0:
    # x = a⁻¹ b (partial pivoting, a need not be symmetric) and e is only reported
    rng = np.random.default_rng(603)
    sym, q, metric, scale = _symmetric_in_metric(rng)
    b = rng.normal(size=(_BATCH, 6))
    ones, zeros = jnp.ones(_BATCH), jnp.zeros(_BATCH)
    x, e = _solve_convexified(jnp.asarray(sym), jnp.asarray(b), jnp.asarray(metric), ones)
    np.testing.assert_allclose(e, _shift_batch(jnp.asarray(sym), jnp.asarray(metric)),
                               rtol=1e-12, atol=0)
    modified = sym + np.stack([np.diag(s) for s in np.asarray(e)])
    residual = np.abs(np.einsum("nij,nj->ni", modified, x) - b)
    size = np.einsum("nij,nj->ni", np.abs(modified), np.abs(x)) + np.abs(b)
    assert np.all(residual <= 1e-12 * size), (residual / size).max()
    general = scale[:, :, None] * q * scale[:, None, :]
    x, _ = _solve_convexified(jnp.asarray(general), jnp.asarray(b), jnp.asarray(metric), zeros)
    np.testing.assert_allclose(x, np.linalg.solve(general, b[..., None])[..., 0], rtol=1e-9,
                               atol=1e-9)


@pytest.mark.parametrize("n", [6, linalg.ELIMINATION_MAX + 4])
def test_small_and_large_solves_agree_with_lapack(n):
    # up to linalg.ELIMINATION_MAX unknowns the column loop is unrolled, above it `solve` calls
    # LAPACK and `solve_convexified` loops: every form solves alike, and a positive definite
    # matrix gets no shift
    rng = np.random.default_rng(604 + n)
    a = rng.normal(size=(n, n))
    spd = a @ a.T + n * np.eye(n)
    b = rng.normal(size=n)
    metric = rng.uniform(0.5, 2.0, size=n)
    x = linalg.solve(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-9, atol=1e-9)
    y, shift = linalg.solve_convexified(jnp.asarray(spd), jnp.asarray(b), jnp.asarray(metric))
    np.testing.assert_allclose(y, np.linalg.solve(spd, b), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(shift, 0.0)
    z, ok = linalg.cholesky_solve(jnp.asarray(spd), jnp.asarray(b))
    assert bool(ok)
    np.testing.assert_allclose(z, np.linalg.solve(spd, b), rtol=1e-10, atol=1e-12)
    assert not bool(linalg.cholesky_solve(jnp.asarray(-spd), jnp.asarray(b))[1])


# --- linalg.project_psd ------------------------------------------------------------------------

def test_element_projection_clamps_negative_eigenvalues_and_keeps_psd_matrices():
    """`linalg.project_psd` (Newton's directions for solids, design note 60): the nearest
    positive semi-definite matrix, eigenvectors kept, negative eigenvalues set to 0; the
    Cholesky test flags only matrices with an eigenvalue below -√eps max|a| (a rank-deficient
    PSD matrix, like a tetrahedron's with its rigid modes, passes)."""
    rng = np.random.default_rng(3)
    q = np.linalg.qr(rng.normal(size=(12, 12)))[0]
    w = np.linspace(-2.0, 5.0, 12)
    a = q @ np.diag(w) @ q.T
    psd = q @ np.diag(np.maximum(w, 0.0)) @ q.T
    np.testing.assert_allclose(linalg.project_psd(jnp.asarray(a)), psd, atol=1e-12)
    np.testing.assert_allclose(np.linalg.eigvalsh(np.asarray(linalg.project_psd(jnp.asarray(a)))),
                               np.sort(np.maximum(w, 0.0)), atol=1e-12)
    flags = linalg.indefinite(jnp.asarray(np.stack([a, psd, q[:, :6] @ q[:, :6].T])))
    assert flags.tolist() == [True, False, False]
    # with a floor (an element's share of the mass): indefinite only below -floor
    assert linalg.indefinite(jnp.asarray(a), 1.9).tolist() is True
    assert linalg.indefinite(jnp.asarray(a), 2.1).tolist() is False
