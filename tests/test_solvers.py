"""The solver family: Newton (dense and matrix-free), Descent and Dual reach the same step.

- the constraint rows are an exact view of the primal problem (stationarity and Jacobians),
- every solver converges to the dense-Newton solution, and gives the same implicit gradient,
- an unconverged fixed-iteration solve says so in its StepInfo,
- the Gauss-Newton blocks and Dual's projection against their definitions (the Krylov
  solves: test_linear.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import dofs, terms
from jaxcontact.problem import RowBlock
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
def newton_run():
    model, state = _scene(SOLVERS["newton"])
    final, traj, info = _rollout(model, state)
    return model, final, traj, info


@pytest.fixture(scope="module")
def reference(newton_run):
    _, final, _, info = newton_run
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
    assert solver(early_exit=True).loops_exit_early
    assert not solver(early_exit=True, ad="unrolled").loops_exit_early
    assert not solver().loops_exit_early


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

def _flat(values):
    return jnp.concatenate([v.reshape(-1) for v in values])


@jax.jit
def _views(model, state, u):
    """The step from `state` at its solution u, seen as rows and as the primal problem."""
    args = (model, terms.prepare(model, state, jc.Control.zeros(model.n_body)))
    return {"args": args, "rows": terms.rows(u, args),
            "jacobian": jax.jacfwd(lambda x: _flat(rb.error for rb in terms.rows(x, args)))(u),
            "gradient": terms.gradient(u, args), "free_flight": terms.free_flight(args),
            "gauss_newton": terms.gauss_newton(u, args).block_diagonal()}


@pytest.fixture(scope="module")
def solved_step(newton_run):
    # the 9th step of the Newton rollout: into contact, the box lands, the ball slides. Its
    # solution u (the solver's answer from the velocities after 8 steps) is the velocity
    # after it
    model, _, traj, info = newton_run
    assert bool(info.converged[8])
    state, after = (jax.tree.map(lambda x: x[i], traj) for i in (7, 8))
    u = dofs.velocity(after)
    return model, u, _views(model, state, u)


def _multipliers(rows):
    """λ = Π(-s e) per block of rows (pairs share their row's stiffness)."""
    lam = tuple(-(rb.stiffness[..., None] if rb.pair else rb.stiffness) * rb.error
                for rb in rows)
    return project(rows, lam)


def _assemble(rows, n):
    """The rows' Jacobians scattered into one dense (R, n) matrix G (world columns dropped)."""
    out = []
    for rb in rows:
        jac, index = np.asarray(rb.flat_jac()), np.asarray(rb.index)
        g = np.zeros(jac.shape[:2] + (n + 1,))
        for e in range(jac.shape[0]):
            for k, column in enumerate(index[e]):
                g[e, :, column] += jac[e, :, k]
        out.append(g[:, :, :n].reshape(-1, n))
    return np.concatenate(out)


def _contact_blocks(model, rows):
    """Indices of the contact terms' blocks of rows: (normal, damping, friction pairs)."""
    names = {t.name for t in model.terms if t.reports_gaps}
    return [i for i, rb in enumerate(rows) if rb.term in names]


def test_rows_stationarity_is_the_primal_residual(solved_step):
    # M (u - ũ) = Σ Gᵀ λ with λ = Π(-s e) at the primal solution (huber friction, linear law)
    model, u, view = solved_step
    rows, args = view["rows"], view["args"]
    normal = [rows[i] for i in _contact_blocks(model, rows) if rows[i].kind == "unilateral"]
    assert int(sum(jnp.sum(rb.error < 0) for rb in normal)) >= 2, "scene must be in contact"
    lam = _multipliers(rows)
    n = u.shape[0]
    impulse = sum(rb.transpose_apply(l, n) for rb, l in zip(rows, lam))
    momentum = terms.mass(args).apply(u - view["free_flight"])
    np.testing.assert_allclose(momentum, impulse, atol=1e-9)
    np.testing.assert_allclose(view["gradient"], momentum - impulse, atol=1e-9)


def test_row_jacobians_match_autodiff_of_the_errors(solved_step):
    model, u, view = solved_step
    rows, dense = view["rows"], np.asarray(view["jacobian"])  # (R, 6N)
    # position rows (gaps, springs) depend on u through q+(u); velocity rows (contact damping
    # and friction) are linear in u with the frame at u: compare the frame-frozen part via G u
    n = model.n_body
    assembled = _assemble(rows, 6 * n)
    contact = _contact_blocks(model, rows)
    offsets = np.cumsum([0] + [rb.error.size for rb in rows])
    velocity = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in contact
                               if rows[i].kind != "unilateral"])
    position = np.setdiff1d(np.arange(offsets[-1]), velocity)
    np.testing.assert_allclose(assembled[position], dense[position], atol=1e-10)
    np.testing.assert_allclose(assembled[velocity] @ np.asarray(u),
                               np.asarray(_flat(rb.error for rb in rows))[velocity], atol=1e-12)
    # K contact points with a normal, a damping and two friction rows each; the springs: one
    # stretch row (rest length 0.1) and the three rows of the zero-length one
    assert [rows[i].kind for i in contact] == ["unilateral", "bilateral", "disc"] * (
        len(contact) // 3)
    k = sum(rows[i].error.size for i in contact if rows[i].kind == "unilateral")
    assert assembled.shape == (4 * k + 1 + 3, 6 * n)


def test_gauss_newton_blocks_are_the_diagonal_of_the_assembled_hessian(solved_step):
    model, u, view = solved_step
    rows = view["rows"]
    n = model.n_body
    g = _assemble(rows, 6 * n)
    curvature = np.asarray(_flat(rb.flat(rb.curvature) for rb in rows))
    mass = terms.mass(view["args"]).blocks[0]
    dense = g.T @ (curvature[:, None] * g)
    got = view["gauss_newton"].blocks[0]
    for i in range(n):
        np.testing.assert_allclose(got[i], mass[i] + dense[6 * i:6 * i + 6, 6 * i:6 * i + 6],
                                   atol=1e-9)


# --- projection -------------------------------------------------------------------------

def _row_block(error, stiffness, cone, kind, partner=-1, pair=False):
    e = error.shape[0]
    return RowBlock(error=error, jac=jnp.zeros(error.shape + (6,)), stiffness=stiffness,
                    curvature=stiffness, cone=cone, index=jnp.zeros((e, 6), jnp.int32),
                    blocks=jnp.zeros((e, 1), jnp.int32), slots=((0, 0, 6),), kind=kind,
                    partner=partner, pair=pair)


def test_dual_projection_onto_the_cone():
    # two contacts of one element: normal rows | damping rows | friction pairs (t1, t2)
    ones, zeros = jnp.ones((1, 2)), jnp.zeros((1, 2))
    rows = (_row_block(zeros, ones, zeros, "unilateral"),
            _row_block(zeros, ones, zeros, "bilateral"),
            _row_block(jnp.zeros((1, 2, 2)), ones, jnp.full((1, 2), 0.5), "disc", partner=0,
                       pair=True))
    lam = (jnp.asarray([[2.0, -1.0]]), jnp.asarray([[7.0, -3.0]]),
           jnp.asarray([[[3.0, 4.0], [1.0, 1.0]]]))   # n | damping | (t1, t2) per contact
    out = [np.asarray(x).reshape(-1) for x in project(rows, lam)]
    np.testing.assert_allclose(out[0], [2.0, 0.0])      # λ_n >= 0
    np.testing.assert_allclose(out[1], [7.0, -3.0])     # damping rows untouched
    t1, t2 = out[2][0::2], out[2][1::2]
    np.testing.assert_allclose(jnp.hypot(t1[0], t2[0]), 1.0)  # onto the disc μ λ_n = 1
    np.testing.assert_allclose(t1[0] / t2[0], 3.0 / 4.0)      # direction kept
    np.testing.assert_allclose([t1[1], t2[1]], [0.0, 0.0])    # no normal force: no friction


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
