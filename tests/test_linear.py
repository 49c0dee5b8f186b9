"""The Krylov solves of the step (`jaxcontact.solvers.linear`) against their definitions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcontact.solvers import linear


def _spd(n, seed, cond=1e4):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return jnp.asarray(q @ np.diag(np.geomspace(1.0, cond, n)) @ q.T), jnp.asarray(
        rng.normal(size=n))


@pytest.mark.parametrize("method", ["cg", "cr", "bicgstab"])
def test_krylov_solves_spd_systems(method):
    a, b = _spd(30, 0)
    jacobi = 1.0 / jnp.diag(a)
    x = linear.SOLVERS[method](lambda v: a @ v, lambda v: jacobi * v, b, 200, rtol=1e-13)
    np.testing.assert_allclose(a @ x, b, atol=1e-9)


@pytest.mark.parametrize("method", ["cg", "cr", "bicgstab"])
def test_krylov_early_exit_stops_at_the_tolerance_with_the_same_answer(method):
    a, b = _spd(30, 0, cond=1e2)
    calls = []

    def matvec(v):
        jax.debug.callback(lambda: calls.append(1))
        return a @ v

    def solve(early_exit):
        calls.clear()
        x = jax.jit(lambda b: linear.SOLVERS[method](matvec, lambda v: v, b, 200, rtol=1e-8,
                                                     early_exit=early_exit))(b)
        return np.asarray(x), len(calls)

    masked, masked_calls = solve(False)
    stopped, stopped_calls = solve(True)
    np.testing.assert_allclose(stopped, masked, rtol=1e-12, atol=1e-14)
    assert np.linalg.norm(b - a @ stopped) <= 1e-8 * np.linalg.norm(b)
    per_iteration = 2 if method == "bicgstab" else 1
    assert masked_calls >= 200 * per_iteration
    assert stopped_calls < masked_calls / 2


def test_bicgstab_solves_non_symmetric_systems():
    a, b = _spd(30, 2, cond=1e3)
    a = a + 0.3 * jnp.asarray(np.random.default_rng(5).normal(size=(30, 30)))
    x = linear.bicgstab(lambda v: a @ v, lambda v: v, b, 200, rtol=1e-13)
    np.testing.assert_allclose(a @ x, b, atol=1e-8)


def test_conjugate_residual_is_monotone():
    a, b = _spd(40, 1, cond=1e6)
    norms = [float(jnp.linalg.norm(b - a @ linear.cr(lambda v: a @ v, lambda v: v, b, k)))
             for k in range(1, 25)]
    # what CR guarantees: |b - A x_k| never increases (up to rounding; the smallest decrease
    # here is 6e-4 relative, the rounding of the residual ~1e-14)
    assert all(n1 <= n0 * (1 + 1e-10) for n0, n1 in zip(norms, norms[1:]))
    # and it makes real progress. How much after 24 iterations at condition 1e6 depends on
    # rounding (finite precision delays CR): changing only the summation order of A v moves
    # norms[-1] / norms[0] over 0.486-0.501, so a bound of 0.5 held or failed by machine
    # (3.06 vs 3.05); 0.6 leaves a margin well above that spread
    assert norms[-1] < 0.6 * norms[0]


def test_krylov_stops_at_breakdown_without_nan():
    a = -jnp.eye(4)  # negative curvature: CG must stop, not divide by it
    x = linear.cg(lambda v: a @ v, lambda v: v, jnp.ones(4), 10)
    assert bool(jnp.all(jnp.isfinite(x)))


def test_bicgstab_in_float32_returns_its_best_iterate():
    """In float32 BiCGSTAB's recursively updated residual drifts from b − A x and near a
    breakdown its iterate can blow up (without residual replacement and the best iterate,
    1.7e5 |b| on one of these systems): the answer is never worse than x = 0, and where the
    system is solvable in float32 it meets what float32 allows."""
    def system(seed, skew):
        rng = np.random.default_rng(seed)
        q, _ = np.linalg.qr(rng.normal(size=(60, 60)))
        a = q @ np.diag(np.geomspace(1.0, 1e4, 60)) @ q.T + skew * rng.normal(size=(60, 60))
        return jnp.asarray(a, jnp.float32), jnp.asarray(rng.normal(size=60), jnp.float32)

    for skew, bound in ((0.1, 1e-3), (1.0, 1.0)):
        for seed in range(10):
            a, b = system(seed, skew)
            x = linear.bicgstab(lambda v: a @ v, lambda v: v, b, 400, rtol=1e-10)
            assert x.dtype == jnp.float32
            assert float(jnp.linalg.norm(b - a @ x) / jnp.linalg.norm(b)) < bound, (skew, seed)


def test_bicgstab_runs_no_more_iterations_than_its_cap():
    """A cap below the replacement cycle is honoured: on a diagonally dominant tridiagonal
    system, k iterations give a different iterate from k + 1 (each adds a direction)."""
    n = 40
    a = jnp.asarray(3.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1))
    b = jnp.asarray(np.random.default_rng(1).normal(size=n))
    x = [linear.bicgstab(lambda v: a @ v, lambda v: v / 3.0, b, k, rtol=1e-14)
         for k in (3, 4, 5)]
    assert float(jnp.max(jnp.abs(x[0] - x[1]))) > 1e-6
    assert float(jnp.max(jnp.abs(x[1] - x[2]))) > 1e-6
