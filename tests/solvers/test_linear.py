"""The linear solves of the step (`jaxcontact.solvers.linear`) against their definitions:
preconditioned conjugate gradients solve symmetric positive definite systems, stop at
breakdown without NaN, give the same answer as a scan or an early-exiting while loop, and on
a step's assembled `Hessian` agree with its dense elimination (`linalg.solve`)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxcontact as jc
from jaxcontact import dofs, linalg, terms
from jaxcontact.solvers import linear

# a solve to rtol 1e-13 on a system of condition 1e4 leaves an error of ~cond * rtol
SOLVE_ATOL = 1e-9


def _spd(n, seed, cond=1e4):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return jnp.asarray(q @ np.diag(np.geomspace(1.0, cond, n)) @ q.T), jnp.asarray(
        rng.normal(size=n))


def test_cg_solves_spd_systems():
    a, b = _spd(30, 0)
    jacobi = 1.0 / jnp.diag(a)
    x = linear.cg(lambda v: a @ v, lambda v: jacobi * v, b, 200, rtol=1e-13)
    np.testing.assert_allclose(a @ x, b, atol=SOLVE_ATOL)


def test_cg_early_exit_stops_at_the_tolerance_with_the_same_answer():
    a, b = _spd(30, 0, cond=1e2)
    calls = []

    def matvec(v):
        jax.debug.callback(lambda: calls.append(1))
        return a @ v

    def solve(early_exit):
        calls.clear()
        x = jax.jit(lambda b: linear.cg(matvec, lambda v: v, b, 200, rtol=1e-8,
                                        early_exit=early_exit))(b)
        jax.effects_barrier()
        return np.asarray(x), len(calls)

    masked, masked_calls = solve(False)
    stopped, stopped_calls = solve(True)
    np.testing.assert_allclose(stopped, masked, rtol=1e-12, atol=1e-14)
    assert np.linalg.norm(b - a @ stopped) <= 1e-8 * np.linalg.norm(b)
    assert masked_calls >= 200
    assert stopped_calls < masked_calls / 2


def test_cg_stops_at_breakdown_without_nan():
    a = -jnp.eye(4)  # negative curvature: CG must stop, not divide by it
    x = linear.cg(lambda v: a @ v, lambda v: v, jnp.ones(4), 10)
    assert bool(jnp.all(jnp.isfinite(x)))
    np.testing.assert_array_equal(x, np.zeros(4))   # the last good iterate: the start


def test_cg_honours_its_iteration_cap():
    # on a diagonally dominant tridiagonal system each iteration adds a direction: k and
    # k + 1 iterations give different iterates, and n iterations solve it (exact arithmetic)
    n = 12
    a = jnp.asarray(3.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1))
    b = jnp.asarray(np.random.default_rng(1).normal(size=n))
    x = [linear.cg(lambda v: a @ v, lambda v: v, b, k, rtol=0.0) for k in (3, 4, n)]
    assert float(jnp.max(jnp.abs(x[0] - x[1]))) > 1e-6
    np.testing.assert_allclose(a @ x[2], b, atol=1e-10)


def test_dense_rule_follows_the_size():
    assert linear.dense(384, "auto") and not linear.dense(385, "auto")
    assert linear.dense(768, "auto", rigid=True) and not linear.dense(769, "auto", rigid=True)
    assert linear.dense(1000, "dense") and not linear.dense(6, "krylov")


# --- the step's Hessian ---------------------------------------------------------------------

def _two_boxes_on_a_spring():
    """Two boxes sliding on the plane, pressed into it, joined by a spring: contact, friction
    and a coupling off the block diagonal."""
    scene = jc.Scene(dt=0.005, friction=0.5, stiffness=1e4)
    scene.add_plane()
    a = scene.add_box(0.05, 1.0, (0.0, 0.0, 0.0495), vel=(0.5, 0.0, -0.1),
                      ang_vel=(0.0, 0.0, 2.0))
    b = scene.add_box(0.05, 0.3, (0.2, 0.0, 0.0495), vel=(-0.2, 0.3, -0.1))
    scene.add_spring(a, b, stiffness=2e3, anchor_a=(0.05, 0.0, 0.05), rest_length=0.05)
    scene.exclude_pair(a, b)
    return scene.build(dtype=jnp.float64)


@jax.jit
def _hessian_solves(model, state, b):
    control = jc.Control.zeros(model.n_body, model.n_motor, dtype=state.pos.dtype)
    args = (model, terms.prepare(model, state, control))
    _, hessian = terms.hessian(dofs.velocity(state), args)
    precond = linear.preconditioner(hessian, "block_jacobi")
    return (hessian.dense(), linalg.solve(hessian.dense(), b),
            linear.cg(hessian.matvec, precond, b, 100, rtol=1e-13))


def test_dense_solve_and_cg_agree_on_a_step_hessian():
    model, state = _two_boxes_on_a_spring()
    b = jnp.asarray(np.random.default_rng(2).normal(size=terms.layout(model).size))
    h, dense, krylov = map(np.asarray, _hessian_solves(model, state, b))
    # the spring couples the boxes (k Δt² = 0.05): H is not its block diagonal
    assert np.max(np.abs(h[:6, 6:])) > 1e-2
    np.testing.assert_allclose(h @ dense, b, atol=1e-10)
    # CG's error: its residual rtol times the condition number of H
    cond = np.linalg.cond(h)
    np.testing.assert_allclose(krylov, dense, rtol=0,
                               atol=1e-13 * cond * np.max(np.abs(dense)) + 1e-12)
