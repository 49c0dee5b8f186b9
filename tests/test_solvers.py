"""The solver family: Newton (dense and matrix-free), Descent and Dual reach the same step.

- the constraint rows are an exact view of the primal problem (stationarity and Jacobians),
- every solver converges to the dense-Newton solution, and gives the same implicit gradient,
- an unconverged fixed-iteration solve says so in its StepInfo,
- the building blocks (Krylov solves, blocks, projection) against their definitions.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import dynamics
from jaxcontact.solvers import base, blocks, krylov
from jaxcontact.problem import Rows
from jaxcontact.solvers.dual import project

STEPS = 20
SOLVERS = {
    "newton": jc.Newton(),
    # early exit: the Krylov loops stop at their tolerance (same answers as the masked scans)
    "newton_bicgstab": jc.Newton(linear="bicgstab", early_exit=True),
    # symmetric models drop the lag terms of the Jacobian: linear convergence, more iterations
    "newton_cg": jc.Newton(linear="cg", iterations=40),
    "newton_cr": jc.Newton(linear="cr", iterations=40),
    "descent": jc.Descent(iterations=400),
    "dual": jc.Dual(iterations=600, update="exact"),
}


def _scene(solver, friction=0.5):
    """A sliding sphere, a spinning box falling onto the ground, a spring to the world and a
    ball joint (zero-length spring) between the two."""
    s = jc.Scene(dt=0.002, friction=friction)
    s.add_plane()
    ball = s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.0499), vel=(1.0, 0.0, 0.0))
    box = s.add_box(0.05, 2.0, (0.5, 0.0, 0.052), ang_vel=(1.0, 2.0, 0.5))
    s.add_spring(box, -1, stiffness=1e3, anchor_a=(0.05, 0.05, 0.05), rest_length=0.1)
    s.add_spring(ball, box, stiffness=5e2, anchor_a=(0.0, 0.0, 0.05), rest_length=0.0,
                 anchor_b=(-0.1, 0.0, 0.0))
    return s.build(solver=solver)


@jax.jit
def _rollout(model, state):
    return jc.rollout(model, state, steps=STEPS, return_info=True)


@pytest.fixture(scope="module")
def reference():
    model, state = _scene(SOLVERS["newton"])
    final, traj, info = _rollout(model, state)
    assert bool(jnp.all(info.converged))
    return final


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n == "newton_cg" else n
    for n in SOLVERS if n != "newton"])
def test_every_solver_reaches_the_newton_solution(name, reference):
    model, state = _scene(SOLVERS[name])
    final, _, info = _rollout(model, state)
    assert bool(jnp.all(info.converged)), f"max residual {float(jnp.max(info.residual)):.2e}"
    assert float(jnp.max(info.residual)) <= 1e-10
    np.testing.assert_allclose(final.pos, reference.pos, atol=1e-9)
    np.testing.assert_allclose(final.vel, reference.vel, atol=1e-7)
    np.testing.assert_allclose(final.ang_vel, reference.ang_vel, atol=1e-6)


def _loss_grad(solver):
    """Gradient of a linear functional of the final state w.r.t. model leaves and v0."""
    model, state = _scene(solver)
    weights = jax.random.normal(jax.random.PRNGKey(3), (2, 9))

    def loss(params):
        friction, spring_k, rest, vel = params
        m = model.replace(geom=model.geom.replace(friction=friction),
                          spring=model.spring.replace(stiffness=spring_k, rest_length=rest))
        final, _ = jc.rollout(m, state.replace(vel=vel), steps=STEPS)
        flat = jnp.concatenate([final.pos, final.vel, final.ang_vel], axis=-1)
        return jnp.sum(weights * flat)

    params = (model.geom.friction, model.spring.stiffness, model.spring.rest_length, state.vel)
    return jax.jit(jax.grad(loss))(params)


@pytest.fixture(scope="module")
def reference_grad():
    return _loss_grad(SOLVERS["newton"])


@pytest.mark.parametrize("name", [
    pytest.param("newton_bicgstab", marks=pytest.mark.slow),
    pytest.param("newton_cr", marks=pytest.mark.slow), "descent", "dual"])
def test_implicit_gradient_is_the_same_whichever_solver_converged(name, reference_grad):
    grad = _loss_grad(SOLVERS[name])
    for got, want in zip(jax.tree.leaves(grad), jax.tree.leaves(reference_grad)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("ad, early_exit", [
    ("vjp", True), pytest.param("vjp", False, marks=pytest.mark.slow),
    pytest.param("jvp", False, marks=pytest.mark.slow)])
def test_matrix_free_adjoint_matches_the_dense_one(ad, early_exit, reference_grad):
    grad = _loss_grad(jc.Newton(ad=ad, adjoint="krylov", early_exit=early_exit))
    for got, want in zip(jax.tree.leaves(grad), jax.tree.leaves(reference_grad)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("solver", [jc.Newton, jc.Descent, jc.Dual])
def test_only_unrolled_solves_keep_their_scans_under_early_exit(solver):
    assert base.early_exit(solver(early_exit=True))
    assert not base.early_exit(solver(early_exit=True, ad="unrolled"))
    assert not base.early_exit(solver())


@pytest.mark.slow
def test_unrolled_gradients_ignore_early_exit():
    """ad="unrolled" differentiates the loops, so it runs them as scans even with early_exit
    (a while_loop has no reverse mode); its gradient is then the implicit one."""
    s = jc.Scene(dt=0.002, friction=0.5)
    s.add_plane()
    s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.049), vel=(0.5, 0.0, -0.2))

    def grad(solver):
        model, state = s.build(solver=solver)

        def loss(vel):
            final, _ = jc.rollout(model, state.replace(vel=vel), steps=3)
            return jnp.sum(final.pos * jnp.asarray([[1.0, 0.0, 2.0]]))

        return jax.jit(jax.grad(loss))(state.vel)

    unrolled = grad(jc.Newton(linear="bicgstab", ad="unrolled", early_exit=True))
    implicit = grad(jc.Newton(linear="bicgstab", early_exit=True))
    assert bool(jnp.all(jnp.isfinite(unrolled)))
    np.testing.assert_allclose(unrolled, implicit, rtol=1e-6, atol=1e-9)


def test_unconverged_descent_is_reported_and_its_gradient_differs(reference_grad):
    model, state = _scene(jc.Descent(iterations=3))
    _, _, info = _rollout(model, state)
    assert not bool(jnp.all(info.converged))
    assert int(jnp.max(info.result)) == int(jc.Result.MAX_ITERATIONS)
    assert float(jnp.max(info.residual)) > 1e-6
    # the implicit gradient is that of the converged problem at an unconverged point
    grad = _loss_grad(jc.Descent(iterations=3))
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in
               zip(jax.tree.leaves(grad), jax.tree.leaves(reference_grad)))
    assert diff > 1e-6


# --- the rows are an exact view of the primal problem ------------------------------------

@pytest.fixture(scope="module")
def solved_step():
    model, state = _scene(jc.Newton())
    for _ in range(8):  # into contact: the box lands, the ball slides
        state, _ = jax.jit(jc.step)(model, state)
    args = (model, state, dynamics.prepare(model, state, jc.Control.zeros(model.n_body)))
    u, stats = model.solver.solve(dynamics.PROBLEM, dynamics.join_velocity(state.vel,
                                                                           state.ang_vel), args)
    assert bool(stats["converged"])
    return model, args, u


def test_rows_stationarity_is_the_primal_residual(solved_step):
    # M (u - ũ) = Σ Gᵀ λ with λ = Π(-s e) at the primal solution (huber friction, linear law)
    model, args, u = solved_step
    rows = dynamics.rows(u, args)
    assert int(jnp.sum(rows.error[:rows.n_contact] < 0)) >= 2, "scene must be in contact"
    lam = project(rows, -rows.stiffness * rows.error)
    impulse = blocks.transpose_apply(rows, lam, model.n_body).reshape(-1)
    mass = dynamics.mass_matrix(args)
    momentum = jnp.einsum("nij,nj->ni", mass,
                          (u - dynamics.free_flight(args)).reshape(-1, 6)).reshape(-1)
    np.testing.assert_allclose(momentum, impulse, atol=1e-9)
    np.testing.assert_allclose(dynamics.gradient(u, args), momentum - impulse, atol=1e-9)


def test_row_jacobians_match_autodiff_of_the_errors(solved_step):
    model, args, u = solved_step
    rows = dynamics.rows(u, args)
    dense = jax.jacfwd(lambda x: dynamics.rows(x, args).error)(u)  # (R, 6N)
    k = rows.n_contact
    # position rows (gaps, springs) depend on u through q+(u); velocity rows are linear in u
    # with the frame at u: compare the frame-frozen part through G u
    n = model.n_body
    assembled = np.zeros(dense.shape)
    for j, (a, b) in enumerate(zip(rows.body_a, rows.body_b)):
        assembled[j, 6 * a:6 * a + 6] += np.asarray(rows.jac_a[j])
        if b >= 0:
            assembled[j, 6 * b:6 * b + 6] += np.asarray(rows.jac_b[j])
    position = np.r_[0:k, 4 * k:dense.shape[0]]
    np.testing.assert_allclose(assembled[position], dense[position], atol=1e-10)
    velocity = np.r_[k:4 * k]
    np.testing.assert_allclose(assembled[velocity] @ np.asarray(u),
                               np.asarray(rows.error)[velocity], atol=1e-12)
    assert assembled.shape == (4 * k + model.spring.size, 6 * n)


def test_gauss_newton_blocks_are_the_diagonal_of_the_assembled_hessian(solved_step):
    model, args, u = solved_step
    rows = dynamics.rows(u, args)
    n = model.n_body
    g = np.zeros((len(rows.body_a), 6 * n))
    for j, (a, b) in enumerate(zip(rows.body_a, rows.body_b)):
        g[j, 6 * a:6 * a + 6] += np.asarray(rows.jac_a[j])
        if b >= 0:
            g[j, 6 * b:6 * b + 6] += np.asarray(rows.jac_b[j])
    mass = dynamics.mass_matrix(args)
    dense = g.T @ (np.asarray(rows.curvature)[:, None] * g)
    got = blocks.gauss_newton_blocks(rows, mass)
    for i in range(n):
        np.testing.assert_allclose(got[i], mass[i] + dense[6 * i:6 * i + 6, 6 * i:6 * i + 6],
                                   atol=1e-9)


# --- building blocks ---------------------------------------------------------------------

def _spd(n, seed, cond=1e4):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return jnp.asarray(q @ np.diag(np.geomspace(1.0, cond, n)) @ q.T), jnp.asarray(
        rng.normal(size=n))


@pytest.mark.parametrize("method", ["cg", "cr", "bicgstab"])
def test_krylov_solves_spd_systems(method):
    a, b = _spd(30, 0)
    jacobi = 1.0 / jnp.diag(a)
    x = krylov.SOLVERS[method](lambda v: a @ v, lambda v: jacobi * v, b, 200, rtol=1e-13)
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
        x = jax.jit(lambda b: krylov.SOLVERS[method](matvec, lambda v: v, b, 200, rtol=1e-8,
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
    x = krylov.bicgstab(lambda v: a @ v, lambda v: v, b, 200, rtol=1e-13)
    np.testing.assert_allclose(a @ x, b, atol=1e-8)


def test_conjugate_residual_is_monotone():
    a, b = _spd(40, 1, cond=1e6)
    norms = [float(jnp.linalg.norm(b - a @ krylov.cr(lambda v: a @ v, lambda v: v, b, k)))
             for k in range(1, 25)]
    assert all(n1 <= n0 * (1 + 1e-12) for n0, n1 in zip(norms, norms[1:]))
    assert norms[-1] < 0.5 * norms[0]


def test_krylov_stops_at_breakdown_without_nan():
    a = -jnp.eye(4)  # negative curvature: CG must stop, not divide by it
    x = krylov.cg(lambda v: a @ v, lambda v: v, jnp.ones(4), 10)
    assert bool(jnp.all(jnp.isfinite(x)))


def test_dual_projection_onto_the_cone():
    rows = Rows(jac_a=jnp.zeros((8, 6)), jac_b=jnp.zeros((8, 6)), error=jnp.zeros(8),
                         stiffness=jnp.ones(8), curvature=jnp.ones(8),
                         cone=jnp.asarray([0.5, 0.5]), body_a=(0,) * 8, body_b=(-1,) * 8,
                         n_contact=2)
    lam = jnp.asarray([2.0, -1.0, 7.0, -3.0, 3.0, 1.0, 4.0, 1.0])  # n | damping | t1 | t2
    out = project(rows, lam)
    np.testing.assert_allclose(out[:2], [2.0, 0.0])      # λ_n >= 0
    np.testing.assert_allclose(out[2:4], [7.0, -3.0])    # damping rows untouched
    np.testing.assert_allclose(jnp.hypot(out[4], out[6]), 1.0)  # onto the disc μ λ_n = 1
    np.testing.assert_allclose(out[4] / out[6], 3.0 / 4.0)      # direction kept
    np.testing.assert_allclose([out[5], out[7]], [0.0, 0.0])    # no normal force: no friction


# --- settings validation ------------------------------------------------------------------

@pytest.mark.parametrize("cls, kwargs, name", [
    (jc.Descent, {"iterations": 0}, "iterations"),
    (jc.Descent, {"alpha": 1.5}, "alpha"),
    (jc.Descent, {"alpha": 0.0}, "alpha"),
    (jc.Dual, {"update": "lazy"}, "update"),
    (jc.Dual, {"mass_splitting": 1}, "mass_splitting"),
    (jc.Dual, {"tol": -1.0}, "tol"),
    (jc.Newton, {"linear": "gmres"}, "linear"),
    (jc.Newton, {"krylov_iterations": 0}, "krylov_iterations"),
    (jc.Dual, {"ad": "fd"}, "ad"),
    (jc.Descent, {"adjoint": "lu"}, "adjoint"),
    (jc.Descent, {"preconditioner": "jacobi"}, "preconditioner"),
])
def test_bad_solver_settings_name_the_argument(cls, kwargs, name):
    with pytest.raises(ValueError, match=name):
        cls(**kwargs)


@pytest.mark.parametrize("contact, law", [(jc.Contact(normal="power"), "normal"),
                                          (jc.Contact(friction="tanh"), "friction")])
def test_dual_refuses_laws_without_a_compliance_form(contact, law):
    s = jc.Scene()
    s.add_plane()
    s.add_sphere(0.05, 1.0, (0, 0, 0.05))
    with pytest.raises(ValueError, match=law):
        s.build(contact=contact, solver=jc.Dual())
