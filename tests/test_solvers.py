"""The solver family: Newton (dense and matrix-free), Descent and Dual reach the same step.

- the constraint rows are an exact view of the primal problem (stationarity and Jacobians),
- every solver converges to the dense-Newton solution, and gives the same implicit gradient
  (the scene and its runs: _helpers.py; an unconverged solve's report: test_step.py; the
  dense vs matrix-free adjoint: test_adjoint.py),
- the Gauss-Newton blocks and Dual's projection against their definitions (the Krylov
  solves: test_linear.py).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import dofs, terms
from jaxcontact.problem import RowBlock
from jaxcontact.solvers.dual import project
from _helpers import solver_rollout, solver_run, solver_scene

SOLVERS = {
    "newton": jc.Newton(),
    # early exit: the Krylov loops stop at their tolerance (same answers as the masked scans);
    # 30 iterations: the first step starts a spring of rest length 0.1 at length zero, the
    # top of its energy's hat, where the Krylov lag phase needs 22 (15 before its refused
    # Newton steps handed over to the row model, whose curvature there is the spring's,
    # not positive: design note 47; dense Newton's modified Cholesky 11)
    "newton_bicgstab": jc.Newton(linear="bicgstab", early_exit=True, iterations=30),
    # symmetric models drop the lag terms of the Jacobian: linear convergence, more iterations
    "newton_cg": jc.Newton(linear="cg", iterations=40),
    "newton_cr": jc.Newton(linear="cr", iterations=40),
    "descent": jc.Descent(iterations=400),
    "dual": jc.Dual(iterations=600, update="exact"),
}


@functools.cache
def _run(name):
    """(final, traj, info) of the solver scene's rollout with SOLVERS[name]; computed once."""
    model, state = solver_scene(SOLVERS[name])
    return solver_rollout(model, state)


@functools.cache
def _gradient(name):
    """The gradient of a linear functional of the solver scene's final state with
    SOLVERS[name] (`_helpers.solver_run`: its rollout and gradient as one program, the larger
    of the two). Only the slow run asks for it: CI checks implicit gradients on smaller scenes
    (against finite differences in test_gradients.py, dense against matrix-free in
    test_adjoint.py)."""
    return solver_run(SOLVERS[name])[1]


@pytest.fixture(scope="module")
def newton_run():
    model, _ = solver_scene(SOLVERS["newton"])
    final, traj, info = _run("newton")
    return model, final, traj, info


@pytest.fixture(scope="module")
def reference(newton_run):
    _, final, _, info = newton_run
    assert bool(jnp.all(info.converged))
    return final


def _assert_reaches(final, info, reference):
    assert bool(jnp.all(info.converged)), f"max residual {float(jnp.max(info.residual)):.2e}"
    assert float(jnp.max(info.residual)) <= 1e-10
    np.testing.assert_allclose(final.pos, reference.pos, atol=1e-9)
    np.testing.assert_allclose(final.vel, reference.vel, atol=1e-7)
    np.testing.assert_allclose(final.ang_vel, reference.ang_vel, atol=1e-6)


# all slow (each ~1-2 min of compilation, plus the Newton reference). In CI, test_physics
# runs Descent and Dual against closed forms, and the matrix-free Newton solvers are checked
# on a small scene by test_krylov_newton_reaches_the_dense_newton_solution below
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) for n in SOLVERS if n != "newton"])
def test_every_solver_reaches_the_newton_solution(name, reference):
    final, _, info = _run(name)
    _assert_reaches(final, info, reference)


def _coupled_spheres(solver):
    """Two spheres sliding and spinning on the ground, coupled by a spring: the spring's
    off-diagonal blocks keep the block-Jacobi preconditioner from solving the step alone."""
    s = jc.Scene(dt=0.002, friction=0.5)
    s.add_plane()
    a = s.add_sphere(0.05, 1.0, (0.0, 0.0, 0.0499), vel=(1.0, 0.0, 0.0), ang_vel=(0.0, 0.0, 3.0))
    b = s.add_sphere(0.05, 2.0, (0.3, 0.0, 0.052), vel=(0.0, 0.5, -0.2), ang_vel=(1.0, 2.0, 0.5))
    s.add_spring(a, b, stiffness=5e2, anchor_a=(0.0, 0.0, 0.05), anchor_b=(-0.1, 0.0, 0.0),
                 rest_length=0.1)
    s.exclude_pair(a, b)
    return s.build(solver=solver)


@functools.cache
def _coupled_run(name):
    """(final, traj, info) of the coupled spheres' rollout with SOLVERS[name]; computed once."""
    model, state = _coupled_spheres(SOLVERS[name])
    return solver_rollout(model, state)


# CI's check of the matrix-free Newton solvers is BiCGSTAB on the exact Jacobian; CR on the
# symmetric one (CG is its twin) is the slow run's
@pytest.mark.parametrize("name", ["newton_bicgstab", pytest.param("newton_cr",
                                                                  marks=pytest.mark.slow)])
def test_krylov_newton_reaches_the_dense_newton_solution(name):
    # same step as dense Newton, on a small coupled scene
    reference, _, info = _coupled_run("newton")
    assert bool(jnp.all(info.converged))
    assert bool(jnp.all(reference.pos[:, 2] < 0.05)), "both spheres must stay in contact"
    final, _, info = _coupled_run(name)
    _assert_reaches(final, info, reference)


@pytest.fixture(scope="module")
def reference_grad():
    return _gradient("newton")


@pytest.mark.parametrize("name", [
    pytest.param("newton_bicgstab", marks=pytest.mark.slow),
    pytest.param("newton_cr", marks=pytest.mark.slow),
    pytest.param("descent", marks=pytest.mark.slow), pytest.param("dual", marks=pytest.mark.slow)])
def test_implicit_gradient_is_the_same_whichever_solver_converged(name, reference_grad):
    grad = _gradient(name)
    for got, want in zip(jax.tree.leaves(grad), jax.tree.leaves(reference_grad)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


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


# slow: the solver scene's dense-Newton rollout they read is ~100 s of compilation. In CI the
# same derivation from the terms is checked by test_terms.py (gradient, Jacobians and
# Gauss-Newton blocks of a mixed scene against autodiff), and Dual, which steps on these rows,
# against closed forms by test_physics.py and test_springs.py
ROWS_TIER = pytest.mark.slow


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
    """The rows' Jacobians as one dense (R, n) matrix G."""
    return np.concatenate([np.asarray(rb.dense_jac(n)) for rb in rows])


def _contact_blocks(model, rows):
    """Indices of the contact terms' blocks of rows: (normal, damping, friction pairs)."""
    names = {t.name for t in model.terms if t.reports_gaps}
    return [i for i, rb in enumerate(rows) if rb.term in names]


@ROWS_TIER
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


@ROWS_TIER
def test_row_jacobians_match_autodiff_of_the_errors(solved_step):
    model, u, view = solved_step
    rows, dense = view["rows"], np.asarray(view["jacobian"])  # (R, 6N)
    # position rows (gaps, springs, and contact damping: the gap's rate over the step, design
    # note 41) depend on u through q+(u); velocity rows (friction) are linear in u with the
    # frame at u: compare the frame-frozen part via G u
    n = model.n_body
    assembled = _assemble(rows, 6 * n)
    contact = _contact_blocks(model, rows)
    offsets = np.cumsum([0] + [rb.error.size for rb in rows])
    velocity = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in contact
                               if rows[i].kind == "disc"])
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


@ROWS_TIER
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


def test_a_newton_step_that_converges_ends_the_solve():
    """The driver tests the residual at the iterate a step just reached (design note 34): a
    particle on a zero-length spring to the world is a quadratic step, which one Newton
    iteration solves, and the solve stops there. Before, the driver found convergence only at
    the start of the next iteration, so this step cost two whole iterations."""
    passes = []

    @dataclasses.dataclass(frozen=True)
    class CountingNewton(jc.Newton):
        def iteration(self, problem, carry, args, tol):
            jax.debug.callback(lambda: passes.append(1))
            return super().iteration(problem, carry, args, tol)

    m, k = 0.5, 1e3
    scene = jc.Scene(dt=0.002)
    p = scene.add_particle(m, (0.3, 0.0, 1.0))
    scene.attach(p, -1, stiffness=k, damping=2.0 * np.sqrt(k * m))
    model, state = scene.build(solver=CountingNewton(), dtype=jnp.float64)
    _, info = jax.jit(jc.step)(model, state)
    jax.effects_barrier()
    assert bool(info.converged) and int(info.iterations) == 1
    assert len(passes) == 1


def test_a_light_box_tipping_at_a_large_step_converges_wherever_a_root_exists():
    """A 10 g cube rolling onto its leading edge at Δt = 1e-2, μ = 1, critically damped
    k_n = 1e5 (k_n Δt²/m = 1e3; the convergence grid's hardest kind of cell). The lag and
    Newton phases circle the roots of its tipping steps; the residual phase (design notes 43,
    51), entered after `residual_after` iterations from the smallest residual they reached,
    reaches each one. The first step,
    the edge striking the ground, was taken to have no root (least squares from 400 starts
    ended at 0.2-0.3 m/s, note 43); Newton's steps judged by the residual find one: the box
    pivots on its leading edge, its centre rising as h (cos θ + sin θ) does."""
    mass, k = 0.01, 1e5
    half = 0.05
    scene = jc.Scene(dt=0.01, friction=1.0, stiffness=k, damping=2.0 * np.sqrt(k * mass))
    scene.add_plane()
    scene.add_box(half, mass, (0.0, 0.0, half), vel=(1.0, 0.0, 0.0), ang_vel=(0.0, 20.0, 0.0))
    model, state = scene.build(dtype=jnp.float64)
    solver = model.solver
    assert solver.has_residual_phase(model, 6)
    # batched with the same box thrown at half the speed: the phase's trials under vmap
    states = jax.tree.map(lambda a: jnp.stack([a, a]), state)
    states = states.replace(vel=states.vel.at[1].multiply(0.5))
    _, traj, info = jax.jit(jax.vmap(lambda s: jc.rollout(model, s, steps=25,
                                                          return_info=True)))(states)
    assert bool(jnp.all(info.converged)), (np.asarray(info.iterations),
                                           np.asarray(info.residual))
    traj, iterations = jax.tree.map(lambda a: a[0], traj), np.asarray(info.iterations[0])
    # the first step and others went on into the residual phase
    assert iterations[0] > solver.residual_after
    assert np.sum(iterations > solver.residual_after) >= 3
    # after the first step the box stands on its leading edge (+x), tilted by θ about y
    quat = np.asarray(traj.quat[0, 0])
    theta = 2.0 * np.arctan2(quat[2], quat[0])
    assert 0.05 < theta < 0.25, theta
    np.testing.assert_allclose(float(traj.pos[0, 0, 2]),
                               half * (np.cos(theta) + np.sin(theta)), atol=1e-3)